/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A kernel written only from libfabric's documented device API: its header
 * name, its prototypes (int datatype and op, a counter wait that returns
 * nothing), its scope values. Built with fi_xpu's device flags (the
 * compatibility directory first), it must compile unchanged as C, C++,
 * CUDA, HIP and SYCL device code with warnings as errors. Each function is
 * also bound to a pointer of upstream's exact type, so a prototype that
 * drifts is a compile error.
 */
#include <rdma/fi_xpu_device.h>

#if defined(__HIP__) || defined(__HIPCC__)
/* A work-group size bound, as HIP kernels declare with __launch_bounds__:
 * without one, clang assumes 1024 work items and, for gfx942, asks for an
 * occupancy that a kernel calling every CQ and counter operation at once
 * does not meet (-Wpass-failed). */
#define UPSTREAM_KERNEL extern "C" __attribute__((global, amdgpu_flat_work_group_size(1, 256)))
#elif defined(__CUDACC__) || defined(__CUDA__)
#define UPSTREAM_KERNEL extern "C" __attribute__((global))
#elif defined(__SYCL_DEVICE_ONLY__) && defined(SYCL_EXTERNAL)
#define UPSTREAM_KERNEL extern "C" SYCL_EXTERNAL
#elif defined(__cplusplus)
#define UPSTREAM_KERNEL extern "C"
#else
#define UPSTREAM_KERNEL
#endif

typedef int write_fn(struct fid_xpu_ep *, const void *, size_t, void *, uint64_t, void *,
		     uint64_t, uint64_t, void *, uint64_t, int);
typedef int read_fn(struct fid_xpu_ep *, void *, size_t, void *, void *, uint64_t, uint64_t,
		    void *, uint64_t, int);
typedef int send_fn(struct fid_xpu_ep *, const void *, size_t, void *, uint64_t, void *,
		    void *, uint64_t, int);
typedef int recv_fn(struct fid_xpu_ep *, void *, size_t, void *, void *, void *, uint64_t,
		    int);
typedef int tsend_fn(struct fid_xpu_ep *, const void *, size_t, void *, uint64_t, void *,
		     uint64_t, void *, uint64_t, int);
typedef int trecv_fn(struct fid_xpu_ep *, void *, size_t, void *, void *, uint64_t, uint64_t,
		     void *, uint64_t, int);
typedef int atomic_fn(struct fid_xpu_ep *, const void *, size_t, void *, void *, uint64_t,
		      uint64_t, int, int, void *, uint64_t, int);
typedef int fetch_atomic_fn(struct fid_xpu_ep *, const void *, size_t, void *, void *, void *,
			    void *, uint64_t, uint64_t, int, int, void *, uint64_t, int);
typedef int compare_atomic_fn(struct fid_xpu_ep *, const void *, size_t, void *, const void *,
			      void *, void *, void *, void *, uint64_t, uint64_t, int, int,
			      void *, uint64_t, int);
typedef uint64_t cntr_read_fn(struct fid_xpu_cntr *, int);
typedef void cntr_wait_fn(struct fid_xpu_cntr *, uint64_t, int, int);
typedef int cntr_update_fn(struct fid_xpu_cntr *, uint64_t, int);
typedef int64_t cq_read_fn(struct fid_xpu_cq *, void *, size_t, int);
typedef int64_t cq_readfrom_fn(struct fid_xpu_cq *, void *, size_t, void *, int);
typedef int64_t cq_readerr_fn(struct fid_xpu_cq *, void *, uint64_t, int);
typedef int64_t cq_sread_fn(struct fid_xpu_cq *, void *, size_t, uint64_t, int);
typedef int64_t cq_sreadfrom_fn(struct fid_xpu_cq *, void *, size_t, void *, uint64_t, int);

struct upstream_args {
	struct fid_xpu_ep *ep;
	struct fid_xpu_cq *cq;
	struct fid_xpu_cntr *cntr;
	void *peer;
	void *desc;
	uint64_t *buf;
	uint64_t remote;
	uint64_t key;
	int datatype;
	int op;
	int64_t status;
};

#if defined(__CUDACC__) || defined(__CUDA__) || defined(__HIP__) || defined(__HIPCC__)
#define UPSTREAM_DEVICE static inline __attribute__((device))
#else
#define UPSTREAM_DEVICE static inline
#endif

/* Takes every function at upstream's exact type, so a prototype that
 * drifts does not convert: an error in C++, a warning made an error in C.
 * (Parameters rather than local pointers: nvcc's front end reports a local
 * that is only set as unused.) */
