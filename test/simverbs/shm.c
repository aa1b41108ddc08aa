/*
 * The shared-memory fabric: attach/detach, the robust control-plane lock,
 * reclaiming entries of dead processes, and per-object segments (CQ rings and
 * receive queues).  Nothing here is on the data path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sv.h"

bool sv_pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

uint32_t sv_next_id(void)
{
	return atomic_fetch_add(&sv_g.fab->next_id, 1) + 1;
}

void sv_bump_epoch(void)
{
	atomic_fetch_add(&sv_g.fab->epoch, 1);
}

static void sv_seg_name(char *buf, size_t len, char kind, uint32_t slot, uint32_t gen)
{
	snprintf(buf, len, "/sv.%s.%c%u.%u", sv_g.fabric_name, kind, slot, gen);
}

static void *sv_seg_mmap(int fd, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int e = errno;

	close(fd);
	errno = e;
	return p == MAP_FAILED ? NULL : p;
}

void *sv_seg_create(char kind, uint32_t slot, uint32_t gen, size_t bytes)
{
	char name[256];
	int fd;

	sv_seg_name(name, sizeof(name), kind, slot, gen);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 && errno == EEXIST) {
		shm_unlink(name);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	}
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)bytes)) {
		int e = errno;

		close(fd);
		shm_unlink(name);
		errno = e;
		return NULL;
	}
	return sv_seg_mmap(fd, bytes);
}

void *sv_seg_map(char kind, uint32_t slot, uint32_t gen, size_t bytes)
{
	char name[256];
	int fd;

	sv_seg_name(name, sizeof(name), kind, slot, gen);
	fd = shm_open(name, O_RDWR, 0600);
	if (fd < 0)
		return NULL;
	return sv_seg_mmap(fd, bytes);
}

void sv_seg_unlink(char kind, uint32_t slot, uint32_t gen)
{
	char name[256];

	sv_seg_name(name, sizeof(name), kind, slot, gen);
	shm_unlink(name);
}

int sv_lock(void)
{
	int rc = pthread_mutex_lock(&sv_g.fab->lock);

	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&sv_g.fab->lock);
		sv_reclaim_dead();
		rc = 0;
	}
	return rc;
}

void sv_unlock(void)
{
	pthread_mutex_unlock(&sv_g.fab->lock);
}

/* The atomics' lock: held only around one 8-byte read-modify-write, never
 * with the fabric lock; a holder that died left the word read or written
 * whole or not at all, so the next owner just marks it consistent. */
int sv_atomic_lock(void)
{
	int rc = pthread_mutex_lock(&sv_g.fab->atomic_lock);

	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&sv_g.fab->atomic_lock);
		rc = 0;
	}
	return rc;
}

void sv_atomic_unlock(void)
{
	pthread_mutex_unlock(&sv_g.fab->atomic_lock);
}

