/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The definitions fi_xpu shares with libfabric, for host and device code
 * alike: the few libfabric types and values the fi_xpu headers use (error
 * numbers, operation flags, object classes, datatypes and atomic ops, CQ
 * formats and entries) and what libfabric's own <rdma/fi_xpu.h> defines
 * (scope values, the memory-callback and capability flags, enum
 * fi_xpu_provider and the device handle types a kernel receives). All are
 * ABI-identical to libfabric's, so a handle exported by either library has
 * the same layout.
 *
 * Where they come from:
 *   - host code (plain C/C++, and the host pass of a CUDA or HIP
 *     translation unit) with libfabric's headers installed: libfabric's
 *     <rdma/fabric.h>, <rdma/fi_domain.h>, <rdma/fi_eq.h>, <rdma/fi_errno.h>
 *     and, from libfabric 2.7, <rdma/fi_xpu.h>; a translation unit may then
 *     include libfabric's headers and fi_xpu's in either order;
 *   - device passes (nvcc, hipcc, clang CUDA/HIP device compilation, SYCL
 *     device mode, NVRTC), host code without libfabric's headers, or with
 *     FI_XPU_NO_LIBFABRIC_HEADERS defined: the definitions below. No host
 *     header is included then (only the compiler's <stddef.h> and
 *     <stdint.h>, see fi_xpu/freestanding.h). Each group stands behind the
 *     include guard of the libfabric header that defines it, so libfabric's
 *     headers included before this one take precedence; in a device pass
 *     include them before the fi_xpu headers, not after.
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

/* A device pass: code generated for an accelerator, where no host header
 * may be included. */
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) ||                 \
	(defined(__HIP__) && defined(__AMDGCN__)) || defined(__SYCL_DEVICE_ONLY__) || \
	defined(__CUDACC_RTC__)
#define FI_XPU_I_DEVICE_PASS 1
#endif

#if !defined(FI_XPU_I_DEVICE_PASS) && !defined(FI_XPU_NO_LIBFABRIC_HEADERS) &&  \
	defined(__has_include)
#if __has_include(<rdma/fi_domain.h>)
#define FI_XPU_HAVE_LIBFABRIC_HEADERS 1
#endif
#endif

#ifdef FI_XPU_HAVE_LIBFABRIC_HEADERS
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#endif

#ifndef FABRIC_H /* <rdma/fabric.h> */
typedef uint64_t fi_addr_t;
#define FI_ADDR_UNSPEC ((uint64_t)-1)
#define FI_ADDR_NOTAVAIL ((uint64_t)-1)
#define FI_KEY_NOTAVAIL ((uint64_t)-1)

#define FI_MSG (1ULL << 1)
#define FI_RMA (1ULL << 2)
#define FI_TAGGED (1ULL << 3)
#define FI_ATOMIC (1ULL << 4)
#define FI_READ (1ULL << 8)
#define FI_WRITE (1ULL << 9)
#define FI_RECV (1ULL << 10)
#define FI_SEND (1ULL << 11)
#define FI_TRANSMIT FI_SEND
#define FI_REMOTE_READ (1ULL << 12)
#define FI_REMOTE_WRITE (1ULL << 13)
#define FI_MULTI_RECV (1ULL << 16)
#define FI_REMOTE_CQ_DATA (1ULL << 17)
#define FI_MORE (1ULL << 18)
#define FI_COMPLETION (1ULL << 24)
#define FI_INJECT (1ULL << 25)
#define FI_DELIVERY_COMPLETE (1ULL << 28)
#define FI_HMEM (1ULL << 47)

enum {
	FI_CLASS_UNSPEC,
	FI_CLASS_FABRIC,
	FI_CLASS_DOMAIN,
	FI_CLASS_EP,
	FI_CLASS_SEP,
	FI_CLASS_RX_CTX,
	FI_CLASS_SRX_CTX,
	FI_CLASS_TX_CTX,
	FI_CLASS_STX_CTX,
	FI_CLASS_PEP,
	FI_CLASS_INTERFACE,
	FI_CLASS_AV,
	FI_CLASS_MR,
	FI_CLASS_EQ,
	FI_CLASS_CQ,
	FI_CLASS_CNTR
};

struct fid;
struct fi_ops {
	size_t size;
	int (*close)(struct fid *fid);
	int (*bind)(struct fid *fid, struct fid *bfid, uint64_t flags);
	int (*control)(struct fid *fid, int command, void *arg);
	int (*ops_open)(struct fid *fid, const char *name, uint64_t flags,
			void **ops, void *context);
	int (*tostr)(const struct fid *fid, char *buf, size_t len);
	int (*ops_set)(struct fid *fid, const char *name, uint64_t flags,
		       void *ops, void *context);
};

struct fid {
	size_t fclass;
	void *context;
	struct fi_ops *ops;
};

#if !defined(__CUDACC_RTC__) /* host code: NVRTC compiles device code only */
static inline int fi_close(struct fid *fid)
{
	return fid->ops->close(fid);
}
#endif
#endif /* !FABRIC_H */

