/*
 * nccl-net-bench-oob.c - the out-of-band side: starting local ranks (--np),
 * the TCP rendezvous at the root (rank 0), and the two collectives the
 * benchmark needs (allgather, barrier). Star topology through the root; every
 * wait is bounded by nb_deadline and a closed socket means a dead peer.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "tools/nccl-net-bench.h"

#define NB_OOB_MAGIC 0x6e62306fU

struct nb_hello {
	uint32_t magic;
	int32_t rank;
	int32_t nranks;
};

int nb_parse_hostport(const char *s, char *host, size_t hlen, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long p;

	if (!colon || colon == s || (size_t)(colon - s) >= hlen)
		return -1;
	p = strtol(colon + 1, &end, 10);
	if (*end || p <= 0 || p > 65535)
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = '\0';
	*port = (int)p;
	return 0;
}

static void nb_sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Waits until fd is readable (or writable); -1 on deadline. */
static int nb_wait_fd(int fd, short ev, const char *what)
{
	struct pollfd p = { .fd = fd, .events = ev };

	for (;;) {
		int ms = (int)((nb_deadline - nb_now()) * 1000);

		if (ms <= 0)
			return nb_past_deadline(what);
		if (ms > 200)
			ms = 200;
		if (poll(&p, 1, ms) > 0)
			return 0;
	}
}

