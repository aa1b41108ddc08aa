/*
 * sock.h - non-blocking TCP for the out-of-band handshake.
 *
 * Contract:
 *  - No call blocks: connect/accept/read/write report "not yet" and keep
 *    their progress in caller-owned state (an offset), so the connect and
 *    accept state machines can be stepped from NCCL's polling loops.
 *  - The interface is chosen like NCCL: NCCL_SOCKET_IFNAME (prefix list,
 *    '^' excludes, '=' exact) and NCCL_SOCKET_FAMILY; without a list:
 *    "ib*", then anything but docker/lo/virbr, then docker, then loopback.
 *  - Functions never log except nv_sock_pick_if (errors name the knob);
 *    others return -errno so the caller can name the peer in its message.
 */
#ifndef NV_SOCK_H
#define NV_SOCK_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include "nv_common.h"

struct nv_handle;

struct nv_sock_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

#define NV_SOCK_IFNAME_LEN 64
#define NV_SOCK_ADDR_STRLEN 64 /* "[v6addr%scope]:port" */

/*
 * Pick the handshake interface. ifname_spec / family_spec are the values of
 * NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY (NULL or "" = unset). On success
 * *out has port 0 and ifname the interface's name.
 */
nv_status_t nv_sock_pick_if(const char *ifname_spec, const char *family_spec,
			    struct nv_sock_addr *out, char *ifname, size_t ifname_len);

/* Does interface name `name` match an NCCL_SOCKET_IFNAME-style list? */
int nv_sock_if_match(const char *spec, const char *name);

/* "1.2.3.4:5" / "[fe80::1%2]:5" into buf (always NUL-terminated). */
const char *nv_sock_addr_str(const struct nv_sock_addr *a, char *buf, size_t len);

void nv_sock_addr_to_handle(const struct nv_sock_addr *a, struct nv_handle *h);
void nv_sock_addr_from_handle(const struct nv_handle *h, struct nv_sock_addr *a);

/* Listening socket on addr (port 0 = ephemeral); *bound gets the real port. */
int nv_sock_listen(const struct nv_sock_addr *addr, int *fd, struct nv_sock_addr *bound);
/* 0 and *fd >= 0: a connection; 0 and *fd == -1: none pending; < 0: -errno. */
int nv_sock_accept(int lfd, int *fd, struct nv_sock_addr *peer);
/* Starts a non-blocking connect: 0 (in progress or done) or -errno. */
int nv_sock_connect_start(const struct nv_sock_addr *addr, int *fd);
/* 1 connected, 0 still in progress, < 0 -errno of the failed connect. */
int nv_sock_connect_check(int fd);

/*
 * Moves bytes [*off, len) of buf; 1 when all moved, 0 when the socket would
 * block, -ECONNRESET on EOF, other -errno on error.
 */
int nv_sock_send(int fd, const void *buf, size_t len, size_t *off);
int nv_sock_recv(int fd, void *buf, size_t len, size_t *off);

/* TCP keepalive so a peer host that vanishes without FIN/RST also ends the
 * connection (idle_s, then probes every intvl_s, cnt of them). Best effort. */
void nv_sock_keepalive(int fd, int idle_s, int intvl_s, int cnt);

/* 1 when the peer has not closed or reset the socket, 0 otherwise. */
int nv_sock_alive(int fd);

void nv_sock_close(int *fd);

#endif /* NV_SOCK_H */