UPSTREAM_DEVICE void upstream_prototypes(write_fn *w, read_fn *r, send_fn *s, recv_fn *rv,
					 tsend_fn *ts, trecv_fn *tr, atomic_fn *at,
					 fetch_atomic_fn *fa, compare_atomic_fn *ca,
					 cntr_read_fn *cr, cntr_read_fn *cre, cntr_wait_fn *cw,
					 cntr_update_fn *cu0, cntr_update_fn *cu1,
					 cntr_update_fn *cu2, cntr_update_fn *cu3, cq_read_fn *qr,
					 cq_readfrom_fn *qf, cq_readerr_fn *qe, cq_sread_fn *qs,
					 cq_sreadfrom_fn *qsf)
{
	(void)w, (void)r, (void)s, (void)rv, (void)ts, (void)tr, (void)at, (void)fa, (void)ca;
	(void)cr, (void)cre, (void)cw, (void)cu0, (void)cu1, (void)cu2, (void)cu3;
	(void)qr, (void)qf, (void)qe, (void)qs, (void)qsf;
}

UPSTREAM_KERNEL void upstream_kernel(struct upstream_args *a)
{
	uint64_t *b = a->buf;
	int64_t st = 0;

	/* The prototypes are checked; the calls below are direct. */
	upstream_prototypes(fi_xpu_write, fi_xpu_read, fi_xpu_send, fi_xpu_recv, fi_xpu_tsend,
			    fi_xpu_trecv, fi_xpu_atomic, fi_xpu_fetch_atomic, fi_xpu_compare_atomic,
			    fi_xpu_cntr_read, fi_xpu_cntr_readerr, fi_xpu_cntr_wait,
			    fi_xpu_cntr_add, fi_xpu_cntr_set, fi_xpu_cntr_adderr,
			    fi_xpu_cntr_seterr, fi_xpu_cq_read, fi_xpu_cq_readfrom,
			    fi_xpu_cq_readerr, fi_xpu_cq_sread, fi_xpu_cq_sreadfrom);
	st |= fi_xpu_write(a->ep, b, 8, a->desc, 0, a->peer, a->remote, a->key, b, 0,
			   FI_XPU_WORK_ITEM);
	st |= fi_xpu_read(a->ep, b + 1, 8, a->desc, a->peer, a->remote, a->key, b, 0,
			  FI_XPU_SUBGROUP);
	st |= fi_xpu_send(a->ep, b, 8, a->desc, 0, a->peer, b, 0, FI_XPU_WORK_GROUP);
	st |= fi_xpu_recv(a->ep, b + 2, 8, a->desc, a->peer, b, 0, FI_XPU_WORK_ITEM);
	st |= fi_xpu_tsend(a->ep, b, 8, a->desc, 0, a->peer, 7, b, 0, FI_XPU_WORK_ITEM);
	st |= fi_xpu_trecv(a->ep, b + 3, 8, a->desc, a->peer, 7, 0, b, 0, FI_XPU_WORK_ITEM);
	/* datatype and op are plain ints, as upstream declares them. */
	st |= fi_xpu_atomic(a->ep, b, 1, a->desc, a->peer, a->remote, a->key, a->datatype, a->op,
			    b, 0, FI_XPU_WORK_ITEM);
	st |= fi_xpu_fetch_atomic(a->ep, b, 1, a->desc, b + 4, a->desc, a->peer, a->remote,
				  a->key, a->datatype, a->op, b, 0, FI_XPU_WORK_ITEM);
	st |= fi_xpu_compare_atomic(a->ep, b, 1, a->desc, b + 5, a->desc, b + 6, a->desc, a->peer,
				    a->remote, a->key, a->datatype, FI_CSWAP, b, 0,
				    FI_XPU_WORK_ITEM);
	st |= fi_xpu_atomic(a->ep, b, 1, a->desc, a->peer, a->remote, a->key, FI_UINT64, FI_SUM,
			    b, 0, FI_XPU_DEVICE);
	a->status = st;
}

/* Counters and completion queues, as a second kernel. */
UPSTREAM_KERNEL void upstream_kernel_completions(struct upstream_args *a)
{
	uint64_t *b = a->buf;
	int64_t st = 0;

	fi_xpu_cntr_wait(a->cntr, fi_xpu_cntr_read(a->cntr, FI_XPU_WORK_ITEM) + 1, 100,
			 FI_XPU_WORK_ITEM);
	st |= (int64_t)fi_xpu_cntr_readerr(a->cntr, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cntr_add(a->cntr, 1, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cntr_set(a->cntr, 1, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cntr_adderr(a->cntr, 1, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cntr_seterr(a->cntr, 1, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cq_read(a->cq, b, 1, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cq_readfrom(a->cq, b, 1, b + 7, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cq_readerr(a->cq, b, 0, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cq_sread(a->cq, b, 1, 1, FI_XPU_WORK_ITEM);
	st |= fi_xpu_cq_sreadfrom(a->cq, b, 1, b + 7, 1, FI_XPU_WORK_ITEM);
	a->status = st;
}
