/*
 * simverbs-ctl: runs simverbs_control() commands against the fabric named by
 * SIMVERBS_FABRIC (see README.md), e.g. `simverbs-ctl port-down simib0 1`.
 * The fabric and its knobs live as long as some process is attached; the CLI
 * attaches only for the duration of the command.
 */
#include <stdio.h>
#include <string.h>

int simverbs_control(const char *cmd);

int main(int argc, char **argv)
{
	char cmd[512] = "";
	size_t o = 0;
	int rc;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: simverbs-ctl <command> [args...]   (see test/simverbs/README.md)\n");
		return argc < 2 ? 2 : 0;
	}
	for (int i = 1; i < argc; i++) {
		int n = snprintf(cmd + o, sizeof(cmd) - o, "%s%s", i > 1 ? " " : "", argv[i]);

		if (n < 0 || (size_t)n >= sizeof(cmd) - o) {
			fprintf(stderr, "simverbs-ctl: command too long\n");
			return 2;
		}
		o += (size_t)n;
	}
	rc = simverbs_control(cmd);
	if (rc) {
		fprintf(stderr, "simverbs-ctl: '%s' failed: %s\n", cmd, strerror(rc));
		return 1;
	}
	return 0;
}
