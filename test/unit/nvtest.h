/*
 * nvtest.h - the few helpers the unit tests share: a counting CHECK, a
 * capturing logger (so tests can assert on WARN text) and an environment
 * table for nv_param_load_from().
 */
#ifndef NV_TEST_H
#define NV_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int nvt_failures;

#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			nvt_failures++; \
		} \
	} while (0)

/* Every WARN since the last nvt_log_clear(), newline separated. */
static char nvt_warns[16384];
static int nvt_nwarn;

/*
 * A test's own look at each message nvt_logger formats, before it keeps
 * WARNs: returning true drops the message from nvt_warns.
 */
static bool (*nvt_log_hook)(ncclDebugLogLevel level, const char *msg);

/* Appends msg and a newline to the NUL-terminated text in buf (size bytes). */
static inline void nvt_append(char *buf, size_t size, const char *msg)
{
	size_t used = strlen(buf);

	snprintf(buf + used, size - used, "%s\n", msg);
}

__attribute__((format(printf, 5, 6), unused))
static void nvt_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		       const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	bool drop;

	(void)flags;
	(void)file;
	(void)line;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	drop = nvt_log_hook && nvt_log_hook(level, msg);
	if (level == NCCL_LOG_WARN && !drop) {
		nvt_append(nvt_warns, sizeof(nvt_warns), msg);
		nvt_nwarn++;
	}
	if (getenv("NVT_VERBOSE"))
		fprintf(stderr, "[log %d] %s\n", (int)level, msg);
}

static inline void nvt_log_capture(void)
{
	nv_log_set_logger(nvt_logger);
}

static inline void nvt_log_clear(void)
{
	nvt_warns[0] = '\0';
	nvt_nwarn = 0;
}

/* A NULL-terminated list of "NAME=value" strings acting as the environment. */
static inline const char *nvt_env(const char *name, void *arg)
{
	const char *const *kv = arg;
	size_t n = strlen(name);

	for (; kv && *kv; kv++)
		if (!strncmp(*kv, name, n) && (*kv)[n] == '=')
			return *kv + n + 1;
	return NULL;
}

static inline int nvt_exit(const char *name)
{
	if (nvt_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, nvt_failures);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

#endif /* NV_TEST_H */
