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
 *   The cooperative put-with-signal likewise, on its own:
 *       #define FI_XPU_DEVICE_COOP_SIGNAL_<name> ~, 1
 *   and fi_xpu_coop_put_signal_<name> with the arguments of
 *   fi_xpu_put_signal_<name> (flags and signal operation already checked).
 *   Otherwise the group's leader issues the one operation at work-item
 *   scope and every member gets its status. The split forms
 *   (fi_xpu_coop_write_part, fi_xpu_coop_put_signal_part) need nothing of
 *   a provider: each share is one cooperative transfer.
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
 *   fi_xpu_coop_write, fi_xpu_coop_read, fi_xpu_coop_send, fi_xpu_coop_tsend,
 *   fi_xpu_coop_put_signal
 * take the arguments of fi_xpu_write, _read, _send, _tsend and
 * fi_xpu_put_signal. Every member of the scope group calls them with the
 * same arguments; ONE operation is performed for the group (NVSHMEM's
 * _block/_warp form), its copy shared by the members where the provider
 * moves the data itself (shm), and every member gets the same status.
 *
 * One transfer split across groups (extensions, not in upstream's API):
 *   fi_xpu_coop_write_part      the arguments of fi_xpu_coop_write, then
 *                               uint32_t part, uint32_t parts, then scope
 *   fi_xpu_coop_put_signal_part the arguments of fi_xpu_coop_put_signal,
 *                               then part, parts, scope
 * `parts` groups (every work group of a grid: part = its index, parts =
 * their number) each call it with the same arguments but `part`, and each
 * performs its share of [buf, buf + len) as one cooperative transfer to
 * the same offset of [addr, addr + len): 16-byte units dealt out evenly
 * (fi_xpu_coop_part, fi_xpu/device_coop.h). Every share is an operation
 * of its own, empty ones (len < parts * 16) included: `parts` completions
 * (and counter increments, and remote CQ entries with FI_REMOTE_CQ_DATA),
 * and for the put-with-signal `parts` signal updates, so a target waits
 * for the word to reach parts * signal. A set cannot be counted:
 * FI_XPU_SIGNAL_SET with parts > 1 is -FI_EINVAL, as is part >= parts.
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

/* The operations, by family (under fi_xpu/device/). */
#include <fi_xpu/device/device__rma.h>
#include <fi_xpu/device/device__msg.h>
#include <fi_xpu/device/device__atomic.h>
#include <fi_xpu/device/device__cntr.h>
#include <fi_xpu/device/device__cq.h>
#include <fi_xpu/device/device__coop.h>
#include <fi_xpu/device/device__peer.h>
#include <fi_xpu/device/device__wr.h>

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif /* FI_XPU_INCLUDED_DEVICE_H */
