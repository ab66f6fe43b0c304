/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Host side of the work-request API: libfabric's description of a work
 * request (struct fi_wr_attr of the RFC ofiwg/libfabric#12695, and the
 * fi_op_* operation descriptors of <rdma/fi_trigger.h> it points to), which
 * fi_xpu_prepare_wr() and fi_control(&ep->fid, FI_PREPARE_WORK, attr) turn
 * into a prepared request (fi_xpu/wr.h) for the device. Included by
 * <fi_xpu.h>; host code only.
 *
 * With libfabric's headers (fi_xpu/handles.h), <rdma/fi_trigger.h> supplies
 * the operation descriptors; otherwise ABI-identical stand-ins below do,
 * each behind the include guard of the libfabric header that defines it.
 * struct fi_wr_attr, FI_WR and FI_PREPARE_WORK are defined here until
 * libfabric's headers have them (they come with FI_WR). The fi_op_*
 * descriptors' `ep` is the fi_xpu endpoint (struct fid_xpu_host_ep *,
 * converted to struct fid_ep *), and each `desc` entry a registration
 * (struct fid_xpu_mr *) or NULL.
 */
#ifndef FI_XPU_INCLUDED_WR_ATTR_H
#define FI_XPU_INCLUDED_WR_ATTR_H

#include <fi_xpu/handles.h>

#if !defined(__CUDACC_RTC__) /* host code: NVRTC compiles device code only */

#ifdef FI_XPU_HAVE_LIBFABRIC_HEADERS
#include <rdma/fi_trigger.h>
#else
#include <sys/uio.h>

struct fid_ep;

#ifndef FI_ENDPOINT_H /* <rdma/fi_endpoint.h> */
struct fi_msg {
	const struct iovec *msg_iov;
	void **desc;
	size_t iov_count;
	fi_addr_t addr;
	void *context;
	uint64_t data;
};
#endif

#ifndef FI_RMA_H /* <rdma/fi_rma.h> */
struct fi_rma_iov {
	uint64_t addr;
	size_t len;
	uint64_t key;
};

struct fi_rma_ioc {
	uint64_t addr;
	size_t count;
	uint64_t key;
};

struct fi_msg_rma {
	const struct iovec *msg_iov;
	void **desc;
	size_t iov_count;
	fi_addr_t addr;
	const struct fi_rma_iov *rma_iov;
	size_t rma_iov_count;
	void *context;
	uint64_t data;
};
#endif

#ifndef FI_TAGGED_H /* <rdma/fi_tagged.h> */
struct fi_msg_tagged {
	const struct iovec *msg_iov;
	void **desc;
	size_t iov_count;
	fi_addr_t addr;
	uint64_t tag;
	uint64_t ignore;
	void *context;
	uint64_t data;
};
#endif

#ifndef FI_ATOMIC_H /* <rdma/fi_atomic.h> */
struct fi_ioc {
	void *addr;
	size_t count;
};

struct fi_msg_atomic {
	const struct fi_ioc *msg_iov;
	void **desc;
	size_t iov_count;
	fi_addr_t addr;
	const struct fi_rma_ioc *rma_iov;
	size_t rma_iov_count;
	enum fi_datatype datatype;
	enum fi_op op;
	void *context;
	uint64_t data;
};

struct fi_msg_fetch {
	struct fi_ioc *msg_iov;
	void **desc;
	size_t iov_count;
};

struct fi_msg_compare {
	const struct fi_ioc *msg_iov;
	void **desc;
	size_t iov_count;
};
#endif

#ifndef FI_TRIGGER_H /* <rdma/fi_trigger.h> */
enum fi_op_type {
	FI_OP_RECV,
	FI_OP_SEND,
	FI_OP_TRECV,
	FI_OP_TSEND,
	FI_OP_READ,
	FI_OP_WRITE,
	FI_OP_ATOMIC,
	FI_OP_FETCH_ATOMIC,
	FI_OP_COMPARE_ATOMIC,
	FI_OP_CNTR_SET,
	FI_OP_CNTR_ADD
};

struct fi_op_msg {
	struct fid_ep *ep;
	struct fi_msg msg;
	uint64_t flags;
};

struct fi_op_tagged {
	struct fid_ep *ep;
	struct fi_msg_tagged msg;
	uint64_t flags;
};

struct fi_op_rma {
	struct fid_ep *ep;
	struct fi_msg_rma msg;
	uint64_t flags;
};

struct fi_op_atomic {
	struct fid_ep *ep;
	struct fi_msg_atomic msg;
	uint64_t flags;
};

struct fi_op_fetch_atomic {
	struct fid_ep *ep;
	struct fi_msg_atomic msg;
	struct fi_msg_fetch fetch;
	uint64_t flags;
};

struct fi_op_compare_atomic {
	struct fid_ep *ep;
	struct fi_msg_atomic msg;
	struct fi_msg_fetch fetch;
	struct fi_msg_compare compare;
	uint64_t flags;
};
#endif

#ifndef FABRIC_H /* the fi_control commands of <rdma/fabric.h> it uses */
#define FI_QUEUE_WORK 11
#define FI_FLUSH_WORK 13
#endif
#endif /* !FI_XPU_HAVE_LIBFABRIC_HEADERS */

#ifndef FI_MORE
#define FI_MORE (1ULL << 18)
#endif

#ifndef FI_WR /* libfabric without the work-request API */
#define FI_WR (1ULL << 39)
#define FI_PREPARE_WORK 22

struct fi_wr_attr {
	enum fi_op_type op_type;
	union {
		struct fi_op_msg *msg;
		struct fi_op_tagged *tagged;
		struct fi_op_rma *rma;
		struct fi_op_atomic *atomic;
		struct fi_op_fetch_atomic *fetch_atomic;
		struct fi_op_compare_atomic *compare_atomic;
	} op;
	void *wr_buf;
	size_t wr_len;
};
#endif /* !FI_WR */

#endif /* !__CUDACC_RTC__ */

#endif /* FI_XPU_INCLUDED_WR_ATTR_H */
