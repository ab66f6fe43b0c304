/*
 * The ofi provider's proxy in isolation: one process, endpoints writing to
 * each other over a libfabric provider (shm, tcp loopback), measured two
 * ways in the same run:
 *
 *   host   fi_write issued from the host directly, one thread (the
 *          baseline), on a domain opened as the provider opens its own
 *          (threading, memory registration, and write ordering where the
 *          transport grants it);
 *   xpu    the same writes posted by device code (a CPU thread standing in
 *          for the device, iface FI_HMEM_SYSTEM) through fi_xpu/device.h on
 *          the ofi provider: one device thread and the domain's progress
 *          thread (the proxy), nothing else;
 *   ring   (only when asked for: `ring` or `all`) a bare ring
 *          between two threads: 64-byte entries one way, the second thread
 *          copying the bytes each names, 16-byte completions back. No
 *          checks and no libfabric: the least any proxy pays on this
 *          machine to move an entry to another core and back.
 *
 * Both write from one endpoint to a second one of the same domain.
 *
 * Figures (one "name value unit" line each, prefixed host_, xpu_ or ring_), each
 * the median of `rounds` measurements, host and xpu taking turns so that
 * both see the same load:
 *   latency_8B_us     an 8-byte write from post to its completion
 *   rate_8B_mps       8-byte writes per second, window of 64
 *   bw_<size>_MBps    write bandwidth at 64 KiB, 1 MiB and 16 MiB, window 8
 *
 * usage: ofi_proxy <libfabric-provider> [iterations [rounds [host|xpu|ring|all]]]
 *        ofi_proxy <libfabric-provider> --post N [BYTES]
 *                                                  N writes (8 bytes unless
 *                                                  told) through xpu_post,
 *                                                  one at a time (for
 *                                                  callgrind, valgrind)
 *        ofi_proxy <libfabric-provider> --host-post N [BYTES]
 *                                                  the same N writes from
 *                                                  the host, one at a time
 *        ofi_proxy <libfabric-provider> --put-signal N
 *                                                  latency of an 8-byte put
 *                                                  with signal (SET), post
 *                                                  to completion, and of an
 *                                                  8-byte write, N each,
 *                                                  taking turns in rounds of
 *                                                  100: xpu_put_signal_8B_us,
 *                                                  xpu_write_8B_us
 */
#include "lf_bench.h"

#include "xpu_bench.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#define XTRY(call) do { long long r_ = (long long)(call); if (r_ < 0) DIE("%s: %s", #call, fi_xpu_strerror((int)r_)); } while (0)

#define BIG (16u << 20)
/* Source and destination of the big writes, then the 8-byte words. */
#define SRC 0
#define DST BIG
#define WORDS (2 * BIG)
#define HEAP (2 * BIG + (1u << 20))
#define WINDOW 64
#define BW_WINDOW 8

static const size_t sizes[] = { 64u << 10, 1u << 20, 16u << 20 };

/* One way of posting a write and reaping completions. */
struct path {
	int (*post)(void *self, size_t src, size_t dst, size_t len); /* 0 or -FI_EAGAIN */
	int (*reap)(void *self);                                      /* completions read */
	void *self;
	uint8_t *heap;
	/* Around each measurement, where the path has a thread of its own
	 * that must not run between them (NULL otherwise). */
	void (*start)(void *self);
	void (*stop)(void *self);
};

static void path_start(struct path *p)
{
	if (p->start)
		p->start(p->self);
}

static void path_stop(struct path *p)
{
	if (p->stop)
		p->stop(p->self);
}

static void reap_to(struct path *p, int *out, int target)
{
	while (*out > target)
		*out -= p->reap(p->self);
}

static void write_at(struct path *p, size_t src, size_t dst, size_t len, int *out)
{
	/* Refused: progress (and reap) before retrying, even with nothing
	 * outstanding, since libfabric's shm connects to a peer through its
	 * progress calls. */
	while (p->post(p->self, src, dst, len) == -FI_EAGAIN)
		*out -= p->reap(p->self);
	(*out)++;
}

