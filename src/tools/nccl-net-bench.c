/*
 * nccl-net-bench.c - what every file of nccl-net-bench shares: the rank's
 * error messages, the clock and the run's deadline. Options, the per-size
 * measurement driver and main() are in nccl-net-bench-main.c.
 *
 * nccl-net-bench loads an ncclNet plugin (ours by default) and measures
 * point-to-point bandwidth and latency, grouped receives and a ring
 * AllReduce through it, driving it the way NCCL's proxy does. See
 * docs/benchmark.md and `nccl-net-bench --help`.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "tools/nccl-net-bench.h"

int nb_rank = -1;
double nb_deadline;

void nb_err(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (nb_rank >= 0)
		fprintf(stderr, "nccl-net-bench: rank %d: error: %s\n", nb_rank, msg);
	else
		fprintf(stderr, "nccl-net-bench: error: %s\n", msg);
}

double nb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nb_past_deadline(const char *what)
{
	if (nb_now() < nb_deadline)
		return 0;
	nb_err("timeout during %s (raise --timeout if the run is just slow)", what);
	return 1;
}
