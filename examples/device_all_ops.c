/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A kernel that calls every operation of the fi_xpu device API once, at the
 * scope it is given. It builds unchanged as CUDA (nvcc, clang -x cuda), HIP
 * (hipcc, clang -x hip), SYCL device code, and plain C or C++ for the host
 * XPU, where fi_xpu_host_launch() runs it on CPU threads.
 *
 * Handles, addresses and descriptors come from the host: fi_xpu_export(),
 * fi_xpu_av_lookup() and fi_xpu_mr_desc(). The kernel stops at the first
 * error and leaves its code in args->status.
 */
#include <fi_xpu/device.h>

#if defined(__CUDACC__) || defined(__CUDA__) || defined(__HIP__) || defined(__HIPCC__)
#define EXAMPLE_KERNEL extern "C" __attribute__((global))
#elif defined(__SYCL_DEVICE_ONLY__) && defined(SYCL_EXTERNAL)
/* Called from a sycl::queue::parallel_for lambda in another translation unit. */
#define EXAMPLE_KERNEL extern "C" SYCL_EXTERNAL
#elif defined(__cplusplus)
#define EXAMPLE_KERNEL extern "C"
#else
#define EXAMPLE_KERNEL
#endif

struct device_all_ops_args {
	struct fid_xpu_ep *ep;
	struct fid_xpu_cq *cq;
	struct fid_xpu_cntr *cntr;
	void *peer;          /* raw AV address of the peer */
	void *desc;          /* raw descriptor of the local buffer */
	uint64_t *buf;       /* local buffer, 8 words */
	uint64_t remote;     /* target address and key at the peer */
	uint64_t key;
	void *wr;            /* a request fi_xpu_prepare_wr prepared, or NULL */
	int scope;
	int status;          /* 0, or the first error */
	uint64_t completions;
};

#define STEP(call)                                                            \
	do {                                                                  \
		int64_t ret_ = (int64_t)(call);                               \
		if (ret_ < 0 && ret_ != -FI_EAGAIN) {                         \
			a->status = (int)ret_;                                \
			return;                                               \
		}                                                             \
	} while (0)

static inline FI_XPU_ARCH_QUALIFIER void device_all_ops_body(struct device_all_ops_args *a)
{
	uint64_t *b = a->buf;
	struct fi_cq_entry entries[4];
	struct fi_cq_err_entry err;
	fi_addr_t from[4];
	int s = a->scope;

	STEP(fi_xpu_write(a->ep, b, 8, a->desc, 0, a->peer, a->remote, a->key, b, 0, s));
	STEP(fi_xpu_read(a->ep, b + 1, 8, a->desc, a->peer, a->remote, a->key, b, 0, s));
	STEP(fi_xpu_send(a->ep, b, 8, a->desc, 0, a->peer, b, 0, s));
	STEP(fi_xpu_recv(a->ep, b + 2, 8, a->desc, a->peer, b, 0, s));
	STEP(fi_xpu_tsend(a->ep, b, 8, a->desc, 0, a->peer, 42, b, 0, s));
	STEP(fi_xpu_trecv(a->ep, b + 3, 8, a->desc, a->peer, 42, 0, b, 0, s));
	STEP(fi_xpu_atomic(a->ep, b, 1, a->desc, a->peer, a->remote, a->key, FI_UINT64, FI_SUM,
			   b, 0, s));
	STEP(fi_xpu_fetch_atomic(a->ep, b, 1, a->desc, b + 4, a->desc, a->peer, a->remote, a->key,
				 FI_UINT64, FI_SUM, b, 0, s));
	STEP(fi_xpu_compare_atomic(a->ep, b, 1, a->desc, b + 5, a->desc, b + 6, a->desc, a->peer,
				   a->remote, a->key, FI_UINT64, FI_CSWAP, b, 0, s));
	if (a->wr) {
		STEP(fi_xpu_wr_set_buf(a->wr, b + 7, 8));
		STEP(fi_xpu_wr_set_remote(a->wr, a->remote + 8));
		STEP(fi_xpu_queue_wr(a->ep, a->wr, FI_XPU_WR_SIZE, s));
	}
	STEP(fi_xpu_flush_wr(a->ep, s));
	STEP(fi_xpu_flush(a->ep, 0, s));
	/* The ordered-signalling extensions: data then a signal word (here the
	 * target's first word), a fence, a quiet, a wait on a local word, and
	 * a direct store where the provider maps the peer (shm). */
	STEP(fi_xpu_put_signal(a->ep, b, 8, a->desc, a->peer, a->remote, a->key, a->remote, a->key,
			       1, FI_XPU_SIGNAL_ADD, b, 0, s));
	/* The cooperative forms: one operation for the scope group, and one
	 * transfer split across the launch's work groups, each group its
	 * share (one completion and one signal add per share). */
	STEP(fi_xpu_coop_write(a->ep, b, 16, a->desc, 0, a->peer, a->remote, a->key, b, 0, s));
	STEP(fi_xpu_coop_put_signal(a->ep, b, 8, a->desc, a->peer, a->remote, a->key, a->remote,
				    a->key, 1, FI_XPU_SIGNAL_ADD, b, 0, s));
	STEP(fi_xpu_coop_write_part(a->ep, b, 64, a->desc, 0, a->peer, a->remote, a->key, b, 0,
				    fi_xpu_arch_group_id(), fi_xpu_arch_num_groups(), s));
	STEP(fi_xpu_coop_put_signal_part(a->ep, b, 64, a->desc, a->peer, a->remote, a->key,
					 a->remote, a->key, 1, FI_XPU_SIGNAL_ADD, b, 0,
					 fi_xpu_arch_group_id(), fi_xpu_arch_num_groups(), s));
	STEP(fi_xpu_fence(a->ep, 0, s));
	STEP(fi_xpu_quiet(a->ep, 0, s));
	STEP(fi_xpu_signal_wait_until(a->ep, b + 7, FI_XPU_CMP_GE, 0, 100, s));
	{
		uint64_t *p = (uint64_t *)fi_xpu_peer_ptr(a->ep, a->peer, a->remote, a->key, 8);
		if (p)
			p[0] = b[0];
	}
	STEP(fi_xpu_cntr_add(a->cntr, 1, s));
	STEP(fi_xpu_cntr_set(a->cntr, 0, s));
	STEP(fi_xpu_cntr_adderr(a->cntr, 0, s));
	STEP(fi_xpu_cntr_seterr(a->cntr, 0, s));
	STEP(fi_xpu_cntr_wait_status(a->cntr, 0, 100, s));
	a->completions = fi_xpu_cntr_read(a->cntr, s) + fi_xpu_cntr_readerr(a->cntr, s);
	STEP(fi_xpu_cq_read(a->cq, entries, 4, s));
	STEP(fi_xpu_cq_readfrom(a->cq, entries, 4, from, s));
	STEP(fi_xpu_cq_readerr(a->cq, &err, 0, s));
	STEP(fi_xpu_cq_sread(a->cq, entries, 4, 1, s));
	STEP(fi_xpu_cq_sreadfrom(a->cq, entries, 4, from, 1, s));
	a->status = 0;
}

EXAMPLE_KERNEL void device_all_ops(struct device_all_ops_args *a)
{
	device_all_ops_body(a);
}

#if defined(FI_XPU_ARCH_HOST)
/* Host XPU entry: the signature fi_xpu_host_launch() expects. */
EXAMPLE_KERNEL void device_all_ops_host(void *arg)
{
	device_all_ops((struct device_all_ops_args *)arg);
}
#endif