/* Figure `f` of path `p` (see `fig_names`), one measurement. */
static double figure_of(struct path *p, int f, int iters)
{
	int out = 0;
	uint64_t *word = (uint64_t *)(p->heap + WORDS), *dst = word + 1;
	double t0;
	if (f == 0) {
		t0 = now();
		for (int i = 1; i <= iters; i++) {
			*word = (uint64_t)i;
			write_at(p, WORDS, WORDS + 8, 8, &out);
			reap_to(p, &out, 0);
		}
		double lat = (now() - t0) / iters * 1e6;
		/* A completion without delivery complete may come before the
		 * data is placed: drive progress a bounded while first. */
		for (double t = now(); __atomic_load_n(dst, __ATOMIC_ACQUIRE) != (uint64_t)iters &&
				       now() - t < 1.0;)
			p->reap(p->self);
		if (__atomic_load_n(dst, __ATOMIC_ACQUIRE) != (uint64_t)iters)
			DIE("the last write did not land");
		return lat;
	}
	if (f == 1) {
		int n = iters * 10;
		t0 = now();
		for (int i = 0; i < n; i++) {
			write_at(p, WORDS, WORDS + 64 + (size_t)(i % 64) * 8, 8, &out);
			if (out >= WINDOW)
				reap_to(p, &out, WINDOW / 2);
		}
		reap_to(p, &out, 0);
		return n / (now() - t0) / 1e6;
	}
	size_t len = sizes[f - 2];
	int reps = (int)((256u << 20) / len) * (iters >= 2000 ? 2 : 1);
	t0 = now();
	for (int i = 0; i < reps; i++) {
		write_at(p, SRC, DST, len, &out);
		if (out >= BW_WINDOW)
			reap_to(p, &out, BW_WINDOW / 2);
	}
	reap_to(p, &out, 0);
	return (double)len * reps / (now() - t0) / 1e6;
}

/* `n` writes of `len` bytes (at most 16 MiB), each completed before the
 * next is posted. */
static void one_at_a_time(struct path *p, int n, size_t len)
{
	int out = 0;
	if (len < 1 || len > BIG)
		DIE("a write is 1 byte to 16 MiB");
	for (int i = 0; i < n; i++) {
		if (len <= 8)
			write_at(p, WORDS, WORDS + 8, len, &out);
		else
			write_at(p, SRC, DST, len, &out);
		reap_to(p, &out, 0);
	}
}

static double figure(struct path *p, int f, int iters)
{
	path_start(p);
	double v = figure_of(p, f, iters);
	path_stop(p);
	return v;
}

static const char *fig_names[] = { "latency_8B_us", "rate_8B_mps", "bw_64KiB_MBps", "bw_1MiB_MBps",
				   "bw_16MiB_MBps" };
static const char *fig_units[] = { "us", "Mmsg/s", "MB/s", "MB/s", "MB/s" };
#define FIGS 5
#define MAX_ROUNDS 15

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Each figure `rounds` times, the paths taking turns, so that both see the
 * same load; prints the median of each. */
static void measure(struct path **paths, const char **prefixes, int npaths, int iters, int rounds)
{
	static double v[3][FIGS][MAX_ROUNDS];
	for (int k = 0; k < npaths; k++) {
		int out = 0;
		/* Warm-up: connections, first touches of every buffer. */
		if (getenv("OFI_PROXY_VERBOSE"))
			fprintf(stderr, "%s: warm-up\n", prefixes[k]);
		path_start(paths[k]);
		for (int i = 0; i < 100; i++) {
			write_at(paths[k], WORDS, WORDS + 8, 8, &out);
			reap_to(paths[k], &out, 0);
		}
		path_stop(paths[k]);
	}
	for (int f = 0; f < FIGS; f++)
		for (int r = 0; r < rounds; r++)
			for (int k = 0; k < npaths; k++) {
				v[k][f][r] = figure(paths[k], f, iters);
				if (getenv("OFI_PROXY_VERBOSE"))
					fprintf(stderr, "%s %s round %d: %.3f\n", prefixes[k], fig_names[f], r,
						v[k][f][r]);
			}
	for (int k = 0; k < npaths; k++)
		for (int f = 0; f < FIGS; f++) {
			qsort(v[k][f], (size_t)rounds, sizeof(double), cmp_double);
			printf("%s_%s %.3f %s\n", prefixes[k], fig_names[f], v[k][f][rounds / 2],
			       fig_units[f]);
		}
	fflush(stdout);
}

