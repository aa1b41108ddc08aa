# The documentation beyond the README (docs/*.md, test/README.md) and its
# checks: docs/knobs.md's knob table is generated from the parameter table in
# src/param.c by scripts/gen-knobs.sh and must be up to date; every page is
# listed here, every relative link resolves, no line runs past 400 characters.
EXTRA_DIST += docs/design.md docs/knobs.md docs/troubleshooting.md docs/install.md \
	docs/benchmark.md docs/measurements.md docs/comparison.md docs/testing.md \
	docs/sim-cluster.md docs/net-api.md docs/style.md docs/bench-warmup.md docs/testing-real-devices.md docs/rxe.md test/README.md \
	docs/coverage-and-load-tests.md docs/rma.md \
	scripts/gen-knobs.sh
dist_check_SCRIPTS += docs/test-knobs-doc.sh docs/test-docs.sh
TESTS += docs/test-knobs-doc.sh docs/test-docs.sh
