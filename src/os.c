/*
 * os.c - operating-system services every layer may use: the monotonic
 * clock and the locked-memory limit (for messages about registrations).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "os.h"

uint64_t nv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

char *nv_memlock_str(char *buf, size_t len)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		snprintf(buf, len, "unknown (%s)", strerror(errno));
	else if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%llu bytes", (unsigned long long)rl.rlim_cur);
	return buf;
}

bool nv_memlock_unlimited(void)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY;
}