/* ---- host-direct fi_write, one thread ---- */

struct host {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq[2];
	struct fid_ep *ep[2];
	struct fid_mr *mr[2];
	uint8_t *buf;
	void *desc;
	fi_addr_t peer;
	uint64_t base, key;
};

static int host_post(void *s, size_t src, size_t dst, size_t len)
{
	struct host *h = s;
	ssize_t r = fi_write(h->ep[0], h->buf + src, len, h->desc, h->peer, h->base + dst, h->key, NULL);
	if (r && r != -FI_EAGAIN)
		DIE("fi_write: %s", fi_strerror((int)-r));
	return (int)r;
}

static int host_reap(void *s)
{
	struct host *h = s;
	struct fi_cq_entry e[16];
	/* The target endpoint places the data inside its own calls. */
	(void)fi_cq_read(h->cq[1], e, 16);
	ssize_t n = fi_cq_read(h->cq[0], e, 16);
	if (n == -FI_EAGAIN)
		return 0;
	if (n < 0)
		DIE("fi_cq_read: %s", fi_strerror((int)-n));
	return (int)n;
}

/* Two endpoints of one domain, the first writing to the second. */
static void host_open(struct host *h, const char *prov)
{
	struct fi_info *hints = lf_hints(prov);
	memset(h, 0, sizeof(*h));
	/* As the ofi provider asks (its progress threads and host calls share
	 * the domain). */
	hints->domain_attr->threading = FI_THREAD_SAFE;
	TRY(fi_getinfo_ordered(hints, &h->info));
	fi_freeinfo(hints);
	fprintf(stderr, "host-direct on libfabric provider %s, writes %s\n",
		h->info->fabric_attr->prov_name,
		h->info->tx_attr->msg_order & FI_ORDER_WAW ? "ordered (FI_ORDER_WAW)" : "unordered");
	TRY(fi_fabric(h->info->fabric_attr, &h->fabric, NULL));
	TRY(fi_domain(h->fabric, h->info, &h->domain, NULL));
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	TRY(fi_av_open(h->domain, &av_attr, &h->av, NULL));
	h->buf = mmap(NULL, HEAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h->buf == MAP_FAILED)
		DIE("mmap");
	memset(h->buf, 0, HEAP);
	for (int k = 0; k < 2; k++) {
		struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 1024 };
		TRY(fi_cq_open(h->domain, &cq_attr, &h->cq[k], NULL));
		TRY(fi_endpoint(h->domain, h->info, &h->ep[k], NULL));
		TRY(fi_ep_bind(h->ep[k], &h->av->fid, 0));
		TRY(fi_ep_bind(h->ep[k], &h->cq[k]->fid, FI_TRANSMIT | FI_RECV));
		TRY(fi_enable(h->ep[k]));
		TRY(fi_mr_reg(h->domain, h->buf, HEAP, FI_WRITE | FI_REMOTE_WRITE, 0, (uint64_t)k, 0,
			      &h->mr[k], NULL));
		if (h->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
			TRY(fi_mr_bind(h->mr[k], &h->ep[k]->fid, 0));
			TRY(fi_mr_enable(h->mr[k]));
		}
	}
	h->desc = fi_mr_desc(h->mr[0]);
	h->key = fi_mr_key(h->mr[1]);
	h->base = (h->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)h->buf : 0;
	char name[256];
	size_t len = sizeof(name);
	TRY(fi_getname(&h->ep[1]->fid, name, &len));
	if (fi_av_insert(h->av, name, 1, &h->peer, 0, NULL) != 1)
		DIE("fi_av_insert");
}

static void host_close(struct host *h)
{
	for (int k = 0; k < 2; k++) {
		fi_close(&h->mr[k]->fid);
		fi_close(&h->ep[k]->fid);
		fi_close(&h->cq[k]->fid);
	}
	fi_close(&h->av->fid);
	fi_close(&h->domain->fid);
	fi_close(&h->fabric->fid);
	fi_freeinfo(h->info);
	munmap(h->buf, HEAP);
}

