/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Ring allreduce (sum of float vectors) from device code, on N processes
 * of an fi_xpu world (world.h): a reduce-scatter of n - 1 steps then an
 * allgather of n - 1 steps around the ring. In each step every rank puts
 * one chunk into a slot of that step at the next rank, waits until it is
 * delivered (fi_xpu_world_quiet), and raises the step's signal word there
 * with an atomic; the next rank waits on the word
 * (fi_xpu_signal_wait_until) and adds (or copies) the chunk. One slot per step, so no step overwrites a chunk still in use.
 *
 *   allreduce [-n ranks] [-p shm|ofi] [-f tcp|shm] [-c floats] [-i iters]
 *
 * Values are small integers, so every sum is exact and every element is
 * checked against the closed form.
 */
/* world.h binds ranks to CPUs with the GNU affinity calls (sched.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "world.h"

#include <getopt.h>

struct ring {
	const struct world_dev *w;
	unsigned char *sym;
	uint64_t count;          /* floats in the vector */
	uint64_t vec, slots, sig; /* offsets: [count], [2n][chunk], [2n] u64 */
	uint64_t one;            /* offset of a word holding 1 (signal source) */
	uint32_t step, items;
	int32_t err, line;
};

static uint64_t chunk_len(const struct ring *r)
{
	return (r->count + r->w->n - 1) / r->w->n;
}

/* The chunk a rank sends in `step`: reduce-scatter steps 0..n-2 send
 * chunk (rank - step), allgather steps n-1..2n-3 send (rank + 1 - step'). */
static uint32_t send_chunk(const struct ring *r, uint32_t step)
{
	uint32_t n = r->w->n, me = r->w->rank;
	if (step < n - 1)
		return (me + n - step) % n;
	return (me + 1 + n - (step - (n - 1))) % n;
}

static void fail(struct ring *r, int rc, int line)
{
	if (!r->err) {
		r->err = rc;
		r->line = line;
	}
}

/* Work item `item` writes its share of this step's chunk to the next rank. */
static void put_step(struct ring *r, uint32_t item)
{
	const struct world_dev *w = r->w;
	uint64_t cl = chunk_len(r), c = send_chunk(r, r->step), lo, hi, per;
	uint32_t next = (w->rank + 1) % w->n;
	int rc;
	lo = c * cl;
	hi = lo + cl < r->count ? lo + cl : r->count;
	per = (hi - lo + r->items - 1) / r->items;
	lo += per * item;
	if (lo >= hi)
		return;
	if (lo + per < hi)
		hi = lo + per;
	while ((rc = fi_xpu_world_put(w->win, (int)next,
				      r->slots + ((uint64_t)r->step * cl + lo - c * cl) * 4,
				      r->sym + r->vec + lo * 4, (hi - lo) * 4, FI_DELIVERY_COMPLETE,
				      FI_XPU_WORK_ITEM)) == -FI_EAGAIN)
		fi_xpu_arch_pause();
	if (rc)
		fail(r, rc, __LINE__);
}

/* One work item: every write of the step delivered, then the signal. */
static void signal_step(struct ring *r)
{
	const struct world_dev *w = r->w;
	uint32_t next = (w->rank + 1) % w->n;
	int rc = fi_xpu_world_quiet(w->world, 60000, FI_XPU_WORK_ITEM);
	if (!rc)
		while ((rc = fi_xpu_world_atomic(w->win, (int)next, r->sig + (uint64_t)r->step * 8,
						 r->sym + r->one, 1, FI_UINT64, FI_ATOMIC_WRITE,
						 FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM)) ==
		       -FI_EAGAIN)
			fi_xpu_arch_pause();
	if (rc)
		fail(r, rc, __LINE__);
}

/* Waits for the previous rank's chunk of this step and folds it in. */
static void take_step(struct ring *r, uint32_t item)
{
	const struct world_dev *w = r->w;
	uint32_t n = w->n, prev_chunk = send_chunk(r, r->step) == 0 ? n - 1 : send_chunk(r, r->step) - 1;
	uint64_t cl = chunk_len(r), lo = (uint64_t)prev_chunk * cl, hi, i;
	int rc;
	float *v = (float *)(void *)(r->sym + r->vec);
	const float *in = (const float *)(const void *)(r->sym + r->slots) + (uint64_t)r->step * cl;
	rc = fi_xpu_signal_wait_until(world_self_ep(w), (const uint64_t *)(void *)(r->sym + r->sig) + r->step,
				      FI_XPU_CMP_NE, 0, 60000, FI_XPU_WORK_ITEM);
	if (rc) {
		fail(r, rc, __LINE__);
		return;
	}
	hi = lo + cl < r->count ? lo + cl : r->count;
	for (i = lo + item; i < hi; i += r->items) {
		if (r->step < n - 1)
			v[i] += in[i - lo];
		else
			v[i] = in[i - lo];
	}
}

