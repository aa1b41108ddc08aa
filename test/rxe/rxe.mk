# make check-rxe: the plugin on the Linux kernel's soft-RoCE (rdma_rxe) in a
# QEMU virtual machine (test/rxe/run.sh; docs/rxe.md). Not part of make check:
# it needs root, downloads a kernel package and takes minutes. A skip (no VM to
# be had: the script's exit 77) prints "check-rxe: SKIP" and does not fail
# make; the counts are in rxe-results.txt. .ci/run runs the script itself.
EXTRA_DIST += test/rxe/run.sh test/rxe/initramfs-init test/rxe/vm-init test/rxe/vm-net test/rxe/vm-twohost \
	test/rxe/vm-tests
check-rxe: all
	@rc=0; NV_BUILD_DIR="$(abs_top_builddir)" $(SHELL) "$(abs_top_srcdir)/test/rxe/run.sh" || rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "check-rxe: SKIP (see above)"; exit 0; fi; exit $$rc
.PHONY: check-rxe
