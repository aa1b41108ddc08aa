/*
 * Shared helpers of the simverbs raw benchmarks (sv-rawbench, pvm-bw): time, statistics,
 * the data pattern and a tiny message exchange over a socketpair between the two processes.
 */
#ifndef SB_COMMON_H
#define SB_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic time in nanoseconds. */
uint64_t sb_now_ns(void);
/* CPU time used by this process (all threads), in nanoseconds. Bandwidth per CPU second is
 * insensitive to other load on the machine (time the process was not running is not counted). */
uint64_t sb_cpu_ns(void);

/* Median of n doubles; sorts v in place. n must be > 0. */
double sb_median(double *v, size_t n);
double sb_min(const double *v, size_t n);
double sb_max(const double *v, size_t n);

/* Pattern byte at offset off for a given seed; both processes compute the same bytes. */
static inline uint8_t sb_pattern(uint64_t seed, size_t off)
{
	return (uint8_t)((off * 131u + (off >> 12) * 7u + seed * 29u + 1u) & 0xffu);
}
void sb_fill(uint8_t *buf, size_t len, uint64_t seed);
/* Returns the first offset that differs from the pattern, or len when all match. */
size_t sb_verify(const uint8_t *buf, size_t len, uint64_t seed);

/* Blocking exchange of fixed-size records over a stream socket / pipe. 0 = ok, -1 = error or
 * peer closed (message printed). */
int sb_send_all(int fd, const void *buf, size_t len);
int sb_recv_all(int fd, void *buf, size_t len);
/* Both sides call it: each sends one byte and waits for the other's. */
int sb_barrier(int fd);

/* Parses a size with optional K/M/G suffix (binary). Returns 0 on success. */
int sb_parse_size(const char *s, size_t *out);

#endif