/* Removes FIFOs "<what>-<pid>-<id>" of pid (all pids when pid == 0). */
static void sv_remove_fifos(pid_t pid)
{
	DIR *d = opendir(sv_g.dir);
	struct dirent *e;
	char path[600], tag[32];

	if (!d)
		return;
	snprintf(tag, sizeof(tag), "-%d-", (int)pid);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "chan-", 5) && strncmp(e->d_name, "async-", 6))
			continue;
		if (pid && !strstr(e->d_name, tag))
			continue;
		snprintf(path, sizeof(path), "%s/%s", sv_g.dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

/* Frees every table entry owned by pid.  Caller holds the fabric lock. */
static void sv_reclaim_pid(pid_t pid)
{
	struct sv_fabric *f = sv_g.fab;

	for (int i = 0; i < SV_MAX_MR_SLOTS; i++)
		if (atomic_load(&f->mrs[i].key) && f->mrs[i].pid == pid)
			atomic_store(&f->mrs[i].key, 0);
	for (int i = 0; i < SV_MAX_QP_SLOTS; i++) {
		struct sv_shm_qp *q = &f->qps[i];

		if (atomic_load(&q->qpn) && q->pid == pid) {
			atomic_store(&q->state, IBV_QPS_ERR);
			sv_seg_unlink('r', (uint32_t)i, q->rq_gen);
			atomic_store(&q->qpn, 0);
		}
	}
	for (int i = 0; i < SV_MAX_CQ_SLOTS; i++) {
		if (atomic_load(&f->cqs[i].pid) == pid) {
			sv_seg_unlink('c', (uint32_t)i, f->cqs[i].gen);
			atomic_store(&f->cqs[i].pid, 0);
		}
	}
	for (int i = 0; i < SV_MAX_CTX; i++)
		if (atomic_load(&f->ctxs[i].pid) == pid)
			atomic_store(&f->ctxs[i].pid, 0);
	sv_remove_fifos(pid);
}

/* Reclaims the entries of processes that died.  Caller holds the lock. */
void sv_reclaim_dead(void)
{
	struct sv_fabric *f = sv_g.fab;
	bool any = false;

	for (int i = 0; i < SV_MAX_PROCS; i++) {
		pid_t pid = atomic_load(&f->procs[i].pid);

		if (!pid || sv_pid_alive(pid))
			continue;
		sv_reclaim_pid(pid);
		sv_dev_objs_clear(i);
		atomic_store(&f->procs[i].pid, 0);
		any = true;
	}
	if (any)
		sv_bump_epoch();
}

static int sv_fabric_init(struct sv_fabric *f, size_t size)
{
	pthread_mutexattr_t ma;

	f->magic = SV_MAGIC;
	f->version = SV_VERSION;
	f->size = size;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&f->lock, &ma);
	pthread_mutex_init(&f->atomic_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	atomic_store(&f->knobs.timeout_scale_ppm, (uint32_t)(SV_DEFAULT_TIMEOUT_SCALE * 1e6));
	/* QPN generations start where the fabric's name says, so fabrics do not
	 * hand out the same QPNs: a handle taken to another fabric names no QP
	 * there (or one that is not connected back) */
	{
		uint64_t h = 0xcbf29ce484222325ull;

		for (const char *c = sv_g.fabric_name; *c; c++)
			h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
		atomic_store(&f->next_id, (uint32_t)(h % 0xffe));
	}
	atomic_store_explicit(&f->ready, 1, memory_order_release);
	return 0;
}

/* Opens (creating if needed) the fabric segment; NULL with errno on failure. */
static struct sv_fabric *sv_fabric_open(void)
{
	size_t size = sizeof(struct sv_fabric);
	struct sv_fabric *f;
	struct stat st;
	int fd;

	fd = shm_open(sv_g.shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		if (ftruncate(fd, (off_t)size)) {
			close(fd);
			shm_unlink(sv_g.shm_name);
			return NULL;
		}
		sv_g.fab_ino = fstat(fd, &st) ? 0 : st.st_ino;
		f = sv_seg_mmap(fd, size);
		if (f)
			sv_fabric_init(f, size);
		return f;
	}
	if (errno != EEXIST)
		return NULL;
	fd = shm_open(sv_g.shm_name, O_RDWR, 0600);
	if (fd < 0)
		return NULL;
	for (int i = 0; i < 2000 && !fstat(fd, &st) && st.st_size == 0; i++)
		usleep(1000);	/* the creator has not sized it yet */
	if (fstat(fd, &st) || (size_t)st.st_size != size) {
		close(fd);
		errno = EPROTO;
		return NULL;
	}
	sv_g.fab_ino = st.st_ino;
	f = sv_seg_mmap(fd, size);
	for (int i = 0; f && i < 2000 && !atomic_load_explicit(&f->ready, memory_order_acquire); i++)
		usleep(1000);
	if (f && (!atomic_load(&f->ready) || f->magic != SV_MAGIC || f->version != SV_VERSION)) {
		munmap(f, size);
		errno = EPROTO;
		return NULL;
	}
	return f;
}

/* Our segment is still the one the fabric name refers to (a GC by another
 * process may have unlinked it between our open and our registration). */
static bool sv_still_named(void)
{
	struct stat st;
	int fd = shm_open(sv_g.shm_name, O_RDONLY, 0);
	bool same;

	if (fd < 0)
		return false;
	same = !fstat(fd, &st) && st.st_ino == sv_g.fab_ino;
	close(fd);
	return same;
}

static int sv_unregister_proc(void)
{
	if (!sv_lock()) {
		atomic_store(&sv_g.fab->procs[sv_g.proc_slot].pid, 0);
		sv_unlock();
	}
	sv_g.proc_slot = -1;
	return EAGAIN;
}

static int sv_register_proc(void)
{
	struct sv_fabric *f = sv_g.fab;

	if (sv_lock())
		return EIO;
	if (atomic_load(&f->dead)) {
		sv_unlock();
		return EAGAIN;
	}
	sv_reclaim_dead();
	for (int i = 0; i < SV_MAX_PROCS; i++) {
		if (!atomic_load(&f->procs[i].pid)) {
			sv_dev_objs_clear(i);
			atomic_store(&f->procs[i].pid, sv_g.pid);
			sv_g.proc_slot = i;
			sv_unlock();
			return sv_still_named() ? 0 : sv_unregister_proc();
		}
	}
	sv_unlock();
	return EMFILE;
}

static void sv_names(void)
{
	const char *fab = getenv("SIMVERBS_FABRIC");
	char base[128];

	if (fab && *fab)
		snprintf(sv_g.fabric_name, sizeof(sv_g.fabric_name), "%s", fab);
	else
		snprintf(sv_g.fabric_name, sizeof(sv_g.fabric_name), "simverbs-%u",
			 (unsigned)getuid());
	for (char *c = sv_g.fabric_name; *c; c++)
		if (*c == '/' || *c == ' ')
			*c = '_';
	snprintf(sv_g.shm_name, sizeof(sv_g.shm_name), "/sv.%s", sv_g.fabric_name);
	snprintf(base, sizeof(base), "/tmp/simverbs-%u", (unsigned)getuid());
	mkdir(base, 0700);
	snprintf(sv_g.dir, sizeof(sv_g.dir), "%s/%s", base, sv_g.fabric_name);
	mkdir(sv_g.dir, 0700);
}

/* Names the fabric and its directory (sv_g.dir) without attaching;
 * idempotent, so ibv_get_sysfs_path() can answer before any other verb. */
void sv_name_fabric(void)
{
	pthread_mutex_lock(&sv_g.lock);
	if (!sv_g.dir[0])
		sv_names();
	pthread_mutex_unlock(&sv_g.lock);
}

/* Removes one fabric's segments and directory ("/dev/shm/sv.<name>*"). */
static void sv_gc_remove(const char *name)
{
	char pfx[200], path[600];
	size_t pl;
	DIR *d = opendir("/dev/shm");
	struct dirent *e;

	if (!d)
		return;
	pl = (size_t)snprintf(pfx, sizeof(pfx), "sv.%s.", name);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, pfx, pl))
			continue;
		snprintf(path, sizeof(path), "/%s", e->d_name);
		shm_unlink(path);
	}
	closedir(d);
	snprintf(path, sizeof(path), "/sv.%s", name);
	shm_unlink(path);
	snprintf(path, sizeof(path), "/tmp/simverbs-%u/%s", (unsigned)getuid(), name);
	{
		char gone[700];

		snprintf(gone, sizeof(gone), "%s.gone.%d", path, (int)getpid());
		if (!rename(path, gone))
			sv_rm_tree(gone);
	}
}

