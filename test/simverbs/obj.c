/*
 * Process-wide simverbs state, object lists (for the leak report), clock,
 * logging and the FIFOs that carry completion-channel and async events
 * between processes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sv.h"

struct sv_global sv_g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.port_lock = PTHREAD_MUTEX_INITIALIZER,
	.proc_slot = -1,
};

void sv_obj_add(struct sv_obj *o, enum sv_kind kind)
{
	struct sv_obj *h = &sv_g.objs[kind];

	pthread_mutex_lock(&sv_g.lock);
	if (!h->next)
		h->next = h->prev = h;
	o->kind = kind;
	o->next = h;
	o->prev = h->prev;
	h->prev->next = o;
	h->prev = o;
	sv_g.nobjs[kind]++;
	if (o->dev)
		o->dev->nobjs[kind]++;
	pthread_mutex_unlock(&sv_g.lock);
}

/* The kinds a device limit bounds (taken with sv_dev_take at creation). */
static bool sv_dev_limited(enum sv_kind kind)
{
	return kind == SV_K_PD || kind == SV_K_MR || kind == SV_K_CQ || kind == SV_K_QP ||
	       kind == SV_K_SRQ;
}

void sv_obj_del(struct sv_obj *o)
{
	struct sv_device *give = NULL;

	pthread_mutex_lock(&sv_g.lock);
	if (o->next) {
		o->prev->next = o->next;
		o->next->prev = o->prev;
		o->next = o->prev = NULL;
		sv_g.nobjs[o->kind]--;
		if (o->dev)
			o->dev->nobjs[o->kind]--;
		if (o->dev && sv_dev_limited(o->kind))
			give = o->dev;
	}
	pthread_mutex_unlock(&sv_g.lock);
	if (give)
		sv_dev_give(give, o->kind);
}

/*
 * A device limit (max_qp, max_cq, max_mr, max_pd, max_srq) counts what every
 * process of the simulated host holds on the device, as a NIC's resource
 * tables do; there is no limit across devices. Takes one object of kind
 * from dev's budget for this process: ENOMEM when the host's processes hold
 * limit already. Check and take are one step under the fabric lock, so two
 * processes racing for the last one cannot both get it. sv_obj_del gives it
 * back; a creation that fails after taking calls sv_dev_give.
 */
static uint64_t sv_dev_held(const struct sv_device *dev, enum sv_kind kind)
{
	const struct sv_fabric *f = sv_g.fab;
	uint64_t held = 0;

	for (int i = 0; i < SV_MAX_PROCS; i++)
		if (atomic_load(&f->procs[i].pid) && f->dev_objs[i].host == sv_g.host)
			held += f->dev_objs[i].n[dev->idx][kind];
	return held;
}

int sv_dev_take(struct sv_device *dev, enum sv_kind kind, uint32_t limit)
{
	struct sv_fabric *f = sv_g.fab;
	int rc = 0;

	if (dev->idx >= SV_MAX_DEVICES)
		return EINVAL;
	/* a forked child using a context, PD or device its parent opened: the
	 * kernel serves it (the uverbs file is shared, the child's own pages
	 * and memlock limit count), so the child joins the fabric as a process
	 * of its own, whose objects count against the host like any other's */
	if (sv_g.proc_slot < 0 && (rc = sv_attach()) != 0)
		return rc;
	if (sv_g.proc_slot < 0)
		return EINVAL;
	if (sv_lock())
		return EIO;
	/* at the limit, a process that died gives its objects back first (the
	 * kernel frees a dead process's verbs objects when its fd closes) */
	if (sv_dev_held(dev, kind) >= limit)
		sv_reclaim_dead();
	if (sv_dev_held(dev, kind) >= limit) {
		rc = ENOMEM;
	} else {
		f->dev_objs[sv_g.proc_slot].host = sv_g.host;
		f->dev_objs[sv_g.proc_slot].n[dev->idx][kind]++;
	}
	sv_unlock();
	return rc;
}

void sv_dev_give(struct sv_device *dev, enum sv_kind kind)
{
	struct sv_dev_objs *d;

	if (sv_g.proc_slot < 0 || dev->idx >= SV_MAX_DEVICES || sv_lock())
		return;
	d = &sv_g.fab->dev_objs[sv_g.proc_slot];
	if (d->n[dev->idx][kind])
		d->n[dev->idx][kind]--;
	sv_unlock();
}

/* A process slot taken or freed: it holds nothing. Caller holds the fabric lock. */
void sv_dev_objs_clear(int proc_slot)
{
	memset(&sv_g.fab->dev_objs[proc_slot], 0, sizeof(sv_g.fab->dev_objs[proc_slot]));
}

int sv_debug;

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sv_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "simverbs[%d]: %s\n", (int)getpid(), buf);
}

/* Creates <dir>/<what>-<pid>-<id> and opens it read-write (so it never sees
 * EOF and writers never get ENXIO while we live).  Returns the fd or -1. */
int sv_fifo_create(char *path, size_t len, const char *what, uint32_t *id)
{
	int fd;

	*id = sv_next_id();
	mkdir(sv_g.dir, 0700);	/* a previous fabric of this name may have removed it */
	snprintf(path, len, "%s/%s-%d-%u", sv_g.dir, what, (int)sv_g.pid, *id);
	unlink(path);
	if (mkfifo(path, 0600))
		return -1;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		unlink(path);
	return fd;
}

/* write() that never raises SIGPIPE (the reader of a FIFO may vanish at any
 * time: a peer process exits).  Returns the write() result, errno kept. */
ssize_t sv_write_nosig(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old, pending;
	bool was_pending;
	ssize_t n;
	int e;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	n = write(fd, buf, len);
	e = errno;
	if (n < 0 && e == EPIPE && !was_pending) {
		struct timespec zero = { 0, 0 };

		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return n;
}

/* Writes one message (<= PIPE_BUF, so atomic) to another process's FIFO.
 * Returns 0 or a positive errno. */
int sv_fifo_send(int32_t pid, const char *what, uint32_t id, const void *msg, size_t len)
{
	char path[320];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s-%d-%u", sv_g.dir, what, (int)pid, id);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (sv_write_nosig(fd, msg, len) != (ssize_t)len)
		rc = errno ? errno : EIO;
	close(fd);
	return rc;
}
