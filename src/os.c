/*
 * os.c - operating-system services every layer may use: the monotonic
 * clock and the locked-memory limit (for messages about registrations).
 */
#include "config.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os.h"

uint64_t nv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int nv_fd_peer_state(int fd)
{
	char c;
	ssize_t n;

	if (fd < 0)
		return -EBADF;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return 1;
	if (n == 0)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 1;
	return -errno;
}

int nv_fd_peer_alive(int fd)
{
	return nv_fd_peer_state(fd) == 1;
}

const char *nv_peer_gone_why(int state)
{
	switch (-state) {
	case 0:
		return "the peer closed its side (its process exited or was killed, or it closed "
		       "the comm)";
	case ECONNRESET:
		return "the peer's host reset the connection (its process died with data unread, "
		       "or a firewall or its TCP stack dropped the connection)";
	case ETIMEDOUT:
		return "the peer's host stopped answering on the connection (no TCP keepalive "
		       "answer: the host is down or hung, or the network between the hosts is cut)";
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
		return "the peer's host cannot be reached any more (no route to it: the network "
		       "between the hosts is down)";
	default:
		return "the connection to the peer failed";
	}
}

int nv_fd_pending(int fd)
{
	char c;
	ssize_t n;

	if (fd < 0)
		return -1;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return 1;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	return -1;
}

void nv_sleep_ms(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
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

/* CAP_IPC_LOCK in the effective set: the kernel's pinning then ignores the limit. */
static bool nv_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) != 0)
		return false;
	return (d[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1;
}

bool nv_memlock_applies(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY)
		return false;
	return !nv_cap_ipc_lock();
}
