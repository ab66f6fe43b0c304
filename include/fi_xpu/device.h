/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu device API: the operations a kernel calls on exported endpoints,
 * completion queues and counters. Every function validates its handle and
 * scope, then dispatches on the handle's fid.prov_id to the inline
 * implementation of the provider that exported it. See fi_xpu_device(3).
 *
 * Every function libfabric's <rdma/fi_xpu_device.h> declares has exactly
 * its prototype (int datatype and op; fi_xpu_cntr_wait returns nothing).
 * What fi_xpu adds has its own name: fi_xpu_flush, fi_xpu_cntr_wait_status.
 * A kernel written for libfabric's header builds against this one with the
 * device flags (pkg-config --cflags fi_xpu-device), whose compatibility
 * directory maps <rdma/fi_xpu_device.h> here.
 *
 * Return codes common to all of them: -FI_EINVAL for a NULL handle, a
 * handle of another class (fid.fclass: a CQ passed as an endpoint) or a
 * scope outside FI_XPU_WORK_ITEM..FI_XPU_DEVICE (checked first), -FI_ENOSYS
 * for a prov_id that is not compiled in. Functions returning uint64_t
 * (fi_xpu_cntr_read, fi_xpu_cntr_readerr) return these codes converted to
 * uint64_t (cast the result to int64_t to test them).
 * Then, for every provider alike: -FI_EBADFLAGS for flag bits the
 * operation does not take, -FI_EINVAL for an atomic with no element, a
 * misaligned target or a missing result or compare buffer (see
 * fi_xpu/device_check.h).
 *
 * Choosing providers
 *   FI_XPU_DEVICE_PROVIDERS(P) is an X-macro list, one P(name) per provider
 *   compiled into the dispatch:
 *       #define FI_XPU_DEVICE_PROVIDERS(P) P(shm) P(ofi)
 *   Defined before this header is included (or with -D), it replaces the
 *   default: every in-tree provider whose device header is installed
 *   (detected with __has_include; none when the compiler lacks it). With a
 *   single name the dispatch is one comparison and a direct call, which
 *   compilers inline; an empty list makes every operation -FI_ENOSYS.
 *
 * Adding a provider
 *   A provider `name` supplies a header that includes
 *   <fi_xpu/device_arch.h> (and, if it wants them, the cooperative
 *   helpers of <fi_xpu/device_coop.h>) and defines
 *     #define FI_XPU_DEVICE_ID_<name>  its prov_id (out-of-tree providers:
 *                                      FI_XPU_PROV_USER_BASE or above)
 *   and all of these, each declared FI_XPU_FUNC, with the public
 *   function's arguments (already checked: handle non-NULL, scope in range):
 *   int fi_xpu_write_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope);
 *   int fi_xpu_read_<prov>(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope);
 *   int fi_xpu_send_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, void *context, uint64_t flags, int scope);
 *   int fi_xpu_recv_<prov>(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, void *context, uint64_t flags, int scope);
 *   int fi_xpu_tsend_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t tag, void *context, uint64_t flags, int scope);
 *   int fi_xpu_trecv_<prov>(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t tag, uint64_t ignore, void *context, uint64_t flags, int scope);
 *   int fi_xpu_atomic_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope);
 *   int fi_xpu_fetch_atomic_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope);
 *   int fi_xpu_compare_atomic_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, const void *compare, void *compare_desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope);
 *   int fi_xpu_flush_<prov>(struct fid_xpu_ep *ep, uint64_t flags, int scope);
 *   uint64_t fi_xpu_cntr_read_<prov>(struct fid_xpu_cntr *cntr, int scope);
 *   uint64_t fi_xpu_cntr_readerr_<prov>(struct fid_xpu_cntr *cntr, int scope);
 *   int fi_xpu_cntr_wait_<prov>(struct fid_xpu_cntr *cntr, uint64_t threshold, int timeout_ms, int scope);
 *   int fi_xpu_cntr_add_<prov>(struct fid_xpu_cntr *cntr, uint64_t value, int scope);
 *   int fi_xpu_cntr_set_<prov>(struct fid_xpu_cntr *cntr, uint64_t value, int scope);
 *   int fi_xpu_cntr_adderr_<prov>(struct fid_xpu_cntr *cntr, uint64_t value, int scope);
 *   int fi_xpu_cntr_seterr_<prov>(struct fid_xpu_cntr *cntr, uint64_t value, int scope);
 *   int64_t fi_xpu_cq_read_<prov>(struct fid_xpu_cq *cq, void *buf, size_t count, int scope);
 *   int64_t fi_xpu_cq_readfrom_<prov>(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, int scope);
 *   int64_t fi_xpu_cq_readerr_<prov>(struct fid_xpu_cq *cq, void *buf, uint64_t flags, int scope);
 *   int64_t fi_xpu_cq_sread_<prov>(struct fid_xpu_cq *cq, void *buf, size_t count, uint64_t threshold, int scope);
 *   int64_t fi_xpu_cq_sreadfrom_<prov>(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, uint64_t threshold, int scope);
 *   In-tree providers need no edit to the list: shm (FI_XPU_PROV_SHM,
 *   <fi_xpu/device_shm.h>) and ofi (FI_XPU_PROV_OFI,
 *   <fi_xpu/device_ofi.h>) are included here when selected; their ids
 *   are defined below. An out-of-tree provider's header is either included
 *   by the application before this one, or named by
 *       #define FI_XPU_DEVICE_EXTRA_HEADER <vendor/fi_xpu_device_name.h>
 *   which this header includes; then its name goes into the list.
 *
 *   A provider may also implement the ordered-signalling extensions
 *   (fi_xpu_put_signal, fi_xpu_fence, fi_xpu_quiet, fi_xpu_peer_ptr): it
 *   defines
 *       #define FI_XPU_DEVICE_SIGNAL_<name> ~, 1
 *   and these (arguments already checked as above, flags and signal
 *   operation for a single work item):
 *   int fi_xpu_put_signal_<prov>(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, void *dest_addr, uint64_t addr, uint64_t key, uint64_t sig_addr, uint64_t sig_key, uint64_t signal, int sig_op, void *context, uint64_t flags, int scope);
 *   int fi_xpu_fence_<prov>(struct fid_xpu_ep *ep, uint64_t flags, int scope);
 *   int fi_xpu_quiet_<prov>(struct fid_xpu_ep *ep, uint64_t flags, int scope);
 *   void *fi_xpu_peer_ptr_<prov>(struct fid_xpu_ep *ep, void *dest_addr, uint64_t addr, uint64_t key, size_t len);
 *   Without them those calls return -FI_ENOSYS (fi_xpu_peer_ptr NULL).
 *
 *   A provider may also implement the cooperative single transfers below
 *   (fi_xpu_coop_write, _read, _send, _tsend) itself: it defines
 *       #define FI_XPU_DEVICE_COOP_<name> ~, 1
 *   and fi_xpu_coop_<op>_<name> with the arguments of fi_xpu_<op>_<name>.
 *   Otherwise the group's leader issues the one operation at work-item
 *   scope and every member gets its status.
 *
 * Scopes (upstream's meaning; see <fi_xpu/device_group.h>): the scope
 * names the group of work items that call the operation together; every
 * member issues its own operation with its own arguments, and the group
 * claims its slots with one atomic and rings one doorbell. CQ reads, counter
 * waits and flushes are served by the leader, and every member gets the
 * leader's result. A scope the provider cannot honour returns -FI_EOPNOTSUPP
 * to every caller instead of waiting.
 *
 * Ordered signalling (extensions, not in upstream's API; fi_xpu_device(3),
 * fi_xpu/device_signal.h):
 *   fi_xpu_put_signal   writes `len` bytes, then updates the 64-bit signal
 *                       word at (sig_addr, sig_key) of the same peer
 *                       (FI_XPU_SIGNAL_SET or _ADD `signal`); whoever sees
 *                       the signal sees the data. One completion (FI_RMA |
 *                       FI_WRITE) when both are done.
 *   fi_xpu_fence        earlier writes, atomics and puts of the endpoint are
 *                       placed before later ones to the same peer; does not
 *                       wait.
 *   fi_xpu_quiet        waits until every earlier operation of the
 *                       endpoint is complete.
 *   fi_xpu_signal_wait_until
 *                       waits until a local signal word compares
 *                       (FI_XPU_CMP_*) to a value: 0, -FI_ETIMEDOUT.
 *   fi_xpu_peer_ptr     a load/store pointer to `len` bytes of a peer's
 *                       registration where the provider maps them (shm),
 *                       else NULL.
 *
 * Cooperative single transfers (extensions, not in upstream's API):
 *   fi_xpu_coop_write, fi_xpu_coop_read, fi_xpu_coop_send, fi_xpu_coop_tsend
 * take the arguments of fi_xpu_write, _read, _send and _tsend. Every member
 * of the scope group calls them with the same arguments; ONE operation is
 * performed for the group (NVSHMEM's _block/_warp form), its copy shared by
 * the members where the provider moves the data itself (shm), and every
 * member gets the same status.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_H
#define FI_XPU_INCLUDED_DEVICE_H

#include <fi_xpu/device_arch.h>
#include <fi_xpu/device_coop.h>
#include <fi_xpu/device_group.h>
#include <fi_xpu/device_check.h>
#include <fi_xpu/wr.h>

/* ---- provider selection ------------------------------------------------ */

#ifndef FI_XPU_DEVICE_ID_shm
#define FI_XPU_DEVICE_ID_shm FI_XPU_PROV_SHM
#endif
#ifndef FI_XPU_DEVICE_ID_ofi
#define FI_XPU_DEVICE_ID_ofi FI_XPU_PROV_OFI
#endif

#define FI_XPU_I_DEVICE_DEFAULT_SHM(P)
#define FI_XPU_I_DEVICE_DEFAULT_OFI(P)
#if defined(__has_include)
#if __has_include(<fi_xpu/device_shm.h>)
#undef FI_XPU_I_DEVICE_DEFAULT_SHM
#define FI_XPU_I_DEVICE_DEFAULT_SHM(P) P(shm)
#endif
#if __has_include(<fi_xpu/device_ofi.h>)
#undef FI_XPU_I_DEVICE_DEFAULT_OFI
#define FI_XPU_I_DEVICE_DEFAULT_OFI(P) P(ofi)
#endif
#endif

#ifndef FI_XPU_DEVICE_PROVIDERS
#define FI_XPU_DEVICE_PROVIDERS(P) FI_XPU_I_DEVICE_DEFAULT_SHM(P) FI_XPU_I_DEVICE_DEFAULT_OFI(P)
#endif

/*
 * Membership test usable in #if: FI_XPU_I_DEVICE_IS(FI_XPU_I_DEVICE_X_name) is
 * 1 when FI_XPU_I_DEVICE_X_name is defined as "~, 1" and 0 otherwise, without
 * leaving undefined identifiers behind (so -Wundef stays quiet).
 */
#define FI_XPU_I_DEVICE_SECOND(a, b, ...) b
#define FI_XPU_I_DEVICE_IS(...) FI_XPU_I_DEVICE_SECOND(__VA_ARGS__, 0, ~)
#define FI_XPU_I_DEVICE_SHM_shm ~, 1
#define FI_XPU_I_DEVICE_OFI_ofi ~, 1
#define FI_XPU_I_DEVICE_HAS_SHM(p) | FI_XPU_I_DEVICE_IS(FI_XPU_I_DEVICE_SHM_##p)
#define FI_XPU_I_DEVICE_HAS_OFI(p) | FI_XPU_I_DEVICE_IS(FI_XPU_I_DEVICE_OFI_##p)

#if 0 FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_HAS_SHM)
#include <fi_xpu/device_shm.h>
#endif
#if 0 FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_HAS_OFI)
#include <fi_xpu/device_ofi.h>
#endif
#ifdef FI_XPU_DEVICE_EXTRA_HEADER
#include FI_XPU_DEVICE_EXTRA_HEADER
#endif

/* ---- dispatch ------------------------------------------------------------ */

#define FI_XPU_I_DEVICE_CASE(p)                                                \
	case FI_XPU_DEVICE_ID_##p:                                            \
		return FI_XPU_I_DEVICE_CALL(p);
#define FI_XPU_I_DEVICE_DISPATCH(h, cls, inval, nosys)                         \
	if (!(h) || (h)->fid.fclass != (uint32_t)(cls) ||                     \
	    (unsigned)scope > (unsigned)FI_XPU_DEVICE)                        \
		return inval;                                                 \
	switch ((h)->fid.prov_id) {                                           \
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_CASE)                          \
	default:                                                              \
		return nosys;                                                 \
	}

/* ---- argument checks common to every provider --------------------------- */

/*
 * For a single work item the checks of fi_xpu/device_check.h run here,
 * before the dispatch, so that every provider (out-of-tree ones included)
 * answers alike; in a group each provider applies them per member. Handle,
 * class and scope errors come first (from the dispatch). CQ reads and
 * flushes are served by the group's leader with the group's flags, which
 * every member passes alike, so those flags are checked here at any scope.
 */
#define FI_XPU_I_DEVICE_CHECK_ITEM(h, cls, check)                             \
	do {                                                                  \
		int check_ = (h) && (h)->fid.fclass == (uint32_t)(cls) &&     \
				     scope == FI_XPU_WORK_ITEM                \
				     ? (check)                                \
				     : 0;                                     \
		if (check_)                                                   \
			return check_;                                        \
	} while (0)
#define FI_XPU_I_DEVICE_CHECK_GROUP(h, cls, check)                            \
	do {                                                                  \
		int check_ = (h) && (h)->fid.fclass == (uint32_t)(cls) &&     \
				     (unsigned)scope <= (unsigned)FI_XPU_DEVICE \
				     ? (check)                                \
				     : 0;                                     \
		if (check_)                                                   \
			return check_;                                        \
	} while (0)

/* With few (or no) providers compiled in, some arguments go unused. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif

FI_XPU_FUNC int
fi_xpu_write(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_write_##p(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_read(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_READ_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_read_##p(ep, buf, len, desc, src_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_send(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_send_##p(ep, buf, len, desc, data, dest_addr, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_recv(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_recv_##p(ep, buf, len, desc, src_addr, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_tsend(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t tag, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_tsend_##p(ep, buf, len, desc, data, dest_addr, tag, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_trecv(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t tag, uint64_t ignore, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_trecv_##p(ep, buf, len, desc, src_addr, tag, ignore, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_atomic(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP,
				   fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_ATOMIC_FLAGS, count,
							      addr, (int)datatype, 0));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_atomic_##p(ep, buf, count, desc, dest_addr, addr, key, datatype, op, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_fetch_atomic(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP,
				   fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count,
							      addr, (int)datatype, !result));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_fetch_atomic_##p(ep, buf, count, desc, result, result_desc, dest_addr, addr, key, datatype, op, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_compare_atomic(struct fid_xpu_ep *ep, const void *buf, size_t count, void *desc, const void *compare, void *compare_desc, void *result, void *result_desc, void *dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP,
				   fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count,
							      addr, (int)datatype,
							      !result || !compare));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_compare_atomic_##p(ep, buf, count, desc, compare, compare_desc, result, result_desc, dest_addr, addr, key, datatype, op, context, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_flush(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_FLUSH_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_flush_##p(ep, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(ep, FI_CLASS_EP, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC uint64_t
fi_xpu_cntr_read(struct fid_xpu_cntr *cntr, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_read_##p(cntr, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, (uint64_t)-FI_EINVAL, (uint64_t)-FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC uint64_t
fi_xpu_cntr_readerr(struct fid_xpu_cntr *cntr, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_readerr_##p(cntr, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, (uint64_t)-FI_EINVAL, (uint64_t)-FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

/* Extension: the counter wait that says how it ended (0, -FI_ETIMEDOUT,
 * -FI_EAVAIL, ...); fi_xpu_cntr_wait is the same wait with upstream's void
 * prototype. */
FI_XPU_FUNC int
fi_xpu_cntr_wait_status(struct fid_xpu_cntr *cntr, uint64_t threshold, int timeout_ms, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_wait_##p(cntr, threshold, timeout_ms, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC void
fi_xpu_cntr_wait(struct fid_xpu_cntr *cntr, uint64_t threshold, int timeout, int scope)
{
	(void)fi_xpu_cntr_wait_status(cntr, threshold, timeout, scope);
}

FI_XPU_FUNC int
fi_xpu_cntr_add(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_add_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_cntr_set(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_set_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_cntr_adderr(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_adderr_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_cntr_seterr(struct fid_xpu_cntr *cntr, uint64_t value, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cntr_seterr_##p(cntr, value, scope)
	FI_XPU_I_DEVICE_DISPATCH(cntr, FI_CLASS_CNTR, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_read(struct fid_xpu_cq *cq, void *buf, size_t count, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_read_##p(cq, buf, count, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_readfrom(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_readfrom_##p(cq, buf, count, src_addr, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_readerr(struct fid_xpu_cq *cq, void *buf, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(cq, FI_CLASS_CQ, fi_xpu_device_check_flags(flags, 0));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_readerr_##p(cq, buf, flags, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_sread(struct fid_xpu_cq *cq, void *buf, size_t count, uint64_t threshold, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_sread_##p(cq, buf, count, threshold, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int64_t
fi_xpu_cq_sreadfrom(struct fid_xpu_cq *cq, void *buf, size_t count, void *src_addr, uint64_t threshold, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_cq_sreadfrom_##p(cq, buf, count, src_addr, threshold, scope)
	FI_XPU_I_DEVICE_DISPATCH(cq, FI_CLASS_CQ, -FI_EINVAL, -FI_ENOSYS);
#undef FI_XPU_I_DEVICE_CALL
}

/* ---- cooperative single transfers (extensions) ------------------------- */

/* Expands to its arguments when `c` is 1, to nothing when it is 0. */
#define FI_XPU_I_DEVICE_WHEN(c) FI_XPU_I_DEVICE_WHEN_(c)
#define FI_XPU_I_DEVICE_WHEN_(c) FI_XPU_I_DEVICE_WHEN_##c
#define FI_XPU_I_DEVICE_WHEN_0(...)
#define FI_XPU_I_DEVICE_WHEN_1(...) __VA_ARGS__
/* A case for each provider that implements the cooperative form itself. */
#define FI_XPU_I_DEVICE_COOP_CASE(p)                                           \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_COOP_##p))(      \
		case FI_XPU_DEVICE_ID_##p: return FI_XPU_I_DEVICE_CALL(p);)
/* The others: the leader issues the one operation, the group shares its
 * status. */
#define FI_XPU_I_DEVICE_COOP(h, name, item_call)                               \
	struct fi_xpu_group g;                                                \
	int rc;                                                               \
	if (!(h) || (unsigned)scope > (unsigned)FI_XPU_DEVICE)                \
		return -FI_EINVAL;                                            \
	switch ((h)->fid.prov_id) {                                           \
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_COOP_CASE)                     \
	default:                                                              \
		break;                                                        \
	}                                                                     \
	rc = fi_xpu_group_enter(&g, scope, name);                             \
	if (rc)                                                               \
		return rc;                                                    \
	if (fi_xpu_group_leader(&g))                                          \
		rc = item_call;                                               \
	return (int)fi_xpu_group_share(&g, rc)

FI_XPU_FUNC int
fi_xpu_coop_write(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_write_##p(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_write",
			    fi_xpu_write(ep, buf, len, desc, data, dest_addr, addr, key, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_read(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc, void *src_addr, uint64_t addr, uint64_t key, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_read_##p(ep, buf, len, desc, src_addr, addr, key, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_read",
			    fi_xpu_read(ep, buf, len, desc, src_addr, addr, key, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_send(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_send_##p(ep, buf, len, desc, data, dest_addr, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_send",
			    fi_xpu_send(ep, buf, len, desc, data, dest_addr, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_coop_tsend(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, void *dest_addr, uint64_t tag, void *context, uint64_t flags, int scope)
{
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_coop_tsend_##p(ep, buf, len, desc, data, dest_addr, tag, context, flags, scope)
	FI_XPU_I_DEVICE_COOP(ep, "fi_xpu_coop_tsend",
			    fi_xpu_tsend(ep, buf, len, desc, data, dest_addr, tag, context, flags, FI_XPU_WORK_ITEM));
#undef FI_XPU_I_DEVICE_CALL
}

/* ---- ordered signalling, fence, quiet, direct pointers (extensions) ---- */

/* A case for each provider that implements them: it defines
 * FI_XPU_DEVICE_SIGNAL_<name> as "~, 1" (see "Adding a provider"). */
#define FI_XPU_I_DEVICE_SIGNAL_CASE(p)                                         \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_SIGNAL_##p))(    \
		case FI_XPU_DEVICE_ID_##p: return FI_XPU_I_DEVICE_CALL(p);)
#define FI_XPU_I_DEVICE_SIGNAL_DISPATCH(h)                                     \
	if (!(h) || (h)->fid.fclass != (uint32_t)FI_CLASS_EP ||               \
	    (unsigned)scope > (unsigned)FI_XPU_DEVICE)                        \
		return -FI_EINVAL;                                            \
	switch ((h)->fid.prov_id) {                                           \
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_SIGNAL_CASE)                   \
	default:                                                              \
		return -FI_ENOSYS;                                            \
	}

FI_XPU_FUNC int
fi_xpu_put_signal(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc, void *dest_addr, uint64_t addr, uint64_t key, uint64_t sig_addr, uint64_t sig_key, uint64_t signal, int sig_op, void *context, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_ITEM(ep, FI_CLASS_EP, fi_xpu_device_check_put_signal(flags, sig_addr, sig_op));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_put_signal_##p(ep, buf, len, desc, dest_addr, addr, key, sig_addr, sig_key, signal, sig_op, context, flags, scope)
	FI_XPU_I_DEVICE_SIGNAL_DISPATCH(ep);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_fence(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_FENCE_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_fence_##p(ep, flags, scope)
	FI_XPU_I_DEVICE_SIGNAL_DISPATCH(ep);
#undef FI_XPU_I_DEVICE_CALL
}

FI_XPU_FUNC int
fi_xpu_quiet(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	FI_XPU_I_DEVICE_CHECK_GROUP(ep, FI_CLASS_EP, fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_QUIET_FLAGS));
#define FI_XPU_I_DEVICE_CALL(p) fi_xpu_quiet_##p(ep, flags, scope)
	FI_XPU_I_DEVICE_SIGNAL_DISPATCH(ep);
#undef FI_XPU_I_DEVICE_CALL
}

/* The abort word of `ep`'s context (fi_xpu_ctx_abort(3)), 0 when none or
 * the provider keeps none. */
FI_XPU_FUNC uint64_t fi_xpu_i_ep_abort_word(const struct fid_xpu_ep *ep)
{
	if (!ep)
		return 0;
	switch (ep->fid.prov_id) {
#if 0 FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_HAS_SHM)
	case FI_XPU_DEVICE_ID_shm:
		return fi_xpu_shm_abort_word(ep);
#endif
#if 0 FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_HAS_OFI)
	case FI_XPU_DEVICE_ID_ofi:
		return fi_xpu_ofi_abort_word(ep);
#endif
	default:
		return 0;
	}
}

/* The abort check of every device wait: 0 to go on waiting, -FI_ECANCELED
 * once the host raised the abort word of `ep`'s context. */
FI_XPU_FUNC int fi_xpu_wait_aborted(const struct fid_xpu_ep *ep)
{
	return fi_xpu_i_aborted(fi_xpu_i_ep_abort_word(ep)) ? FI_XPU_ABORT_ERR : 0;
}

/* Reads local memory only, so it is the same for every provider; `ep`
 * names the abort word that ends the wait. */
FI_XPU_FUNC int
fi_xpu_signal_wait_until(struct fid_xpu_ep *ep, const uint64_t *sig, int cmp, uint64_t value, int timeout_ms, int scope)
{
	int rc;
	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP || (unsigned)scope > (unsigned)FI_XPU_DEVICE)
		return -FI_EINVAL;
	rc = fi_xpu_device_check_wait(sig, cmp);
	if (rc)
		return rc;
	return fi_xpu_signal_wait(fi_xpu_i_ep_abort_word(ep), sig, cmp, value, timeout_ms, scope);
}

FI_XPU_FUNC void *
fi_xpu_peer_ptr(struct fid_xpu_ep *ep, void *dest_addr, uint64_t addr, uint64_t key, size_t len)
{
#define FI_XPU_I_DEVICE_PTR_CASE(p)                                            \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_SIGNAL_##p))(    \
		case FI_XPU_DEVICE_ID_##p: return fi_xpu_peer_ptr_##p(ep, dest_addr, addr, key, len);)
	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP)
		return FI_XPU_I_NULL;
	switch (ep->fid.prov_id) {
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_PTR_CASE)
	default:
		return FI_XPU_I_NULL;
	}
#undef FI_XPU_I_DEVICE_PTR_CASE
}

/* ---- work requests (extensions: the device side of libfabric's WR API) -- */

/*
 * A work request prepared on the host (fi_xpu_prepare_wr, or fi_control
 * with FI_PREPARE_WORK, from libfabric's struct fi_wr_attr) into memory
 * the device can read, in the layout of <fi_xpu/wr.h>:
 *   fi_xpu_wr_set_*      modify it before it is queued
 *   fi_xpu_queue_wr      posts the operation it describes, with FI_MORE: a
 *                        provider may hold back its doorbell until
 *                        fi_xpu_flush_wr (the ofi provider does; shm
 *                        operations are done when they return)
 *   fi_xpu_flush_wr      commits every request queued on the endpoint
 * Scopes as for every operation: each member queues its own request. A
 * member whose request is not a prepared request of this library version
 * for this endpoint's provider (or wr_len is short of FI_XPU_WR_SIZE) gets
 * -FI_EINVAL and still takes part in the group; otherwise it gets what the
 * operation returns.
 */
#define FI_XPU_I_WR_WORD (FI_XPU_WR_MAGIC | (uint64_t)FI_XPU_API_VERSION)

FI_XPU_FUNC struct fi_xpu_wr *fi_xpu_i_wr(void *wr_buf)
{
	struct fi_xpu_wr *w = (struct fi_xpu_wr *)wr_buf;
	return w && w->magic == FI_XPU_I_WR_WORD ? w : FI_XPU_I_NULL;
}

/* Setters: 0, or -FI_EINVAL when wr_buf holds no prepared request. The
 * registration (desc) of the prepared buffer stays: a new buffer must lie
 * in it. For atomics `len` is the element count. */
FI_XPU_FUNC int fi_xpu_wr_set_buf(void *wr_buf, void *buf, size_t len)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->buf = (uint64_t)(uintptr_t)buf;
	w->len = len;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_remote(void *wr_buf, uint64_t addr)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->addr = addr;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_data(void *wr_buf, uint64_t data)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->data = data;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_tag(void *wr_buf, uint64_t tag)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->tag = tag;
	return 0;
}

FI_XPU_FUNC int fi_xpu_wr_set_context(void *wr_buf, void *context)
{
	struct fi_xpu_wr *w = fi_xpu_i_wr(wr_buf);
	if (!w)
		return -FI_EINVAL;
	w->context = (uint64_t)(uintptr_t)context;
	return 0;
}

FI_XPU_FUNC int fi_xpu_queue_wr(struct fid_xpu_ep *ep, void *wr_buf, size_t wr_len, int scope)
{
	struct fi_xpu_wr *w = wr_len >= sizeof(struct fi_xpu_wr) ? fi_xpu_i_wr(wr_buf)
								  : FI_XPU_I_NULL;
	void *peer, *desc, *ctx, *buf;
	uint64_t flags;
	if (!w || !ep || w->prov_id != ep->fid.prov_id)
		w = FI_XPU_I_NULL;
	if (!w) {
		/* Refused: -FI_EINVAL from the write every provider refuses
		 * alike, so that a group still meets. */
		if (scope == FI_XPU_WORK_ITEM)
			return -FI_EINVAL;
		return fi_xpu_write(ep, FI_XPU_I_NULL, 1, FI_XPU_I_NULL, 0, FI_XPU_I_NULL, 0, 0,
				    FI_XPU_I_NULL, 0, scope);
	}
	peer = (w->present & FI_XPU_WR_PEER) ? (void *)w->peer : FI_XPU_I_NULL;
	desc = (w->present & FI_XPU_WR_DESC) ? (void *)w->desc : FI_XPU_I_NULL;
	ctx = (void *)(uintptr_t)w->context;
	buf = (void *)(uintptr_t)w->buf;
	flags = w->flags | FI_MORE;
	switch (w->op_type) {
	case FI_XPU_WR_OP_WRITE:
		return fi_xpu_write(ep, buf, w->len, desc, w->data, peer, w->addr, w->key, ctx, flags,
				    scope);
	case FI_XPU_WR_OP_READ:
		return fi_xpu_read(ep, buf, w->len, desc, peer, w->addr, w->key, ctx, flags, scope);
	case FI_XPU_WR_OP_SEND:
		return fi_xpu_send(ep, buf, w->len, desc, w->data, peer, ctx, flags, scope);
	case FI_XPU_WR_OP_TSEND:
		return fi_xpu_tsend(ep, buf, w->len, desc, w->data, peer, w->tag, ctx, flags, scope);
	case FI_XPU_WR_OP_RECV:
		return fi_xpu_recv(ep, buf, w->len, desc, peer, ctx, flags, scope);
	case FI_XPU_WR_OP_TRECV:
		return fi_xpu_trecv(ep, buf, w->len, desc, peer, w->tag, w->ignore, ctx, flags, scope);
	case FI_XPU_WR_OP_ATOMIC:
		return fi_xpu_atomic(ep, buf, w->len, desc, peer, w->addr, w->key, (int)w->datatype,
				     (int)w->atomic_op, ctx, flags, scope);
	case FI_XPU_WR_OP_FETCH_ATOMIC:
		return fi_xpu_fetch_atomic(
			ep, buf, w->len, desc, (void *)(uintptr_t)w->result,
			(w->present & FI_XPU_WR_RESULT_DESC) ? (void *)w->result_desc : FI_XPU_I_NULL,
			peer, w->addr, w->key, (int)w->datatype, (int)w->atomic_op, ctx, flags, scope);
	default: /* FI_XPU_WR_OP_COMPARE_ATOMIC: the host prepares no other */
		return fi_xpu_compare_atomic(
			ep, buf, w->len, desc, (const void *)(uintptr_t)w->compare,
			(w->present & FI_XPU_WR_COMPARE_DESC) ? (void *)w->compare_desc : FI_XPU_I_NULL,
			(void *)(uintptr_t)w->result,
			(w->present & FI_XPU_WR_RESULT_DESC) ? (void *)w->result_desc : FI_XPU_I_NULL,
			peer, w->addr, w->key, (int)w->datatype, (int)w->atomic_op, ctx, flags, scope);
	}
}

/* A case for each provider that commits queued requests itself
 * (FI_XPU_DEVICE_WR_<name> defined as "~, 1" and fi_xpu_flush_wr_<name>);
 * for the others queued requests are already under way. */
#define FI_XPU_I_DEVICE_WR_CASE(p)                                             \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_WR_##p))(        \
		case FI_XPU_DEVICE_ID_##p: return fi_xpu_flush_wr_##p(ep, scope);)
#define FI_XPU_I_DEVICE_WR_OTHER(p)                                            \
	FI_XPU_I_DEVICE_WHEN(FI_XPU_I_DEVICE_NOT(FI_XPU_I_DEVICE_IS(FI_XPU_DEVICE_WR_##p)))( \
		case FI_XPU_DEVICE_ID_##p:)
#define FI_XPU_I_DEVICE_NOT(c) FI_XPU_I_DEVICE_NOT_(c)
#define FI_XPU_I_DEVICE_NOT_(c) FI_XPU_I_DEVICE_NOT_##c
#define FI_XPU_I_DEVICE_NOT_0 1
#define FI_XPU_I_DEVICE_NOT_1 0

FI_XPU_FUNC int fi_xpu_flush_wr(struct fid_xpu_ep *ep, int scope)
{
	struct fi_xpu_group g;
	int rc;
	if (!ep || ep->fid.fclass != (uint32_t)FI_CLASS_EP || (unsigned)scope > (unsigned)FI_XPU_DEVICE)
		return -FI_EINVAL;
	switch (ep->fid.prov_id) {
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_WR_CASE)
	FI_XPU_DEVICE_PROVIDERS(FI_XPU_I_DEVICE_WR_OTHER)
		break;
	default:
		return -FI_ENOSYS;
	}
	rc = fi_xpu_group_enter(&g, scope, "fi_xpu_flush_wr");
	if (rc)
		return rc;
	return fi_xpu_group_leave(&g, 0);
}

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif /* FI_XPU_INCLUDED_DEVICE_H */
