/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * libfabric's <rdma/fi_xpu.h> and fi_xpu's headers in one translation
 * unit, in the order UPSTREAM_FIRST selects. Built as C11 and C++17 with
 * warnings as errors against a stand-in of libfabric's header
 * (tests/c/upstream), then run: both APIs keep their own signatures, the
 * shared types are one set of types, and fi_xpu's host API works.
 */
#if UPSTREAM_FIRST
#include <rdma/fi_xpu.h>
#include <fi_xpu.h>
#include <fi_xpu/device.h>
#else
#include <fi_xpu/device.h>
#include <fi_xpu.h>
#include <rdma/fi_xpu.h>
#endif
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
#define STATIC_ASSERT(c) static_assert(c, #c)
#else
#define STATIC_ASSERT(c) _Static_assert(c, #c)
#endif

/* Shared with upstream: the same values and layouts. */
STATIC_ASSERT(FI_XPU_WORK_ITEM == 0 && FI_XPU_SUBGROUP == 1);
STATIC_ASSERT(FI_XPU_WORK_GROUP == 2 && FI_XPU_DEVICE == 3);
STATIC_ASSERT(FI_XPU_PROV_EFA == 1);
STATIC_ASSERT(FI_XPU_CAP_EP == 1 && FI_XPU_CAP_CQ == 2 && FI_XPU_CAP_CNTR == 4);
STATIC_ASSERT(sizeof(struct fid_xpu) == 16);
STATIC_ASSERT(offsetof(struct fid_xpu, prov_id) == 4);
STATIC_ASSERT(offsetof(struct fid_xpu, prov_ctx) == 8);
STATIC_ASSERT(sizeof(struct fid_xpu_ep) == 16 && sizeof(struct fid_xpu_cq) == 16);
STATIC_ASSERT(sizeof(struct fid_xpu_cntr) == 16);
/* fi_xpu's own provider ids stay out of the range libfabric assigns. */
STATIC_ASSERT(FI_XPU_PROV_SHM > 0xffff && FI_XPU_PROV_OFI > 0xffff);
STATIC_ASSERT(FI_XPU_PROV_USER_BASE > FI_XPU_PROV_OFI);
/* Upstream's own types are upstream's, fi_xpu's differ by name. */
STATIC_ASSERT(sizeof(struct fi_xpu_ctx_attr) == 8 + 2 * sizeof(size_t));
STATIC_ASSERT(sizeof(struct fi_xpu_ops) == 4 * sizeof(void *));
STATIC_ASSERT(sizeof(struct fi_xpu_mem_ops) != sizeof(struct fi_xpu_ops));

int main(void)
{
	/* Each name has its own library's signature. */
	int (*up_ctx)(struct fid_domain *, struct fi_xpu_attr *,
		      struct fid_xpu_ctx **, void *) = fi_xpu_ctx;
	int (*up_query)(struct fid_xpu_ctx *, struct fi_xpu_ctx_attr *) =
		fi_xpu_ctx_query;
	int (*open)(struct fid_xpu_domain *, const struct fi_xpu_ctx_open_attr *,
		    struct fid_xpu_host_ctx **, void *) = fi_xpu_ctx_open;
	int (*getinfo)(struct fid_xpu_host_ctx *, struct fi_xpu_ctx_info *) =
		fi_xpu_ctx_getinfo;
	/* A device handle is the one type both libraries use. */
	int (*dev_send)(struct fid_xpu_ep *, const void *, size_t, void *,
			uint64_t, void *, void *, uint64_t, int) = fi_xpu_send;
	struct fid_xpu_ep handle;
	struct fi_xpu_info *info = NULL;
	struct fid_xpu_domain *dom = NULL;
	struct fid_xpu_host_ctx *ctx = NULL;
	struct fi_xpu_ctx_open_attr attr;
	struct fi_xpu_ctx_info ci;
	int ret;

	(void)up_query;
	(void)dev_send;
	if (up_ctx(NULL, NULL, NULL, NULL) != -FI_ENOSYS)
		return 10;
	ret = fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info);
	if (ret || !info) {
		fprintf(stderr, "fi_xpu_getinfo: %d\n", ret);
		return 1;
	}
	if ((ret = fi_xpu_domain(info, NULL, &dom, NULL))) {
		fprintf(stderr, "fi_xpu_domain: %d\n", ret);
		return 2;
	}
	attr.iface = FI_HMEM_SYSTEM;
	attr.device = 0;
	attr.ops = NULL;
	if ((ret = open(dom, &attr, &ctx, NULL))) {
		fprintf(stderr, "fi_xpu_ctx_open: %d\n", ret);
		return 3;
	}
	if ((ret = getinfo(ctx, &ci))) {
		fprintf(stderr, "fi_xpu_ctx_getinfo: %d\n", ret);
		return 4;
	}
	if (!(ci.caps & FI_XPU_CAP_EP))
		return 5;
	handle.fid.fclass = FI_CLASS_EP;
	handle.fid.prov_id = FI_XPU_PROV_EFA;
	handle.fid.prov_ctx = 0;
	/* fi_xpu's device code does not claim upstream's provider's handles. */
	if (fi_xpu_send(&handle, NULL, 0, NULL, 0, NULL, NULL, 0, FI_XPU_WORK_ITEM) !=
	    -FI_ENOSYS)
		return 6;
	if (fi_xpu_close(&ctx->fid) || fi_xpu_close(&dom->fid))
		return 7;
	fi_xpu_freeinfo(info);
	printf("coexist: ok\n");
	return 0;
}