/* ---- device code through the ofi provider's proxy ---- */

struct xpu {
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq, *hcq2;
	struct fid_xpu_host_ep *hep, *hep2;
	struct fid_xpu_mr *mr;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	uint8_t *heap;
	uint8_t desc[64];
	uint64_t raw[8];
	uint64_t key;
};

/* One 8-byte write: the device-side post whose instructions are counted. */
__attribute__((noinline)) int xpu_post(void *s, size_t src, size_t dst, size_t len)
{
	struct xpu *x = s;
	int rc = fi_xpu_write(&x->ep, x->heap + src, len, x->desc, 0, x->raw,
			      (uint64_t)(uintptr_t)x->heap + dst, x->key, NULL, 0, FI_XPU_WORK_ITEM);
	if (rc && rc != -FI_EAGAIN)
		DIE("fi_xpu_write: %s", fi_xpu_strerror(rc));
	return rc;
}

/* One 8-byte put with signal: data to `dst`, the signal word SET to the
 * data's value right behind it. */
static int xpu_put_signal(struct xpu *x, size_t src, size_t dst, size_t sig, uint64_t v)
{
	int rc = fi_xpu_put_signal(&x->ep, x->heap + src, 8, x->desc, x->raw,
				   (uint64_t)(uintptr_t)x->heap + dst, x->key,
				   (uint64_t)(uintptr_t)x->heap + sig, x->key, v, FI_XPU_SIGNAL_SET,
				   NULL, 0, FI_XPU_WORK_ITEM);
	if (rc && rc != -FI_EAGAIN)
		DIE("fi_xpu_put_signal: %s", fi_xpu_strerror(rc));
	return rc;
}

static int xpu_reap(void *s)
{
	struct xpu *x = s;
	struct fi_cq_entry e[16];
	int64_t n = fi_xpu_cq_read(&x->cq, e, 16, FI_XPU_WORK_ITEM);
	if (n == -FI_EAGAIN)
		return 0;
	if (n < 0)
		DIE("fi_xpu_cq_read: %s", fi_xpu_strerror((int)n));
	return (int)n;
}

static void xpu_open(struct xpu *x)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	uint8_t name[64];
	size_t len = sizeof(name);
	fi_addr_t fa;

	xpu_bench_domain("ofi", &x->dom);
	XTRY(fi_xpu_ctx_open(x->dom, &xattr, &x->ctx, NULL));
	XTRY(fi_xpu_av_open(x->dom, NULL, &x->av, NULL));
	/* As on the host: the first endpoint writes to the second, both
	 * served by the domain's one progress thread. */
	xpu_bench_endpoint(x->dom, x->ctx, x->av, 1024, &x->hcq, &x->hep);
	xpu_bench_endpoint(x->dom, x->ctx, x->av, 1024, &x->hcq2, &x->hep2);
	memset(name, 0, sizeof(name));
	XTRY(fi_xpu_getname(x->hep2, name, &len));
	x->heap = xpu_bench_heap(x->dom, x->ctx, HEAP, &x->mr);
	XTRY(fi_xpu_mr_key(x->mr, &x->key));
	len = sizeof(x->desc);
	XTRY(fi_xpu_mr_desc(x->mr, x->desc, &len, 0, x->ctx));
	XTRY(fi_xpu_av_insert(x->av, name, 1, &fa, 0, NULL));
	len = sizeof(x->raw);
	XTRY(fi_xpu_av_lookup(x->av, fa, x->raw, &len, 0, x->ctx));
	XTRY(fi_xpu_export(&x->hep->fid, 0, &x->ep.fid));
	XTRY(fi_xpu_export(&x->hcq->fid, 0, &x->cq.fid));
}

