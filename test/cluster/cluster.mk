# The simulated cluster (docs/sim-cluster.md): sim-cluster makes
# hosts out of network namespaces; these tests run the plugin across them (they skip, 77,
# without root or network namespaces).
CLUSTER_TESTS = \
	test/cluster/cl-ring.sh \
	test/cluster/cl-gid.sh \
	test/cluster/cl-fabrics.sh \
	test/cluster/cl-linkdown.sh \
	test/cluster/cl-vnic.sh \
	test/cluster/cl-failover.sh \
	test/cluster/cl-mpirun.sh \
	test/cluster/cl-sysfs.sh \
	test/cluster/cl-subnet.sh \
	test/cluster/cl-eager.sh \
	test/cluster/cl-flap.sh \
	test/cluster/cl-rma.sh
TESTS += $(CLUSTER_TESTS)
# The ring and the link-down run once more with the eager path off: test/reruns.mk.
dist_check_SCRIPTS += $(CLUSTER_TESTS) test/cluster/sim-cluster test/cluster/sim-cluster-rsh
EXTRA_DIST += test/cluster/cl-common.sh
