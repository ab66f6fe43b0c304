/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Test stand-in for libfabric's own <rdma/fi_xpu.h> (libfabric 2.7+),
 * declared from the types its fi_xpu(3) documents, because the libfabric
 * this suite runs on (Debian's 1.17) ships none. Same include guard, same
 * unguarded definitions and the same inline wrappers' signatures; the
 * wrappers cannot dispatch through 1.17's struct fi_ops_domain, so their
 * bodies differ.
 */
#ifndef FI_XPU_H
#define FI_XPU_H

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	FI_XPU_WORK_ITEM,
	FI_XPU_SUBGROUP,
	FI_XPU_WORK_GROUP,
	FI_XPU_DEVICE,
};

#define FI_XPU_ALLOC_DMABUF (1ULL << 0)
#define FI_XPU_IMPORT_IOMEMORY (1ULL << 0)
#define FI_XPU_IMPORT_DEVICEMAP (1ULL << 1)

struct fi_xpu_ops {
	size_t size;
	int (*alloc)(uint64_t device, uint64_t size, uint64_t alignment,
		     uint64_t flags, void **addr, int *fd, uint64_t *offset);
	int (*import)(uint64_t device, void *host_addr, uint64_t size,
		      uint64_t flags, void **dev_addr);
	void (*free)(uint64_t device, void *addr);
};

struct fi_xpu_attr {
	enum fi_hmem_iface iface;
	uint64_t device;
	struct fi_xpu_ops *ops;
};

#define FI_XPU_CAP_EP (1ULL << 0)
#define FI_XPU_CAP_CQ (1ULL << 1)
#define FI_XPU_CAP_CNTR (1ULL << 2)

struct fi_xpu_ctx_attr {
	uint64_t caps;
	size_t av_addr_size;
	size_t mr_desc_size;
};

struct fid_xpu_ctx;

struct fi_ops_xpu_ctx {
	size_t size;
	int (*query)(struct fid_xpu_ctx *ctx, struct fi_xpu_ctx_attr *attr);
};

struct fid_xpu_ctx {
	struct fid fid;
	struct fi_ops_xpu_ctx *ops;
};

enum fi_xpu_provider {
	FI_XPU_PROV_EFA = 1,
};

struct fid_xpu {
	uint32_t fclass;
	uint32_t prov_id;
	uint64_t prov_ctx;
};

struct fid_xpu_ep {
	struct fid_xpu fid;
};

struct fid_xpu_cq {
	struct fid_xpu fid;
};

struct fid_xpu_cntr {
	struct fid_xpu fid;
};

static inline int fi_xpu_ctx(struct fid_domain *domain,
			     struct fi_xpu_attr *attr,
			     struct fid_xpu_ctx **ctx, void *context)
{
	(void)domain;
	(void)attr;
	(void)ctx;
	(void)context;
	return -FI_ENOSYS;
}

static inline int fi_xpu_ctx_query(struct fid_xpu_ctx *ctx,
				   struct fi_xpu_ctx_attr *attr)
{
	return ctx->ops->query(ctx, attr);
}

#ifdef __cplusplus
}
#endif

#endif /* FI_XPU_H */
