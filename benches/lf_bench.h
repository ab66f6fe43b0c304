/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The host baselines' libfabric endpoint: an RDM endpoint with RMA, asked
 * for as fi_xpu's ofi provider asks (memory registration modes, the
 * provider by name), its AV and CQ, and a buffer registered for remote
 * writes.
 */
#ifndef FI_XPU_BENCH_LF_BENCH_H
#define FI_XPU_BENCH_LF_BENCH_H

#include "bench.h"
#include "ordered_getinfo.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define TRY(call) do { long long r_ = (long long)(call); if (r_) DIE("%s: %s", #call, fi_strerror((int)-r_)); } while (0)

/* The hints of every baseline; the caller frees them. */
static inline struct fi_info *lf_hints(const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->fabric_attr->prov_name = strdup(prov);
	return hints;
}

struct lf_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	uint8_t *buf;
	size_t len;
	void *desc;
};

/* How lf_ep_open asks and what it does with the buffer. */
#define LF_ORDERED 1u /* writes placed in order where granted (fi_getinfo_ordered) */
#define LF_ZERO 2u    /* the buffer written with zeros before it is registered */

/*
 * Opens an endpoint of the libfabric provider `prov`, bound to an AV and a
 * CQ of `cq_size` entries (FI_CQ_FORMAT_CONTEXT) and enabled, and registers
 * `len` bytes of fresh anonymous memory for remote writes (bound to the
 * endpoint where the provider asks).
 */
static inline void lf_ep_open(struct lf_ep *r, const char *prov, size_t cq_size, size_t len,
			      unsigned flags)
{
	struct fi_info *hints = lf_hints(prov);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = cq_size };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	if (flags & LF_ORDERED)
		TRY(fi_getinfo_ordered(hints, &r->info));
	else
		TRY(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info));
	fi_freeinfo(hints);
	TRY(fi_fabric(r->info->fabric_attr, &r->fabric, NULL));
	TRY(fi_domain(r->fabric, r->info, &r->domain, NULL));
	TRY(fi_cq_open(r->domain, &cq_attr, &r->cq, NULL));
	TRY(fi_av_open(r->domain, &av_attr, &r->av, NULL));
	TRY(fi_endpoint(r->domain, r->info, &r->ep, NULL));
	TRY(fi_ep_bind(r->ep, &r->av->fid, 0));
	TRY(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(r->ep));
	r->len = len;
	r->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->buf == MAP_FAILED)
		DIE("mmap");
	if (flags & LF_ZERO)
		memset(r->buf, 0, len);
	TRY(fi_mr_reg(r->domain, r->buf, len, FI_WRITE | FI_REMOTE_WRITE, 0, 0, 0, &r->mr, NULL));
	if (r->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		TRY(fi_mr_bind(r->mr, &r->ep->fid, 0));
		TRY(fi_mr_enable(r->mr));
	}
	r->desc = fi_mr_desc(r->mr);
}

/* The address a peer writes to in this endpoint's buffer: its virtual
 * address where the provider uses those, else 0. */
static inline uint64_t lf_ep_base(const struct lf_ep *r)
{
	return (r->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)r->buf : 0;
}

static inline void lf_ep_close(struct lf_ep *r)
{
	fi_close(&r->mr->fid);
	fi_close(&r->ep->fid);
	fi_close(&r->av->fid);
	fi_close(&r->cq->fid);
	fi_close(&r->domain->fid);
	fi_close(&r->fabric->fid);
	fi_freeinfo(r->info);
	munmap(r->buf, r->len);
}

#endif