static int nb_read_full(int fd, void *buf, size_t len, int peer)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n;

		if (nb_wait_fd(fd, POLLIN, "out-of-band receive") != 0)
			return -1;
		n = read(fd, p, len);
		if (n == 0) {
			nb_err("lost the out-of-band connection to rank %d (it exited or was killed)",
			       peer);
			return -1;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			nb_err("out-of-band read from rank %d: %s", peer, strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int nb_write_full(int fd, const void *buf, size_t len, int peer)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n;

		if (nb_wait_fd(fd, POLLOUT, "out-of-band send") != 0)
			return -1;
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			nb_err("out-of-band send to rank %d: %s", peer, strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int nb_listen_port(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		nb_err("socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 128) != 0) {
		nb_err("cannot listen on port %d for the rendezvous: %s", port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int nb_root_accept(struct nb_oob *oob, int lfd)
{
	int got = 0;

	while (got < oob->nranks - 1) {
		struct nb_hello h;
		int fd;

		if (nb_wait_fd(lfd, POLLIN, "rendezvous (waiting for ranks to join)") != 0)
			return -1;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		nb_sock_opts(fd);
		if (nb_read_full(fd, &h, sizeof(h), -1) != 0 || h.magic != NB_OOB_MAGIC ||
		    h.nranks != oob->nranks || h.rank <= 0 || h.rank >= oob->nranks ||
		    oob->fds[h.rank] >= 0) {
			nb_err("rendezvous: dropping a connection with a bad hello (rank %d of %d)",
			       h.rank, h.nranks);
			close(fd);
			continue;
		}
		oob->fds[h.rank] = fd;
		got++;
	}
	return 0;
}

static int nb_connect_root(struct nb_oob *oob, const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct nb_hello h = { NB_OOB_MAGIC, oob->rank, oob->nranks };
	struct addrinfo *res = NULL;
	char ps[16];
	int fd = -1;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) {
		nb_err("cannot resolve the rendezvous host %s", host);
		return -1;
	}
	while (fd < 0) {
		fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (nb_past_deadline("rendezvous (connecting to the root)")) {
			freeaddrinfo(res);
			return -1;
		}
		usleep(20000);
	}
	freeaddrinfo(res);
	nb_sock_opts(fd);
	oob->fds[0] = fd;
	return nb_write_full(fd, &h, sizeof(h), 0);
}

int nb_oob_init(struct nb_oob *oob, int rank, int nranks, const char *host, int port,
		int listen_fd)
{
	int i, rc;

	oob->rank = rank;
	oob->nranks = nranks;
	oob->fds = malloc(sizeof(int) * (size_t)nranks);
	if (!oob->fds)
		return -1;
	for (i = 0; i < nranks; i++)
		oob->fds[i] = -1;
	if (rank != 0)
		return nb_connect_root(oob, host, port);
	if (listen_fd < 0)
		listen_fd = nb_listen_port(port);
	if (listen_fd < 0)
		return -1;
	rc = nb_root_accept(oob, listen_fd);
	close(listen_fd);
	return rc;
}

int nb_oob_allgather(struct nb_oob *oob, const void *mine, void *all, size_t size)
{
	char *a = all;
	int r;

	if (oob->rank != 0) {
		if (nb_write_full(oob->fds[0], mine, size, 0) != 0)
			return -1;
		return nb_read_full(oob->fds[0], all, size * (size_t)oob->nranks, 0);
	}
	memcpy(a, mine, size);
	for (r = 1; r < oob->nranks; r++)
		if (nb_read_full(oob->fds[r], a + size * (size_t)r, size, r) != 0)
			return -1;
	for (r = 1; r < oob->nranks; r++)
		if (nb_write_full(oob->fds[r], all, size * (size_t)oob->nranks, r) != 0)
			return -1;
	return 0;
}

int nb_oob_barrier(struct nb_oob *oob)
{
	char c = 1, *all = malloc((size_t)oob->nranks);
	int rc;

	if (!all)
		return -1;
	rc = nb_oob_allgather(oob, &c, all, 1);
	free(all);
	return rc;
}

int nb_oob_peer_gone(const struct nb_oob *oob)
{
	int r;

	for (r = 0; r < oob->nranks; r++) {
		char c;
		ssize_t n;

		if (oob->fds[r] < 0)
			continue;
		n = recv(oob->fds[r], &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
			       errno != EINTR))
			return oob->rank == 0 ? r : 0;
	}
	return -1;
}

int nb_oob_peer_lost(struct nb_oob *oob)
{
	int r = nb_oob_peer_gone(oob);

	if (r < 0)
		return 0;
	nb_err("lost the out-of-band connection to rank %d (it exited or was killed)", r);
	return 1;
}

void nb_oob_close(struct nb_oob *oob)
{
	int r;

	if (!oob->fds)
		return;
	for (r = 0; r < oob->nranks; r++)
		if (oob->fds[r] >= 0)
			close(oob->fds[r]);
	free(oob->fds);
	oob->fds = NULL;
}

/* ---- --np: local ranks ---------------------------------------------------- */

/* A rank's exit code; a rank killed by a signal counts as 1 (the message says which). */
static int nb_status_code(int st, int rank)
{
	if (WIFEXITED(st)) {
		if (WEXITSTATUS(st))
			fprintf(stderr, "nccl-net-bench: rank %d exited with status %d\n", rank,
				WEXITSTATUS(st));
		return WEXITSTATUS(st);
	}
	if (WIFSIGNALED(st))
		fprintf(stderr, "nccl-net-bench: rank %d was killed by signal %d (%s)\n", rank,
			WTERMSIG(st), strsignal(WTERMSIG(st)));
	return 1;
}

static void nb_kill_all(const pid_t *pids, int n, int sig)
{
	int i;

	for (i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], sig);
}

/* Reaps children until all exited; first failure or the timeout ends the others. */
static int nb_reap(pid_t *pids, int n, double timeout_s)
{
	double end = nb_now() + timeout_s, kill_at = 0;
	int alive = n, status = 0, termed = 0;

	while (alive > 0) {
		int st, i;
		pid_t p = waitpid(-1, &st, WNOHANG);

		for (i = 0; p > 0 && i < n; i++) {
			if (pids[i] != p)
				continue;
			pids[i] = -1;
			alive--;
			st = nb_status_code(st, i);
			if (st != 0 && status == 0) {
				status = st;
				kill_at = nb_now() + 3.0;
			}
		}
		if (p > 0)
			continue;
		if (status == 0 && nb_now() > end) {
			fprintf(stderr, "nccl-net-bench: timeout after %.0f s, stopping the ranks\n",
				timeout_s);
			status = 124;
			kill_at = nb_now();
		}
		if (kill_at > 0 && nb_now() >= kill_at) {
			nb_kill_all(pids, n, termed ? SIGKILL : SIGTERM);
			termed = 1;
			kill_at = nb_now() + 2.0;
		}
		usleep(5000);
	}
	return status;
}

int nb_launch_local(int nranks, double timeout_s, int *rank, int *listen_fd, int *port,
		    int *status)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	pid_t *pids = calloc((size_t)nranks, sizeof(pid_t));
	int fd, r;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (!pids || fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(fd, 128) != 0 || getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
		nb_err("cannot open the local rendezvous socket: %s", strerror(errno));
		*status = 1;
		return 0;
	}
	*port = ntohs(a.sin_port);
	fflush(NULL);
	for (r = 0; r < nranks; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			free(pids);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			*rank = r;
			*listen_fd = r == 0 ? fd : -1;
			if (r != 0)
				close(fd);
			return 1;
		}
		if (pids[r] < 0) {
			nb_err("fork: %s", strerror(errno));
			nb_kill_all(pids, r, SIGKILL);
			break;
		}
	}
	close(fd);
	*status = r < nranks ? 1 : 0;
	if (r < nranks)
		nranks = r;
	r = nb_reap(pids, nranks, timeout_s);
	if (*status == 0)
		*status = r;
	free(pids);
	return 0;
}
