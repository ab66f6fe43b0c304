/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the fi_xpu benchmarks share, so that their figures come from the
 * same set-up: CHECK, and one endpoint on a host XPU (iface
 * FI_HMEM_SYSTEM) with its AV, CQ and a heap registered for every access.
 */
#ifndef FI_XPU_BENCH_XPU_BENCH_H
#define FI_XPU_BENCH_XPU_BENCH_H

#include "bench.h"

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A negative result ends the program with status 2. */
#define CHECK(expr)                                                             \
	do {                                                                    \
		long long rc_ = (long long)(expr);                              \
		if (rc_ < 0) {                                                  \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__,  \
				#expr, fi_xpu_strerror((int)rc_));              \
			exit(2);                                                \
		}                                                               \
	} while (0)

/* Opens a domain of the provider named `prov`; exits with status 2 when
 * there is none. */
static inline void xpu_bench_domain(const char *prov, struct fid_xpu_domain **dom)
{
	struct fi_xpu_info *info, *i;

	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	for (i = info; i && strcmp(i->prov_name, prov) != 0; i = i->next)
		;
	if (!i) {
		fprintf(stderr, "the %s provider is not available\n", prov);
		exit(2);
	}
	CHECK(fi_xpu_domain(i, NULL, dom, NULL));
	fi_xpu_freeinfo(info);
}

/* Allocates `len` bytes (DMA-BUF exportable, page-aligned) through `ctx`,
 * zeroed, and registers them for local and remote reads and writes. */
static inline uint8_t *xpu_bench_heap(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx,
				      size_t len, struct fid_xpu_mr **mr)
{
	uint8_t *heap;
	uint64_t off;
	int fd;

	CHECK(fi_xpu_alloc(ctx, len, 4096, FI_XPU_ALLOC_DMABUF, (void **)&heap, &fd, &off));
	close(fd);
	memset(heap, 0, len);
	CHECK(fi_xpu_mr_reg(dom, ctx, heap, len,
			    FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, mr, NULL));
	return heap;
}

/* Opens an endpoint bound to `av` and to a CQ of its own of `cq_size`
 * entries (FI_CQ_FORMAT_CONTEXT), and enables it. */
static inline void xpu_bench_endpoint(struct fid_xpu_domain *dom, struct fid_xpu_host_ctx *ctx,
				      struct fid_xpu_av *av, size_t cq_size,
				      struct fid_xpu_host_cq **hcq, struct fid_xpu_host_ep **hep)
{
	struct fi_xpu_cq_attr cattr = { .size = cq_size, .format = FI_CQ_FORMAT_CONTEXT,
					.timeout = 10000, .xpu_ctx = ctx };
	struct fi_xpu_ep_attr eattr = { .xpu_ctx = ctx };

	CHECK(fi_xpu_cq_open(dom, &cattr, hcq, NULL));
	CHECK(fi_xpu_endpoint(dom, &eattr, hep, NULL));
	CHECK(fi_xpu_ep_bind(*hep, &av->fid, 0));
	CHECK(fi_xpu_ep_bind(*hep, &(*hcq)->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(*hep));
}

struct xpu_ep {
	/* What device code posts with. */
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	uint8_t *heap;
	uint8_t desc[64];
	/* The host objects behind them. */
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
	size_t heap_len;
};

/*
 * Opens a domain of `prov`, its context and AV, and an endpoint bound to a
 * CQ of `cq_size` entries (FI_CQ_FORMAT_CONTEXT), enabled and exported with
 * its CQ; registers a heap of `heap_len` bytes. The endpoint's name goes
 * to `name` (64 bytes), the heap's key to *key.
 */
static inline void xpu_ep_open(struct xpu_ep *x, const char *prov, size_t cq_size,
			       size_t heap_len, uint8_t *name, uint64_t *key)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	size_t len = 64;

	xpu_bench_domain(prov, &x->dom);
	CHECK(fi_xpu_ctx_open(x->dom, &xattr, &x->ctx, NULL));
	CHECK(fi_xpu_av_open(x->dom, NULL, &x->av, NULL));
	xpu_bench_endpoint(x->dom, x->ctx, x->av, cq_size, &x->hcq, &x->hep);
	CHECK(fi_xpu_getname(x->hep, name, &len));
	x->heap_len = heap_len;
	x->heap = xpu_bench_heap(x->dom, x->ctx, heap_len, &x->mr);
	CHECK(fi_xpu_mr_key(x->mr, key));
	len = sizeof(x->desc);
	CHECK(fi_xpu_mr_desc(x->mr, x->desc, &len, 0, x->ctx));
	CHECK(fi_xpu_export(&x->hep->fid, 0, &x->ep.fid));
	CHECK(fi_xpu_export(&x->hcq->fid, 0, &x->cq.fid));
}

/* Closes `n` objects in the order given. */
static inline void xpu_bench_close(struct fid **objs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		CHECK(fi_xpu_close(objs[i]));
}

static inline void xpu_ep_close(struct xpu_ep *x)
{
	struct fid *objs[] = { &x->hep->fid, &x->hcq->fid, &x->av->fid, &x->ctx->fid,
			       &x->dom->fid };

	CHECK(fi_xpu_close(&x->mr->fid));
	CHECK(fi_xpu_free(x->ctx, x->heap));
	xpu_bench_close(objs, sizeof(objs) / sizeof(objs[0]));
}

#endif
