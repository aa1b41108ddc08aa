/*
 * sock.c - non-blocking TCP for the handshake (see sock.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "os.h"
#include "sock.h"
#include "wire.h"

/* One element of a comma list: exact ('=' list) or prefix match. */
static int nv_sock_list_has(const char *list, const char *name, int exact)
{
	const char *p = list;

	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n > 0 && (exact ? (strlen(name) == n && !strncmp(p, name, n))
				    : !strncmp(p, name, n)))
			return 1;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

int nv_sock_if_match(const char *spec, const char *name)
{
	int exclude = 0, exact = 0;

	if (!spec || !*spec)
		return 1;
	if (*spec == '^') {
		exclude = 1;
		spec++;
	}
	if (*spec == '=') {
		exact = 1;
		spec++;
	}
	return nv_sock_list_has(spec, name, exact) != exclude;
}

static int nv_sock_family_parse(const char *spec, int *family)
{
	*family = AF_UNSPEC;
	if (!spec || !*spec)
		return 0;
	if (!strcasecmp(spec, "AF_INET") || !strcmp(spec, "4"))
		*family = AF_INET;
	else if (!strcasecmp(spec, "AF_INET6") || !strcmp(spec, "6"))
		*family = AF_INET6;
	else
		return -1;
	return 0;
}

static int nv_sock_usable(const struct ifaddrs *ifa, int family)
{
	const struct sockaddr *sa = ifa->ifa_addr;

	if (!sa || !(ifa->ifa_flags & IFF_UP))
		return 0;
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return 0;
	if (family != AF_UNSPEC && sa->sa_family != family)
		return 0;
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		/* Link-local needs a scope that the peer cannot share. */
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			return 0;
		if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) && !(ifa->ifa_flags & IFF_LOOPBACK))
			return 0;
	}
	return 1;
}

/* First usable address whose interface matches spec; 0 when found. */
static int nv_sock_find(struct ifaddrs *list, const char *spec, int family,
			struct nv_sock_addr *out, char *ifname, size_t ifname_len)
{
	const struct ifaddrs *ifa;
	int pass;

	/* Prefer IPv4 when no family is forced, as NCCL's users expect. */
	for (pass = 0; pass < 2; pass++) {
		for (ifa = list; ifa; ifa = ifa->ifa_next) {
			if (!nv_sock_usable(ifa, family) || !nv_sock_if_match(spec, ifa->ifa_name))
				continue;
			if (family == AF_UNSPEC && pass == 0 && ifa->ifa_addr->sa_family != AF_INET)
				continue;
			memset(out, 0, sizeof(*out));
			out->len = ifa->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
								       : sizeof(struct sockaddr_in6);
			memcpy(&out->ss, ifa->ifa_addr, out->len);
			snprintf(ifname, ifname_len, "%s", ifa->ifa_name);
			return 0;
		}
	}
	return -1;
}

nv_status_t nv_sock_pick_if(const char *ifname_spec, const char *family_spec,
			    struct nv_sock_addr *out, char *ifname, size_t ifname_len)
{
	static const char *const defaults[] = { "ib", "^docker,lo,virbr", "docker", "lo" };
	struct ifaddrs *list = NULL;
	int family, found = -1;
	size_t i;

	if (nv_sock_family_parse(family_spec, &family)) {
		NV_WARN("NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6", family_spec);
		return NV_ERR_USAGE;
	}
	if (getifaddrs(&list)) {
		NV_WARN("getifaddrs failed: %s; cannot pick a handshake interface",
			strerror(errno));
		return NV_ERR_SYSTEM;
	}
	if (ifname_spec && *ifname_spec) {
		found = nv_sock_find(list, ifname_spec, family, out, ifname, ifname_len);
	} else {
		for (i = 0; found && i < NV_ARRAY_SIZE(defaults); i++)
			found = nv_sock_find(list, defaults[i], family, out, ifname, ifname_len);
	}
	freeifaddrs(list);
	if (found) {
		NV_WARN("no usable network interface for the handshake matches "
			"NCCL_SOCKET_IFNAME=%s NCCL_SOCKET_FAMILY=%s (interfaces must be up and "
			"have an address); check `ip addr`",
			ifname_spec && *ifname_spec ? ifname_spec : "(unset)",
			family_spec && *family_spec ? family_spec : "(unset)");
		return NV_ERR_USAGE;
	}
	return NV_OK;
}