static void xpu_close(struct xpu *x)
{
	struct fid *objs[] = { &x->hep->fid, &x->hep2->fid, &x->hcq->fid, &x->hcq2->fid,
			       &x->av->fid, &x->ctx->fid, &x->dom->fid };

	XTRY(fi_xpu_close(&x->mr->fid));
	XTRY(fi_xpu_free(x->ctx, x->heap));
	xpu_bench_close(objs, sizeof(objs) / sizeof(objs[0]));
}

/* ---- a bare ring between the same two threads (the bound of any proxy) ----
 *
 * The device thread posts 64-byte entries into a ring and reads 16-byte
 * completions; a second thread takes each entry, copies the bytes it
 * names and writes the completion. No checks, no libfabric: what moving an
 * entry to another core and its completion back costs on this machine. */

#define RING 1024

struct ring_entry {
	uint64_t seq; /* position + 1, stored last */
	uint64_t src, dst, len;
	uint64_t pad[4];
};

struct ring_comp {
	uint64_t seq; /* position + 1, stored last */
	uint64_t ctx;
};

struct ring {
	_Alignas(64) struct ring_entry e[RING];
	_Alignas(64) struct ring_comp c[RING];
	_Alignas(64) uint64_t cons; /* consumer's position, for room */
	_Alignas(64) uint64_t prod, cons_seen, reaped;
	int stop, running;
	pthread_t thread;
	uint8_t *heap;
};

