/*
 * Baseline of the MoE benchmark: the exchange of examples/moe (the same
 * routing, slots, signals, experts and checks, from moe.h) driven from the
 * host with libfabric directly: one thread per rank posts every token with
 * fi_writemsg(FI_DELIVERY_COMPLETE), reaps its CQ, then writes the count
 * signals; the experts poll their signal words while reading the CQ (tcp
 * and shm move data only inside the target's calls) and write the results
 * back the same way. A host-initiated all-to-allv on the same transport.
 *
 * usage: moe_host <libfabric-provider> [-n ranks] [-T tokens] [-8] [-i iterations]
 *                 [-W warm-up iterations] [-b]
 * (-W and -b as in moe: untimed iterations first; each rank on one CPU).
 * Prints "moe_us <mean us per dispatch+combine>" and "moe_host ...: ok".
 */
#include "../examples/moe/moe.h"

#include "lf_bench.h"

#include <rdma/fi_rma.h>

#include <getopt.h>
#include <sys/mman.h>

#define WINDOW 256

struct lf {
	struct lf_ep l;
	fi_addr_t peer[WORLD_MAXP];
	uint64_t base[WORLD_MAXP], key[WORLD_MAXP];
	int outstanding;
};

struct card {
	char name[256];
	size_t namelen;
	uint64_t base, key;
};

static void progress(struct lf *r)
{
	struct fi_cq_entry e[16];
	ssize_t n = fi_cq_read(r->l.cq, e, 16);
	if (n > 0)
		r->outstanding -= (int)n;
	else if (n != -FI_EAGAIN) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		fi_cq_readerr(r->l.cq, &err, 0);
		DIE("fi_cq_read: %s", fi_strerror(err.err));
	}
}

static void drain(struct lf *r, int target)
{
	while (r->outstanding > target)
		progress(r);
}

static void put(struct lf *r, int d, uint64_t src, uint64_t dst, size_t len)
{
	struct iovec iov = { r->l.buf + src, len };
	struct fi_rma_iov rma = { r->base[d] + dst, len, r->key[d] };
	struct fi_msg_rma msg;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.desc = &r->l.desc;
	msg.iov_count = 1;
	msg.addr = r->peer[d];
	msg.rma_iov = &rma;
	msg.rma_iov_count = 1;
	drain(r, WINDOW - 1);
	for (;;) {
		ssize_t ret = fi_writemsg(r->l.ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
		if (ret == 0)
			break;
		if (ret != -FI_EAGAIN)
			DIE("fi_writemsg: %s", fi_strerror((int)-ret));
		progress(r);
	}
	r->outstanding++;
}

static uint64_t wait_word(struct lf *r, const uint64_t *w)
{
	uint64_t v;
	double t0 = world_now();
	while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) == 0) {
		progress(r);
		if (world_now() - t0 > 60)
			DIE("a signal never came");
	}
	return v;
}

static void setup(struct lf *r, struct world *w, const char *prov, size_t len)
{
	struct card mine, all[WORLD_MAXP];
	int i;
	lf_ep_open(&r->l, prov, 4096, len, 0);
	memset(&mine, 0, sizeof(mine));
	mine.namelen = sizeof(mine.name);
	TRY(fi_getname(&r->l.ep->fid, mine.name, &mine.namelen));
	mine.base = lf_ep_base(&r->l);
	mine.key = fi_mr_key(r->l.mr);
	world_allgather(w, &mine, all, sizeof(mine));
	for (i = 0; i < w->n; i++) {
		if (fi_av_insert(r->l.av, all[i].name, 1, &r->peer[i], 0, NULL) != 1)
			DIE("fi_av_insert");
		r->base[i] = all[i].base;
		r->key[i] = all[i].key;
	}
}

/* Every token to its experts' slots (the part callgrind counts). */
__attribute__((noinline)) void moe_host_dispatch(struct lf *r, struct moe_layout *l, uint32_t me);
__attribute__((noinline)) void moe_host_dispatch(struct lf *r, struct moe_layout *l, uint32_t me)
{
	unsigned char *sym = r->l.buf;
	const uint32_t *route = (const uint32_t *)(const void *)(sym + l->route);
	uint64_t *cnt = (uint64_t *)(void *)(sym + l->cnt);
	uint32_t t, j;
	for (t = 0; t < l->T; t++)
		for (j = 0; j < l->K; j++) {
			uint32_t g = route[t * l->K + j], d = g / l->E, e = g % l->E;
			uint64_t idx = ((uint64_t)me * l->E + e) * l->T + cnt[d * l->E + e]++;
			put(r, (int)d, l->x + (uint64_t)t * l->tok_bytes, l->recv + idx * l->tok_bytes,
			    l->tok_bytes);
			put(r, (int)d, l->origin + ((uint64_t)t * l->K + j) * 8, l->meta + idx * 8, 8);
		}
}

/* The four phases of moe.h, from the host. */
__attribute__((noinline)) void moe_host_exchange(struct lf *r, struct moe_layout *l, uint32_t n,
						 uint32_t me);
