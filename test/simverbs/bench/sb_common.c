#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "sb_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t sb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sb_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double sb_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double sb_min(const double *v, size_t n)
{
	double m = v[0];

	for (size_t i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

double sb_max(const double *v, size_t n)
{
	double m = v[0];

	for (size_t i = 1; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

void sb_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = sb_pattern(seed, i);
}

size_t sb_verify(const uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != sb_pattern(seed, i))
			return i;
	return len;
}

int sb_send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "exchange: write: %s\n", n < 0 ? strerror(errno) : "closed");
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sb_recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "exchange: read: %s\n", n < 0 ? strerror(errno) : "peer closed");
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sb_barrier(int fd)
{
	char c = 'b';

	if (sb_send_all(fd, &c, 1))
		return -1;
	return sb_recv_all(fd, &c, 1);
}

int sb_parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K':
		v <<= 10;
		end++;
		break;
	case 'm': case 'M':
		v <<= 20;
		end++;
		break;
	case 'g': case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}
