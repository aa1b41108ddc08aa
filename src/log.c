/*
 * log.c - nv_log(): NCCL's logger once init handed it over, else stderr.
 * Without NCCL's logger, WARN is always printed and INFO/TRACE follow
 * NCCL_DEBUG (read once), so standalone tools and tests see them too.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <pthread.h>

#include "nv_common.h"
#include "log.h"

static _Atomic(ncclDebugLogger_t) nv_logger;
static pthread_once_t nv_stderr_once = PTHREAD_ONCE_INIT;
static int nv_stderr_level = NV_LOG_WARN;

void nv_log_set_logger(ncclDebugLogger_t logger)
{
	atomic_store(&nv_logger, logger);
}

static void nv_stderr_level_init(void)
{
	const char *s = getenv("NCCL_DEBUG");

	if (!s)
		return;
	if (!strcasecmp(s, "INFO"))
		nv_stderr_level = NV_LOG_INFO;
	else if (!strcasecmp(s, "TRACE"))
		nv_stderr_level = NV_LOG_TRACE;
	else if (!strcasecmp(s, "VERSION") || !strcasecmp(s, "NONE"))
		nv_stderr_level = NV_LOG_WARN; /* WARN stays visible: it explains failures */
}

static const char *nv_level_name(enum nv_log_level level)
{
	switch (level) {
	case NV_LOG_WARN:
		return "WARN";
	case NV_LOG_INFO:
		return "INFO";
	case NV_LOG_TRACE:
		return "TRACE";
	default:
		return "LOG";
	}
}

void nv_log(enum nv_log_level level, unsigned long subsys, const char *file, int line,
	    const char *fmt, ...)
{
	int saved_errno = errno;
	ncclDebugLogger_t logger = atomic_load(&nv_logger);
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (logger) {
		logger((ncclDebugLogLevel)level, subsys, file, line, "%s", msg);
	} else {
		pthread_once(&nv_stderr_once, nv_stderr_level_init);
		if ((int)level <= nv_stderr_level)
			fprintf(stderr, "[%d] %s %s\n", (int)getpid(), nv_level_name(level), msg);
	}
	errno = saved_errno;
}