/* A fabric is stale when it is older than min_age seconds and either never
 * became ready or every registered process is dead.  Fabrics of versions
 * before SV_STABLE_VERSION are never judged (their layout is unknown). */
static bool sv_fabric_stale(const char *shm, int min_age)
{
	size_t hdr = offsetof(struct sv_fabric, procs) + sizeof(((struct sv_fabric *)0)->procs);
	struct sv_fabric *f;
	struct stat st;
	bool stale = true;
	int fd = shm_open(shm, O_RDONLY, 0);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) || time(NULL) - st.st_mtime < min_age) {
		close(fd);
		return false;
	}
	if ((size_t)st.st_size < hdr) {
		close(fd);
		return true;	/* creator died before ftruncate */
	}
	f = mmap(NULL, hdr, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return false;
	if (f->magic == SV_MAGIC && atomic_load(&f->ready)) {
		if (f->version < SV_STABLE_VERSION)
			stale = false;
		for (int i = 0; stale && i < SV_MAX_PROCS; i++)
			if (sv_pid_alive(atomic_load(&f->procs[i].pid)))
				stale = false;
	}
	munmap(f, hdr);
	return stale;
}

/* Garbage-collects fabrics every process of which died (kill -9). */
static void sv_gc_stale_fabrics(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char names[64][128];
	int n = 0;

	if (!d)
		return;
	while ((e = readdir(d)) && n < 64) {
		char shm[300];

		if (strncmp(e->d_name, "sv.", 3) || strchr(e->d_name + 3, '.') ||
		    !strcmp(e->d_name + 3, sv_g.fabric_name))
			continue;
		snprintf(shm, sizeof(shm), "/%s", e->d_name);
		if (sv_fabric_stale(shm, 2))
			snprintf(names[n++], sizeof(names[0]), "%s", e->d_name + 3);
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		sv_gc_remove(names[i]);
}

static int sv_attach_once(void)
{
	int rc;

	sv_g.fab = sv_fabric_open();
	if (!sv_g.fab) {
		rc = errno;
		if (rc == EPROTO && sv_fabric_stale(sv_g.shm_name, 0)) {
			/* half-created, or left by dead processes: replace it */
			shm_unlink(sv_g.shm_name);
			return EAGAIN;
		}
		if (rc == EPROTO)
			sv_log("fabric %s is in use by another simverbs build (layout version); "
			       "use another SIMVERBS_FABRIC", sv_g.fabric_name);
		return rc ? rc : EIO;
	}
	sv_g.fab_size = sizeof(struct sv_fabric);
	rc = sv_register_proc();
	if (rc) {
		munmap(sv_g.fab, sv_g.fab_size);
		sv_g.fab = NULL;
	}
	return rc;
}

/* Attaches this process to the fabric (idempotent).  0 or positive errno. */
int sv_attach(void)
{
	int rc = 0;

	pthread_mutex_lock(&sv_g.lock);
	if (sv_g.attached && sv_g.pid == getpid())
		goto out;
	if (sv_g.exiting && sv_g.pid == getpid()) {
		rc = ESHUTDOWN;	/* verbs called after our destructor ran */
		goto out;
	}
	sv_g.pid = getpid();
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	sv_names();
	sv_gc_stale_fabrics();
	for (int tries = 0; tries < 20; tries++) {
		rc = sv_attach_once();
		if (rc != EAGAIN)
			break;
		usleep(2000);
	}
	if (rc) {
		sv_log("cannot attach fabric %s: %s", sv_g.fabric_name, strerror(rc));
		goto out;
	}
	sv_g.attached = true;
	sv_g.seen_epoch = atomic_load(&sv_g.fab->epoch);
	pthread_mutex_unlock(&sv_g.lock);
	return 0;
out:
	pthread_mutex_unlock(&sv_g.lock);
	return rc;
}

static bool sv_any_proc(void)
{
	for (int i = 0; i < SV_MAX_PROCS; i++)
		if (atomic_load(&sv_g.fab->procs[i].pid))
			return true;
	return false;
}

/* Leaves the fabric; the last process removes it.  Called at exit (the
 * destructor), so the segment stays mapped. */
void sv_detach(void)
{
	char gone[300];
	bool last;

	if (!sv_g.attached || sv_g.pid != getpid())
		return;
	sv_cnt_flush();
	if (sv_lock())
		return;
	sv_reclaim_pid(sv_g.pid);
	if (sv_g.proc_slot >= 0) {
		sv_dev_objs_clear(sv_g.proc_slot);
		atomic_store(&sv_g.fab->procs[sv_g.proc_slot].pid, 0);
	}
	sv_reclaim_dead();
	last = !sv_any_proc();
	if (last) {
		/* move the directory aside first: a process creating the next
		 * fabric of this name gets a fresh one, never our removal */
		snprintf(gone, sizeof(gone), "%s.gone.%d", sv_g.dir, (int)sv_g.pid);
		if (rename(sv_g.dir, gone))
			gone[0] = '\0';
		atomic_store(&sv_g.fab->dead, 1);
		shm_unlink(sv_g.shm_name);
	}
	sv_bump_epoch();
	sv_unlock();
	if (last && gone[0])
		sv_rm_tree(gone);
	/* The mapping stays: threads of an exiting process may still be in
	 * ibv_poll_cq or ibv_post_send and must not fault. */
	sv_g.attached = false;
	sv_g.exiting = true;
}