const char *nv_sock_addr_str(const struct nv_sock_addr *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a->ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		if (s6->sin6_scope_id)
			snprintf(buf, len, "[%s%%%u]:%u", host, s6->sin6_scope_id,
				 ntohs(s6->sin6_port));
		else
			snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		snprintf(buf, len, "(no address)");
	}
	return buf;
}

void nv_sock_addr_to_handle(const struct nv_sock_addr *a, struct nv_handle *h)
{
	memset(h->addr, 0, sizeof(h->addr));
	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;

		h->family = AF_INET6;
		memcpy(h->addr, &s6->sin6_addr, 16);
		h->port = ntohs(s6->sin6_port);
		h->scope_id = s6->sin6_scope_id;
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a->ss;

		h->family = AF_INET;
		memcpy(h->addr, &s4->sin_addr, 4);
		h->port = ntohs(s4->sin_port);
		h->scope_id = 0;
	}
}

void nv_sock_addr_from_handle(const struct nv_handle *h, struct nv_sock_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (h->family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, h->addr, 16);
		s6->sin6_port = htons(h->port);
		s6->sin6_scope_id = h->scope_id;
		a->len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, h->addr, 4);
		s4->sin_port = htons(h->port);
		a->len = sizeof(*s4);
	}
}

static int nv_sock_setup(int fd)
{
	int one = 1;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC))
		return -errno;
	/* Best effort: small handshake messages should not wait for Nagle. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

int nv_sock_listen(const struct nv_sock_addr *addr, int *fd, struct nv_sock_addr *bound)
{
	int s, one = 1, err;

	*fd = -1;
	s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (const struct sockaddr *)&addr->ss, addr->len) || listen(s, SOMAXCONN))
		goto err_close;
	bound->len = sizeof(bound->ss);
	if (getsockname(s, (struct sockaddr *)&bound->ss, &bound->len))
		goto err_close;
	err = nv_sock_setup(s);
	if (err) {
		close(s);
		return err;
	}
	*fd = s;
	return 0;
err_close:
	err = -errno;
	close(s);
	return err;
}

int nv_sock_accept(int lfd, int *fd, struct nv_sock_addr *peer)
{
	int s, err;

	*fd = -1;
	peer->len = sizeof(peer->ss);
	s = accept4(lfd, (struct sockaddr *)&peer->ss, &peer->len, SOCK_CLOEXEC);
	if (s < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
		    errno == ECONNABORTED)
			return 0;
		return -errno;
	}
	err = nv_sock_setup(s);
	if (err) {
		close(s);
		return err;
	}
	*fd = s;
	return 0;
}

int nv_sock_connect_start(const struct nv_sock_addr *addr, int *fd)
{
	int s, err;

	*fd = -1;
	s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	err = nv_sock_setup(s);
	if (!err && connect(s, (const struct sockaddr *)&addr->ss, addr->len) &&
	    errno != EINPROGRESS && errno != EINTR)
		err = -errno;
	if (err) {
		close(s);
		return err;
	}
	*fd = s;
	return 0;
}

int nv_sock_connect_check(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t len = sizeof(err);

	if (poll(&p, 1, 0) < 0)
		return errno == EINTR ? 0 : -errno;
	if (!(p.revents & (POLLOUT | POLLERR | POLLHUP)))
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return err ? -err : 1;
}

int nv_sock_send(int fd, const void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = send(fd, (const char *)buf + *off, len - *off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		*off += (size_t)n;
	}
	return 1;
}

int nv_sock_recv(int fd, void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = recv(fd, (char *)buf + *off, len - *off, 0);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		*off += (size_t)n;
	}
	return 1;
}

void nv_sock_keepalive(int fd, int idle_s, int intvl_s, int cnt)
{
	int one = 1;

	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl_s, sizeof(intvl_s));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int nv_sock_alive(int fd)
{
	return nv_fd_peer_alive(fd);
}

void nv_sock_close(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}