static void *ring_consumer(void *arg)
{
	struct ring *r = arg;
	uint64_t pos = __atomic_load_n(&r->cons, __ATOMIC_RELAXED);
	unsigned idle = 0;
	__atomic_store_n(&r->running, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct ring_entry *s = &r->e[pos % RING];
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != pos + 1) {
			/* Spins: the measurement has the two threads alone. */
			if (++idle > (1u << 16)) {
				sched_yield();
				idle = 0;
			}
			continue;
		}
		idle = 0;
		struct ring_entry w = *s;
		memcpy(r->heap + w.dst, r->heap + w.src, w.len);
		struct ring_comp *c = &r->c[pos % RING];
		c->ctx = w.seq;
		__atomic_store_n(&c->seq, pos + 1, __ATOMIC_RELEASE);
		pos++;
		__atomic_store_n(&r->cons, pos, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void ring_start(void *self)
{
	struct ring *r = self;
	__atomic_store_n(&r->stop, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&r->running, 0, __ATOMIC_RELEASE);
	if (pthread_create(&r->thread, NULL, ring_consumer, r))
		DIE("pthread_create");
	/* Its start is not part of the measurement. */
	while (!__atomic_load_n(&r->running, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void ring_stop(void *self)
{
	struct ring *r = self;
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(r->thread, NULL);
}

static int ring_post(void *self, size_t src, size_t dst, size_t len)
{
	struct ring *r = self;
	if (r->prod - r->cons_seen >= RING) {
		r->cons_seen = __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE);
		if (r->prod - r->cons_seen >= RING)
			return -FI_EAGAIN;
	}
	struct ring_entry *s = &r->e[r->prod % RING];
	s->src = src;
	s->dst = dst;
	s->len = len;
	__atomic_store_n(&s->seq, r->prod + 1, __ATOMIC_RELEASE);
	r->prod++;
	return 0;
}

static int ring_reap(void *self)
{
	struct ring *r = self;
	int n = 0;
	while (n < 16 && __atomic_load_n(&r->c[r->reaped % RING].seq, __ATOMIC_ACQUIRE) == r->reaped + 1) {
		r->reaped++;
		n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		DIE("usage: %s <libfabric-provider> [iterations [rounds [host|xpu|ring|all]]] | --post N", argv[0]);
	/* The ofi provider runs on the libfabric provider named here. */
	setenv("FI_XPU_OFI_PROVIDER", argv[1], 1);
	if (argc > 3 && strcmp(argv[2], "--post") == 0) {
		struct xpu x;
		memset(&x, 0, sizeof(x));
		xpu_open(&x);
		struct path p = { xpu_post, xpu_reap, &x, x.heap, NULL, NULL };
		one_at_a_time(&p, atoi(argv[3]), argc > 4 ? strtoul(argv[4], NULL, 0) : 8);
		xpu_close(&x);
		return 0;
	}
	if (argc > 3 && strcmp(argv[2], "--host-post") == 0) {
		static struct host h;
		host_open(&h, argv[1]);
		struct path p = { host_post, host_reap, &h, h.buf, NULL, NULL };
		one_at_a_time(&p, atoi(argv[3]), argc > 4 ? strtoul(argv[4], NULL, 0) : 8);
		host_close(&h);
		return 0;
	}
	if (argc > 3 && strcmp(argv[2], "--put-signal") == 0) {
		struct xpu x;
		int out = 0, n = atoi(argv[3]);
		double t_sig = 0, t_write = 0, t0;
		uint64_t *word = NULL, *sig = NULL;
		memset(&x, 0, sizeof(x));
		xpu_open(&x);
		struct path p = { xpu_post, xpu_reap, &x, x.heap, NULL, NULL };
		word = (uint64_t *)(x.heap + WORDS);
		sig = word + 3;
		for (int i = 0; i < 100; i++) {
			write_at(&p, WORDS, WORDS + 8, 8, &out);
			reap_to(&p, &out, 0);
		}
		for (int done = 0; done < n; done += 100) {
			t0 = now();
			for (int i = done + 1; i <= done + 100; i++) {
				*word = (uint64_t)i;
				while (xpu_put_signal(&x, WORDS, WORDS + 16, WORDS + 24, (uint64_t)i) ==
				       -FI_EAGAIN)
					out -= xpu_reap(&x);
				out++;
				reap_to(&p, &out, 0);
				if (__atomic_load_n(sig, __ATOMIC_ACQUIRE) != (uint64_t)i ||
				    word[2] != (uint64_t)i)
					DIE("a completed put with signal had not landed");
			}
			t_sig += now() - t0;
			t0 = now();
			for (int i = 0; i < 100; i++) {
				write_at(&p, WORDS, WORDS + 8, 8, &out);
				reap_to(&p, &out, 0);
			}
			t_write += now() - t0;
		}
		n = (n + 99) / 100 * 100;
		printf("xpu_put_signal_8B_us %.3f us\nxpu_write_8B_us %.3f us\n", t_sig / n * 1e6,
		       t_write / n * 1e6);
		xpu_close(&x);
		return 0;
	}
	int iters = argc > 2 ? atoi(argv[2]) : 10000;
	int rounds = argc > 3 ? atoi(argv[3]) : 5;
	const char *only = argc > 4 ? argv[4] : "";
	if (iters < 1 || rounds < 1 || rounds > MAX_ROUNDS)
		DIE("iterations must be positive, rounds 1 to %d", MAX_ROUNDS);
	static struct host h;
	static struct xpu x;
	static struct ring rg;
	struct path hp, xp, rp, *paths[3];
	const char *prefixes[3];
	int n = 0;
	int want_host = !strcmp(only, "") || !strcmp(only, "host") || !strcmp(only, "all");
	int want_xpu = !strcmp(only, "") || !strcmp(only, "xpu") || !strcmp(only, "all");
	if (want_host) {
		host_open(&h, argv[1]);
		hp = (struct path){ host_post, host_reap, &h, h.buf, NULL, NULL };
		paths[n] = &hp;
		prefixes[n++] = "host";
	}
	if (want_xpu) {
		memset(&x, 0, sizeof(x));
		xpu_open(&x);
		xp = (struct path){ xpu_post, xpu_reap, &x, x.heap, NULL, NULL };
		paths[n] = &xp;
		prefixes[n++] = "xpu";
	}
	if (strcmp(only, "ring") == 0 || strcmp(only, "all") == 0) {
		rg.heap = mmap(NULL, HEAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (rg.heap == MAP_FAILED)
			DIE("mmap");
		memset(rg.heap, 0, HEAP);
		rp = (struct path){ ring_post, ring_reap, &rg, rg.heap, ring_start, ring_stop };
		paths[n] = &rp;
		prefixes[n++] = "ring";
	}
	measure(paths, prefixes, n, iters, rounds);
	if (want_host)
		host_close(&h);
	if (want_xpu)
		xpu_close(&x);
	if (rg.heap)
		munmap(rg.heap, HEAP);
	return 0;
}
