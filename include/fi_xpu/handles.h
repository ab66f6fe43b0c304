/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The definitions fi_xpu shares with libfabric's own <rdma/fi_xpu.h>:
 * scope values, the memory-callback and capability flags, enum
 * fi_xpu_provider and the device handle types a kernel receives. They are
 * ABI-identical to libfabric's, so a handle exported by either library has
 * the same layout.
 *
 * When libfabric's header exists (libfabric 2.7 or newer) it is included
 * and its definitions are used. Otherwise the definitions below stand in,
 * behind libfabric's include guard (FI_XPU_H), so that a translation unit
 * may include libfabric's header and fi_xpu's in either order.
 *
 * Provider ids (fid_xpu.prov_id):
 *   0                      reserved
 *   1 .. 0xffff            libfabric's enum fi_xpu_provider (FI_XPU_PROV_EFA
 *                          = 1, later providers upward); fi_xpu never
 *                          assigns an id here
 *   0x10000 .. 0x1ffff     fi_xpu's in-tree providers (FI_XPU_PROV_SHM,
 *                          FI_XPU_PROV_OFI)
 *   0x20000 and up         out-of-tree providers (FI_XPU_PROV_USER_BASE)
 */
#ifndef FI_XPU_INCLUDED_HANDLES_H
#define FI_XPU_INCLUDED_HANDLES_H

#include <fi_xpu/freestanding.h>

#if !defined(FI_XPU_H) && !defined(FI_XPU_NO_LIBFABRIC_HEADERS) &&          \
	defined(__has_include)
#if __has_include(<rdma/fi_xpu.h>)
#include <rdma/fi_xpu.h>
#endif
#endif

#ifndef FI_XPU_H
/* libfabric's <rdma/fi_xpu.h> is absent: identical definitions. */
enum {
	FI_XPU_WORK_ITEM,
	FI_XPU_SUBGROUP,
	FI_XPU_WORK_GROUP,
	FI_XPU_DEVICE,
};

#define FI_XPU_ALLOC_DMABUF (1ULL << 0)
#define FI_XPU_IMPORT_IOMEMORY (1ULL << 0)
#define FI_XPU_IMPORT_DEVICEMAP (1ULL << 1)

#define FI_XPU_CAP_EP (1ULL << 0)
#define FI_XPU_CAP_CQ (1ULL << 1)
#define FI_XPU_CAP_CNTR (1ULL << 2)

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
#endif /* !FI_XPU_H */

/* fi_xpu's provider ids, outside the range libfabric assigns from. */
#define FI_XPU_PROV_INTREE_BASE 0x10000u
#define FI_XPU_PROV_SHM (FI_XPU_PROV_INTREE_BASE + 1u)
#define FI_XPU_PROV_OFI (FI_XPU_PROV_INTREE_BASE + 2u)
#define FI_XPU_PROV_USER_BASE 0x20000u

#endif /* FI_XPU_INCLUDED_HANDLES_H */