__attribute__((noinline)) void moe_host_exchange(struct lf *r, struct moe_layout *l, uint32_t n,
						 uint32_t me)
{
	unsigned char *sym = r->l.buf;
	const float *wt = (const float *)(const void *)(sym + l->weight);
	const uint64_t *cnt = (const uint64_t *)(const void *)(sym + l->cnt);
	uint64_t *sig = (uint64_t *)(void *)(sym + l->sigsrc);
	uint64_t *dsig = (uint64_t *)(void *)(sym + l->dsig), *csig = (uint64_t *)(void *)(sym + l->csig);
	uint64_t *csrc = (uint64_t *)(void *)(sym + l->csrc), *meta = (uint64_t *)(void *)(sym + l->meta);
	uint32_t t, j, d, e, s, p;

	moe_host_dispatch(r, l, me);
	drain(r, 0);
	for (d = 0; d < n; d++)
		for (e = 0; d != me && e < l->E; e++) {
			sig[d * l->E + e] = cnt[d * l->E + e] + 1;
			put(r, (int)d, l->sigsrc + ((uint64_t)d * l->E + e) * 8,
			    l->dsig + ((uint64_t)me * l->E + e) * 8, 8);
		}
	for (s = 0; s < n; s++) {
		uint64_t sent = 0;
		if (s == me)
			continue;
		for (e = 0; e < l->E; e++) {
			uint32_t pair = s * l->E + e, g = me * l->E + e;
			uint64_t count = wait_word(r, dsig + pair) - 1;
			sent += count;
			for (p = 0; p < count; p++) {
				uint64_t idx = (uint64_t)pair * l->T + p;
				const unsigned char *tok = sym + l->recv + idx * l->tok_bytes;
				uint16_t *y = (uint16_t *)(void *)(sym + l->out + idx * l->out_bytes);
				moe_expert_token(l, g, tok, y);
				put(r, (int)s, l->out + idx * l->out_bytes,
				    l->comb + meta[idx] * l->out_bytes, l->out_bytes);
			}
		}
		csrc[s] = sent + 1;
	}
	drain(r, 0);
	for (s = 0; s < n; s++)
		if (s != me)
			put(r, (int)s, l->csrc + (uint64_t)s * 8, l->csig + (uint64_t)me * 8, 8);
	for (d = 0; d < n; d++)
		if (d != me)
			wait_word(r, csig + d);
	for (t = 0; t < l->T; t++) {
		uint16_t *res = (uint16_t *)(void *)(sym + l->result + (uint64_t)t * l->out_bytes);
		const uint16_t *y[MOE_MAX_K];
		for (j = 0; j < l->K; j++)
			y[j] = (const uint16_t *)(const void *)(sym + l->comb +
								((uint64_t)t * l->K + j) * l->out_bytes);
		moe_weighted_sum(l->H, l->K, wt + t * l->K, y, res);
	}
	drain(r, 0);
}

int main(int argc, char **argv)
{
	struct world w;
	struct lf r;
	struct moe_layout l;
	int c, n = 2, fp8 = 0, iters = 3, warmup = 0, bind = 0, it, k;
	uint32_t T = 32;
	double sum = 0, t0, all[WORLD_MAXP];
	long bad, bads[WORLD_MAXP];
	const char *prov;
	if (argc < 2)
		return 2;
	prov = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "n:T:8i:W:b")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'T': T = (uint32_t)atoi(optarg); break;
		case '8': fp8 = 1; break;
		case 'i': iters = atoi(optarg); break;
		case 'W': warmup = atoi(optarg); break;
		case 'b': bind = 1; break;
		default: return 2;
		}
	}
	if (n < 2 || n > WORLD_MAXP || iters < 1 || warmup < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	memset(&w, 0, sizeof(w));
	memset(&r, 0, sizeof(r));
	w.bind = bind;
	world_spawn(&w, n);
	moe_plan(&l, (uint32_t)n, T, 7168, 4, 3, fp8);
	setup(&r, &w, prov, l.size);
	memcpy(r.l.buf + WORLD_HDR, &l, sizeof(l));
	moe_fill(&l, r.l.buf, (uint32_t)n, (uint32_t)w.rank);
	for (it = -warmup; it < iters; it++) {
		moe_reset(&l, r.l.buf, (uint32_t)n);
		world_barrier(&w);
		t0 = world_now();
		moe_host_exchange(&r, &l, (uint32_t)n, (uint32_t)w.rank);
		if (it >= 0)
			sum += world_now() - t0;
		world_barrier(&w);
	}
	bad = moe_verify(&l, r.l.buf, (uint32_t)n, (uint32_t)w.rank);
	sum /= iters;
	world_allgather(&w, &sum, all, sizeof(sum));
	world_allgather(&w, &bad, bads, sizeof(bad));
	for (k = 0; k < n; k++) {
		sum = all[k] > sum ? all[k] : sum;
		bad += k != w.rank ? bads[k] : 0;
	}
	if (w.rank == 0) {
		printf("moe_us %.1f\n", sum * 1e6);
		printf("moe_host n=%d prov=%s dtype=%s T=%u: %s\n", n, prov, fp8 ? "fp8" : "bf16", T,
		       bad ? "FAILED" : "ok");
	}
	world_barrier(&w);
	lf_ep_close(&r.l);
	if (w.rank != 0)
		return bad != 0;
	return world_join(&w) || bad != 0;
}