#ifndef FI_ERRNO_H /* <rdma/fi_errno.h> */
/* Error numbers: the errno values libfabric uses, and its own above 256. */
#define FI_SUCCESS 0
#define FI_EPERM 1
#define FI_ENOENT 2
#define FI_EINTR 4
#define FI_EIO 5
#define FI_E2BIG 7
#define FI_EBADF 9
#define FI_EAGAIN 11
#define FI_ENOMEM 12
#define FI_EACCES 13
#define FI_EFAULT 14
#define FI_EBUSY 16
#define FI_ENODEV 19
#define FI_EINVAL 22
#define FI_EMFILE 24
#define FI_ENOSPC 28
#define FI_ENOSYS 38
#define FI_EWOULDBLOCK FI_EAGAIN
#define FI_ENOMSG 42
#define FI_ENODATA 61
#define FI_EOVERFLOW 75
#define FI_EMSGSIZE 90
#define FI_ENOPROTOOPT 92
#define FI_EOPNOTSUPP 95
#define FI_EADDRINUSE 98
#define FI_EADDRNOTAVAIL 99
#define FI_ENETDOWN 100
#define FI_ENETUNREACH 101
#define FI_ECONNABORTED 103
#define FI_ECONNRESET 104
#define FI_ENOBUFS 105
#define FI_EISCONN 106
#define FI_ENOTCONN 107
#define FI_ESHUTDOWN 108
#define FI_ETIMEDOUT 110
#define FI_ECONNREFUSED 111
#define FI_EHOSTDOWN 112
#define FI_EHOSTUNREACH 113
#define FI_EALREADY 114
#define FI_EINPROGRESS 115
#define FI_EREMOTEIO 121
#define FI_ECANCELED 125
#define FI_EKEYREJECTED 129
#define FI_ERRNO_OFFSET 256
#define FI_EOTHER 256
#define FI_ETOOSMALL 257
#define FI_EOPBADSTATE 258
#define FI_EAVAIL 259
#define FI_EBADFLAGS 260
#define FI_ENOEQ 261
#define FI_EDOMAIN 262
#define FI_ENOCQ 263
#define FI_ECRC 264
#define FI_ETRUNC 265
#define FI_ENOKEY 266
#define FI_ENOAV 267
#define FI_EOVERRUN 268
#define FI_ENORX 269
#endif /* !FI_ERRNO_H */

#ifndef FI_DOMAIN_H /* <rdma/fi_domain.h> */
enum fi_hmem_iface {
	FI_HMEM_SYSTEM = 0,
	FI_HMEM_CUDA,
	FI_HMEM_ROCR,
	FI_HMEM_ZE,
	FI_HMEM_NEURON,
	FI_HMEM_SYNAPSEAI
};

enum fi_datatype {
	FI_INT8,
	FI_UINT8,
	FI_INT16,
	FI_UINT16,
	FI_INT32,
	FI_UINT32,
	FI_INT64,
	FI_UINT64,
	FI_FLOAT,
	FI_DOUBLE,
	FI_FLOAT_COMPLEX,
	FI_DOUBLE_COMPLEX,
	FI_LONG_DOUBLE,
	FI_LONG_DOUBLE_COMPLEX,
	FI_DATATYPE_LAST
};

enum fi_op {
	FI_MIN,
	FI_MAX,
	FI_SUM,
	FI_PROD,
	FI_LOR,
	FI_LAND,
	FI_BOR,
	FI_BAND,
	FI_LXOR,
	FI_BXOR,
	FI_ATOMIC_READ,
	FI_ATOMIC_WRITE,
	FI_CSWAP,
	FI_CSWAP_NE,
	FI_CSWAP_LE,
	FI_CSWAP_LT,
	FI_CSWAP_GE,
	FI_CSWAP_GT,
	FI_MSWAP,
	FI_ATOMIC_OP_LAST
};
#endif /* !FI_DOMAIN_H */

#ifndef FI_EQ_H /* <rdma/fi_eq.h> */
enum fi_cq_format {
	FI_CQ_FORMAT_UNSPEC,
	FI_CQ_FORMAT_CONTEXT,
	FI_CQ_FORMAT_MSG,
	FI_CQ_FORMAT_DATA,
	FI_CQ_FORMAT_TAGGED
};

struct fi_cq_entry {
	void *op_context;
};

struct fi_cq_msg_entry {
	void *op_context;
	uint64_t flags;
	size_t len;
};

struct fi_cq_data_entry {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
};

struct fi_cq_tagged_entry {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	uint64_t tag;
};

struct fi_cq_err_entry {
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	uint64_t tag;
	size_t olen;
	int err;
	int prov_errno;
	void *err_data;
	size_t err_data_size;
};
#endif /* !FI_EQ_H */

/* libfabric 2.x's capability and flag bit; older libfabric lacks it. */
#ifndef FI_XPU
#define FI_XPU (1ULL << 44)
#endif

/* ---- shared with libfabric's <rdma/fi_xpu.h> ---------------------------- */

#if defined(FI_XPU_HAVE_LIBFABRIC_HEADERS) && !defined(FI_XPU_H)
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

/* fi_xpu's own version macro, in the style of FI_VERSION. */
#define FI_XPU_VERSION(major, minor) (((major) << 16) | (minor))

#endif /* FI_XPU_INCLUDED_HANDLES_H */