enum { PUT, SIGNAL, TAKE };
struct job {
	struct ring *r;
	int what;
};

static void kernel(void *arg)
{
	struct job *j = (struct job *)arg;
	uint32_t item = fi_xpu_host_item()->local_id;
	if (j->what == PUT)
		put_step(j->r, item);
	else if (j->what == SIGNAL) {
		if (item == 0)
			signal_step(j->r);
	} else
		take_step(j->r, item);
}

static void launch(struct ring *r, int what)
{
	struct fi_xpu_host_launch_attr la;
	struct job j;
	memset(&la, 0, sizeof(la));
	la.num_groups = 1;
	la.group_size = r->items;
	j.r = r;
	j.what = what;
	WCHECK(fi_xpu_host_launch(&la, kernel, &j));
	if (r->err) {
		fprintf(stderr, "[%u] step %u failed at line %d: %s\n", r->w->rank, r->step, r->line,
			fi_xpu_strerror(r->err));
		exit(1);
	}
}

static float value(uint32_t rank, uint64_t i)
{
	return (float)((rank + 1) * 3 + i % 101);
}

int main(int argc, char **argv)
{
	struct world w;
	struct ring r;
	uint64_t count = 1 << 20, i, cl, bad = 0;
	int c, n = 2, iters = 3, it;
	double t0, sum = 0;
	const char *prov = "shm", *fabric = NULL;
	while ((c = getopt(argc, argv, "n:p:f:c:i:")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'p': prov = optarg; break;
		case 'f': fabric = optarg; break;
		case 'c': count = strtoull(optarg, NULL, 0); break;
		case 'i': iters = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n ranks] [-p shm|ofi] [-f fabric] [-c floats] "
					"[-i iters]\n", argv[0]);
			return 2;
		}
	}
	if (n < 2 || n > WORLD_MAXP || count < (uint64_t)n || iters < 1) {
		fprintf(stderr, "allreduce: bad arguments (2 <= ranks <= %d, floats >= ranks, iters >= 1)\n",
			WORLD_MAXP);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	memset(&w, 0, sizeof(w));
	memset(&r, 0, sizeof(r));
	w.name = "allreduce";
	w.prov = prov;
	w.fabric = fabric;
	world_spawn(&w, n);
	n = w.n; /* a launcher's FI_XPU_BOOTSTRAP_SIZE */
	r.count = count;
	cl = (count + n - 1) / n;
	r.vec = WORLD_HDR;
	r.slots = r.vec + ((count * 4 + 63) & ~63ULL);
	r.sig = r.slots + ((2ULL * n * cl * 4 + 63) & ~63ULL);
	r.one = r.sig + 2ULL * n * 8;
	r.items = 2;
	world_open(&w, r.one + 64, NULL);
	r.w = w.dev;
	r.sym = w.sym;
	*(uint64_t *)(void *)(w.sym + r.one) = 1;
	for (it = 0; it < iters; it++) {
		float *v = (float *)(void *)(w.sym + r.vec);
		for (i = 0; i < count; i++)
			v[i] = value((uint32_t)w.rank, i);
		memset(w.sym + r.sig, 0, 2ULL * n * 8);
		world_barrier(&w);
		t0 = world_now();
		for (r.step = 0; r.step < 2u * (uint32_t)(n - 1); r.step++) {
			launch(&r, PUT);
			launch(&r, SIGNAL);
			launch(&r, TAKE);
		}
		sum += world_now() - t0;
		world_barrier(&w);
	}
	{
		const float *v = (const float *)(const void *)(w.sym + r.vec);
		for (i = 0; i < count; i++) {
			float want = 0;
			int k;
			for (k = 0; k < n; k++)
				want += value((uint32_t)k, i);
			if (v[i] != want && !bad++)
				fprintf(stderr, "[%d] element %" PRIu64 " = %g, want %g\n", w.rank, i,
					(double)v[i], (double)want);
		}
	}
	{
		uint64_t all[WORLD_MAXP];
		int k;
		world_allgather(&w, &bad, all, sizeof(bad));
		for (k = 0; k < n; k++)
			bad += k != w.rank ? all[k] : 0;
	}
	if (w.rank == 0)
		printf("allreduce n=%d prov=%s%s%s floats=%" PRIu64 ": %s, %.1f us per allreduce\n", n,
		       prov, fabric ? "/" : "", fabric ? fabric : "", count, bad ? "FAILED" : "ok",
		       sum / iters * 1e6);
	world_close(&w);
	if (w.rank != 0)
		return bad != 0;
	return world_join(&w) || bad != 0;
}
