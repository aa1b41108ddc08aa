/*
 * os.h - operating-system services of the base layer (os.c): the monotonic
 * clock, the RLIMIT_MEMLOCK limit and a socket peer check. No verbs, no plugin state.
 */
#ifndef NV_OS_H
#define NV_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t nv_now_ns(void);
/* 1 while the peer of connected socket fd has not closed or reset it (a
 * non-blocking MSG_PEEK; the data stays queued), 0 otherwise. */
int nv_fd_peer_alive(int fd);
/* As nv_fd_peer_alive, telling why not: 1 alive, 0 the peer closed it (EOF),
 * -errno the connection failed (ECONNRESET: reset; ETIMEDOUT: the peer's host
 * stopped answering, e.g. TCP keepalive; EBADF for fd < 0). The kernel reports
 * a connection's error once: a later call sees EOF. */
int nv_fd_peer_state(int fd);
/* Why the peer of a handshake connection is gone, for a message: the state
 * nv_fd_peer_state gave (0 or -errno). Static text. */
const char *nv_peer_gone_why(int state);
/* 1 bytes are waiting to be read on socket fd, 0 none (yet), -1 EOF or error. Never blocks. */
int nv_fd_pending(int fd);
/* Sleeps ms milliseconds (resumes after signals). Control path only. */
void nv_sleep_ms(uint64_t ms);
/* "unlimited", "N bytes" or "unknown (...)" into buf; returns buf. */
char *nv_memlock_str(char *buf, size_t len);
/* True when the kernel applies RLIMIT_MEMLOCK to this process's pinning: the
 * limit is finite and the process lacks CAP_IPC_LOCK. */
bool nv_memlock_applies(void);

#endif /* NV_OS_H */
