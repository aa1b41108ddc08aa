/*
 * Leak report and process lifecycle: objects still open at exit are listed
 * (SIMVERBS_LEAK_CHECK=1: on stderr, and the process exits with status 99),
 * the fabric is left cleanly, and a forked child starts with no objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv.h"

#define SV_LEAK_EXIT 99

static const char *const sv_kind_names[SV_K_NKINDS] = {
	[SV_K_CTX] = "context", [SV_K_PD] = "pd", [SV_K_MR] = "mr",
	[SV_K_CQ] = "cq", [SV_K_QP] = "qp", [SV_K_CHAN] = "comp_channel", [SV_K_SRQ] = "srq",
	[SV_K_AH] = "ah",
};

static int sv_leak_line(const struct sv_obj *o, char *buf, size_t len)
{
	const char *k = sv_kind_names[o->kind];

	switch (o->kind) {
	case SV_K_CTX: {
		const struct sv_context *c = (const void *)((const char *)o -
							    offsetof(struct sv_context, obj));
		return snprintf(buf, len, "%s %s", k, c->dev->ibv.name);
	}
	case SV_K_MR: {
		const struct sv_mr *m = (const void *)((const char *)o -
						       offsetof(struct sv_mr, obj));
		return snprintf(buf, len, "%s lkey 0x%x addr %p len %zu", k, m->ibv.lkey,
				m->ibv.addr, m->ibv.length);
	}
	case SV_K_QP: {
		const struct sv_qp *q = (const void *)((const char *)o -
						       offsetof(struct sv_qp, obj));
		return snprintf(buf, len, "%s 0x%x", k, q->ibv.qp_num);
	}
	case SV_K_CQ: {
		const struct sv_cq *c = (const void *)((const char *)o -
						       offsetof(struct sv_cq, obj));
		return snprintf(buf, len, "%s cqe %d", k, c->ibv.cqe);
	}
	default:
		return snprintf(buf, len, "%s", k);
	}
}

/* Lists open objects into out ("simverbs leak: <object>" lines). */
void sv_leak_report(char *out, size_t outlen, unsigned int *count)
{
	size_t o = 0;

	*count = 0;
	if (outlen)
		out[0] = '\0';
	pthread_mutex_lock(&sv_g.lock);
	for (int k = 0; k < SV_K_NKINDS; k++) {
		const struct sv_obj *h = &sv_g.objs[k];

		if (!h->next)
			continue;
		for (const struct sv_obj *x = h->next; x != h; x = x->next) {
			char line[200];

			(*count)++;
			sv_leak_line(x, line, sizeof(line));
			if (o < outlen)
				o += (size_t)snprintf(out + o, outlen - o,
						      "simverbs leak: %s\n", line);
		}
	}
	pthread_mutex_unlock(&sv_g.lock);
}

/* One line: how many objects of each kind this process holds, and its pinned bytes. */
void sv_object_counts(char *out, size_t outlen)
{
	size_t o;

	pthread_mutex_lock(&sv_g.lock);
	o = (size_t)snprintf(out, outlen, "simverbs objects:");
	for (int k = 0; k < SV_K_NKINDS && o < outlen; k++)
		o += (size_t)snprintf(out + o, outlen - o, " %s %u", sv_kind_names[k],
				      (unsigned int)sv_g.nobjs[k]);
	if (o < outlen)
		snprintf(out + o, outlen - o, " pinned_bytes %llu\n",
			 (unsigned long long)sv_g.pinned_bytes);
	pthread_mutex_unlock(&sv_g.lock);
}

static struct sv_device *volatile sv_inherited_devs;	/* volatile: a store kept for valgrind */

static void sv_atfork_child(void)
{
	memset(sv_g.objs, 0, sizeof(sv_g.objs));
	memset(sv_g.nobjs, 0, sizeof(sv_g.nobjs));
	for (int i = 0; i < sv_g.ndevs; i++)
		memset(sv_g.devs[i].nobjs, 0, sizeof(sv_g.devs[i].nobjs));
	memset(sv_g.qp_by_slot, 0, sizeof(sv_g.qp_by_slot));
	memset(sv_g.cq_by_slot, 0, sizeof(sv_g.cq_by_slot));
	sv_g.nlqp = 0;
	sv_g.pinned_bytes = 0;
	atomic_store(&sv_g.nstalled, 0);
	sv_g.attached = false;
	sv_g.exiting = false;
	sv_g.proc_slot = -1;
	/* the child reads its own configuration (env may differ after fork);
	 * objects inherited from the parent may still point into the old
	 * table, so it is kept (reachable, not freed) */
	sv_inherited_devs = sv_g.devs;
	sv_g.devs = NULL;
	sv_g.ndevs = 0;
	pthread_mutex_init(&sv_g.lock, NULL);
	pthread_mutex_init(&sv_g.port_lock, NULL);
	sv_host_atfork_child();
}

__attribute__((constructor)) static void sv_init(void)
{
	const char *d = getenv("SIMVERBS_DEBUG");

	sv_debug = d && *d && strcmp(d, "0");
	pthread_atfork(NULL, NULL, sv_atfork_child);
}

__attribute__((destructor)) static void sv_fini(void)
{
	const char *chk = getenv("SIMVERBS_LEAK_CHECK");
	unsigned int n = 0;
	char out[8192];

	if (!sv_g.attached || sv_g.pid != getpid())
		return;
	sv_leak_report(out, sizeof(out), &n);
	sv_detach();
	if (n && chk && !strcmp(chk, "1")) {
		fprintf(stderr, "%ssimverbs: %u object(s) leaked (SIMVERBS_LEAK_CHECK=1)\n", out,
			n);
		fflush(stderr);
		_exit(SV_LEAK_EXIT);
	}
}
