/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Scope groups: what a scope means to a device operation, shared by every
 * provider's device code.
 *
 * A scope (FI_XPU_WORK_ITEM, FI_XPU_SUBGROUP, FI_XPU_WORK_GROUP,
 * FI_XPU_DEVICE) names the set of work items that call an operation
 * together: the group. Every member issues its own operation with its own
 * arguments (a subgroup of sixteen lanes calling fi_xpu_send posts sixteen
 * sends); what the group buys is cost, not fewer operations: its leader
 * claims the slots of all members with one atomic and rings one doorbell
 * for all of them. Reading a CQ, waiting on a counter and flushing are the
 * exception: they have one shared destination, so the leader serves them
 * and the group gets the leader's result. All members pass the same
 * endpoint, CQ or counter handle.
 *
 * Members of a group:
 *   FI_XPU_WORK_ITEM   the caller alone
 *   FI_XPU_SUBGROUP    the lanes of the caller's subgroup (a trailing partial
 *                      subgroup has only the lanes it really has)
 *   FI_XPU_WORK_GROUP  the work items of the caller's work group
 *   FI_XPU_DEVICE      every work item of the launch (host XPU only; GPU
 *                      targets refuse it with -FI_EOPNOTSUPP)
 * A group call is collective, like __syncthreads(): every member reaches
 * it. Compiled with FI_XPU_DEVICE_DEBUG defined, every group call first
 * waits for its members for at most FI_XPU_DEVICE_DEBUG_TIMEOUT_MS
 * milliseconds (default 5000), with the device clock on GPUs
 * (fi_xpu_arch_barrier_timeout); when one never arrives, each member that
 * did reports the call, the scope and the group and returns -FI_ETIMEDOUT
 * instead of hanging. The report goes to stderr on the host XPU and
 * through the device's printf where the compiler provides it (nvcc, NVRTC,
 * clang with a CUDA installation, HIP after <hip/hip_runtime.h>); elsewhere, or to send it
 * somewhere else, define
 *     FI_XPU_DEVICE_DEBUG_REPORT(call, scope_name, arrived, size, group, rank)
 * before including the device headers (a statement; `call` and `scope_name`
 * are strings, the others unsigned). NVIDIA and AMD work groups are waited
 * for member by member; a subgroup is the lanes converged at the call, all
 * present by definition; under SPIR-V the check is a plain barrier.
 *
 *   int  fi_xpu_group_enter(struct fi_xpu_group *g, int scope, const char *call)
 *        Checks the scope (-FI_EINVAL, -FI_EOPNOTSUPP: see
 *        fi_xpu_arch_scope_check) and fills in the caller's rank and the
 *        group's size. `call` names the operation for the checking mode.
 *   int  fi_xpu_group_leader(const struct fi_xpu_group *g)   rank 0
 *   uint64_t fi_xpu_group_bcast(const struct fi_xpu_group *g, uint64_t v)
 *        The leader's `v` for every member.
 *   int64_t fi_xpu_group_share(const struct fi_xpu_group *g, int64_t r)
 *        The leader's result for every member (calls the leader serves).
 *   void fi_xpu_group_sync(const struct fi_xpu_group *g)     a group barrier
 *   int  fi_xpu_group_leave(const struct fi_xpu_group *g, int own)
 *        Waits until every member's operation was issued and returns the
 *        caller's own status.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_GROUP_H
#define FI_XPU_INCLUDED_DEVICE_GROUP_H

#include <fi_xpu/device_arch.h>

/* Where the checking mode reports: stderr on the host XPU, the device's
 * printf where the compiler declares it (see above). */
#if defined(FI_XPU_DEVICE_DEBUG) && !defined(FI_XPU_DEVICE_DEBUG_REPORT)
#if defined(FI_XPU_ARCH_HOST)
#include <stdio.h>
#define FI_XPU_DEVICE_DEBUG_REPORT(call, scope_name, arrived, size, group, rank)        \
	fprintf(stderr, FI_XPU_I_GROUP_REPORT_FORMAT, call, scope_name, arrived, size, group, \
		fi_xpu_arch_subgroup_id(), (int)FI_XPU_DEVICE_DEBUG_TIMEOUT_MS,          \
		(unsigned)fi_xpu_arch_local_id(), rank)
#elif (defined(FI_XPU_ARCH_NVPTX) &&                                                 \
       (!defined(__clang__) || defined(CUDA_VERSION) || defined(__CUDACC_RTC__))) ||  \
	(defined(FI_XPU_ARCH_AMDGCN) && defined(HIP_INCLUDE_HIP_HIP_RUNTIME_H))
#define FI_XPU_DEVICE_DEBUG_REPORT(call, scope_name, arrived, size, group, rank)        \
	printf(FI_XPU_I_GROUP_REPORT_FORMAT, call, scope_name, arrived, size, group,    \
	       fi_xpu_arch_subgroup_id(), (int)FI_XPU_DEVICE_DEBUG_TIMEOUT_MS,           \
	       (unsigned)fi_xpu_arch_local_id(), rank)
#else
#define FI_XPU_DEVICE_DEBUG_REPORT(call, scope_name, arrived, size, group, rank)        \
	((void)(call), (void)(scope_name), (void)(arrived), (void)(size), (void)(group), \
	 (void)(rank))
#endif
#endif
#define FI_XPU_I_GROUP_REPORT_FORMAT                                                     \
	"fi_xpu: FI_XPU_DEVICE_DEBUG: %s at %s scope: only %u of the %u members of the " \
	"group (work group %u, subgroup %u) reached the call within %d ms; this is work " \
	"item %u (rank %u); returning -FI_ETIMEDOUT\n"

#ifndef FI_XPU_DEVICE_DEBUG_TIMEOUT_MS
#define FI_XPU_DEVICE_DEBUG_TIMEOUT_MS 5000
#endif

struct fi_xpu_group {
	int scope;
	uint32_t rank; /* the caller's place in the group, 0 = leader */
	uint32_t size; /* members */
};

#if defined(FI_XPU_DEVICE_DEBUG)
FI_XPU_FUNC const char *fi_xpu_group_scope_name(int scope)
{
	switch (scope) {
	case FI_XPU_SUBGROUP:
		return "FI_XPU_SUBGROUP";
	case FI_XPU_WORK_GROUP:
		return "FI_XPU_WORK_GROUP";
	case FI_XPU_DEVICE:
		return "FI_XPU_DEVICE";
	default:
		return "FI_XPU_WORK_ITEM";
	}
}
#endif

/* The checking mode's bounded wait for every member (see above). */
FI_XPU_FUNC int fi_xpu_group_check(const struct fi_xpu_group *g, const char *call)
{
#if defined(FI_XPU_DEVICE_DEBUG)
	uint32_t arrived = 0;
	int rc = fi_xpu_arch_barrier_timeout(
		g->scope, (uint64_t)FI_XPU_DEVICE_DEBUG_TIMEOUT_MS * (uint64_t)1000000, &arrived);
	if (rc == -FI_ETIMEDOUT)
		FI_XPU_DEVICE_DEBUG_REPORT(call, fi_xpu_group_scope_name(g->scope),
					   (unsigned)arrived, (unsigned)g->size,
					   (unsigned)fi_xpu_arch_group_id(), (unsigned)g->rank);
	return rc;
#else
	(void)g;
	(void)call;
	return 0;
#endif
}

FI_XPU_FUNC int fi_xpu_group_enter(struct fi_xpu_group *g, int scope, const char *call)
{
	int rc = fi_xpu_arch_scope_check(scope);

	g->scope = scope;
	g->rank = 0;
	g->size = 1;
	if (rc || scope == FI_XPU_WORK_ITEM)
		return rc;
	g->rank = fi_xpu_arch_scope_rank(scope);
	g->size = fi_xpu_arch_scope_size(scope);
	return fi_xpu_group_check(g, call);
}

FI_XPU_FUNC int fi_xpu_group_leader(const struct fi_xpu_group *g)
{
	return g->rank == 0;
}

FI_XPU_FUNC uint64_t fi_xpu_group_bcast(const struct fi_xpu_group *g, uint64_t v)
{
	if (g->scope != FI_XPU_WORK_ITEM)
		(void)fi_xpu_arch_broadcast_u64(g->scope, &v);
	return v;
}

FI_XPU_FUNC int64_t fi_xpu_group_share(const struct fi_xpu_group *g, int64_t r)
{
	return (int64_t)fi_xpu_group_bcast(g, (uint64_t)r);
}

FI_XPU_FUNC void fi_xpu_group_sync(const struct fi_xpu_group *g)
{
	if (g->scope != FI_XPU_WORK_ITEM)
		(void)fi_xpu_arch_barrier(g->scope);
}

FI_XPU_FUNC int fi_xpu_group_leave(const struct fi_xpu_group *g, int own)
{
	fi_xpu_group_sync(g);
	return own;
}

/*
 * The same vocabulary for an operation that keeps no struct fi_xpu_group
 * and needs only the caller's rank (no size, no checking-mode wait):
 *   FI_XPU_GROUP_ENTER_RANK(scope, rank)
 *        A statement at the top of a function returning int: returns the
 *        scope check's error (fi_xpu_arch_scope_check), else declares
 *        `uint32_t rank`, the caller's place in the group (0 = leader).
 *   int64_t fi_xpu_group_scope_bcast(int scope, int64_t v)
 *        The leader's `v` for every member of `scope`'s group.
 *   void fi_xpu_group_scope_sync(int scope)
 *        A barrier of `scope`'s group (nothing at FI_XPU_WORK_ITEM).
 * The shm provider's operations enter their scope groups through these.
 */
#define FI_XPU_GROUP_ENTER_RANK(scope, rank)                                      \
	int fi_xpu_i_group_rc = fi_xpu_arch_scope_check(scope);                   \
	uint32_t rank;                                                            \
	if (fi_xpu_i_group_rc)                                                    \
		return fi_xpu_i_group_rc;                                         \
	rank = (scope) == FI_XPU_WORK_ITEM ? 0 : fi_xpu_arch_scope_rank(scope)

FI_XPU_FUNC int64_t fi_xpu_group_scope_bcast(int scope, int64_t v)
{
	uint64_t u = (uint64_t)v;
	if (scope == FI_XPU_WORK_ITEM)
		return v;
	fi_xpu_arch_broadcast_u64(scope, &u);
	return (int64_t)u;
}

FI_XPU_FUNC void fi_xpu_group_scope_sync(int scope)
{
	if (scope != FI_XPU_WORK_ITEM)
		(void)fi_xpu_arch_barrier(scope);
}

/* ---- entry points every provider writes alike ----------------------------
 *
 * FI_XPU_GROUP_LEADER_SERVES(scope, call, expr)
 *        In a function returning int64_t: enters the group, lets the leader
 *        evaluate `expr` and returns its result to every member.
 *
 * FI_XPU_GROUP_SREAD(read_item, cq, buf, count, src_addr, threshold,
 *                    timeout_ms, esz, abort)
 *        The body of a blocking CQ read for one work item: calls
 *        read_item(cq, buf, count, src) (a provider's non-blocking read,
 *        int64_t, -FI_EAGAIN when empty) until `threshold` entries (at least
 *        one, at most `count`) of `esz` bytes were read or an error entry is
 *        next, for at most `timeout_ms` (negative: no limit) and until the
 *        context's abort word `abort` is raised; returns the count, or
 *        -FI_ETIMEDOUT (FI_XPU_ABORT_ERR) when nothing came.
 *
 * FI_XPU_GROUP_CQ_ENTRY_POINTS(p, read_item, readerr_item, sread_item)
 *        Defines fi_xpu_cq_read_<p>, _readfrom_<p>, _readerr_<p>,
 *        _sread_<p> and _sreadfrom_<p> (fi_xpu/device.h): the leader serves
 *        each with the provider's work-item functions
 *          int64_t read_item(const struct fid_xpu_cq *, void *buf, size_t count, uint64_t *src_addr)
 *          int64_t readerr_item(const struct fid_xpu_cq *, void *buf, uint64_t flags)
 *          int64_t sread_item(const struct fid_xpu_cq *, void *buf, size_t count, void *src_addr, uint64_t threshold)
 *
 * FI_XPU_GROUP_CNTR_ENTRY_POINTS(p, locate, abort_of, mscope)
 *        Defines the seven fi_xpu_cntr_*_<p> functions on the two-word
 *        counters of fi_xpu/device_coop.h: locate(const struct
 *        fid_xpu_cntr *c, const uint64_t **remote) returns the counter's
 *        words (NULL for a bad handle) and sets *remote to its second pair
 *        (NULL: none), abort_of(c) the abort word of its context (0:
 *        none), `mscope` is their memory scope.
 */
#define FI_XPU_GROUP_LEADER_SERVES(scope, call, expr)                                    \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int64_t rc_ = fi_xpu_group_enter(&g_, scope, call);                      \
		if (rc_)                                                                 \
			return rc_;                                                      \
		if (fi_xpu_group_leader(&g_))                                            \
			rc_ = (expr);                                                    \
		return fi_xpu_group_share(&g_, rc_);                                     \
	} while (0)

#define FI_XPU_GROUP_SREAD(read_item, cq, buf, count, src_addr, threshold, timeout_ms, esz, \
			   abort)                                                        \
	do {                                                                             \
		uint64_t want_ = (threshold) == 0 ? 1 : (threshold);                     \
		uint64_t start_ = fi_xpu_arch_clock_ns(), next_ = 0, now_;               \
		int64_t to_ = (timeout_ms), rc_;                                         \
		size_t got_ = 0, esz_ = (esz);                                           \
		if (want_ > (count))                                                     \
			want_ = (count);                                                 \
		for (;;) {                                                               \
			rc_ = read_item(cq, (unsigned char *)(buf) + got_ * esz_,        \
					(count) - got_,                                  \
					(src_addr) ? (uint64_t *)(src_addr) + got_       \
						   : FI_XPU_I_NULL);                     \
			if (rc_ > 0)                                                     \
				got_ += (size_t)rc_;                                     \
			else if (rc_ != -FI_EAGAIN)                                      \
				return got_ ? (int64_t)got_ : rc_;                       \
			if (got_ >= want_)                                               \
				return (int64_t)got_;                                    \
			now_ = fi_xpu_arch_clock_ns();                                   \
			if (fi_xpu_i_abort_due(abort, now_, &next_))                     \
				return got_ ? (int64_t)got_ : FI_XPU_ABORT_ERR;          \
			if (to_ >= 0 && now_ - start_ >= (uint64_t)to_ * (uint64_t)1000000) \
				return got_ ? (int64_t)got_ : -FI_ETIMEDOUT;             \
			fi_xpu_arch_pause();                                             \
		}                                                                        \
	} while (0)

#define FI_XPU_GROUP_CQ_ENTRY_POINTS(p, read_item, readerr_item, sread_item)            \
	FI_XPU_FUNC int64_t fi_xpu_cq_read_##p(struct fid_xpu_cq *cq, void *buf, size_t count, \
					       int scope)                                \
	{                                                                                \
		FI_XPU_GROUP_LEADER_SERVES(scope, "fi_xpu_cq_read",                      \
					   read_item(cq, buf, count, FI_XPU_I_NULL));    \
	}                                                                                \
	FI_XPU_FUNC int64_t fi_xpu_cq_readfrom_##p(struct fid_xpu_cq *cq, void *buf,     \
						   size_t count, void *src_addr, int scope) \
	{                                                                                \
		FI_XPU_GROUP_LEADER_SERVES(scope, "fi_xpu_cq_readfrom",                  \
					   read_item(cq, buf, count, (uint64_t *)src_addr)); \
	}                                                                                \
	FI_XPU_FUNC int64_t fi_xpu_cq_readerr_##p(struct fid_xpu_cq *cq, void *buf,      \
						  uint64_t flags, int scope)             \
	{                                                                                \
		FI_XPU_GROUP_LEADER_SERVES(scope, "fi_xpu_cq_readerr",                   \
					   readerr_item(cq, buf, flags));                \
	}                                                                                \
	FI_XPU_FUNC int64_t fi_xpu_cq_sreadfrom_##p(struct fid_xpu_cq *cq, void *buf,    \
						    size_t count, void *src_addr,        \
						    uint64_t threshold, int scope)       \
	{                                                                                \
		FI_XPU_GROUP_LEADER_SERVES(scope, "fi_xpu_cq_sreadfrom",                 \
					   sread_item(cq, buf, count, src_addr, threshold)); \
	}                                                                                \
	FI_XPU_FUNC int64_t fi_xpu_cq_sread_##p(struct fid_xpu_cq *cq, void *buf, size_t count, \
						uint64_t threshold, int scope)           \
	{                                                                                \
		FI_XPU_GROUP_LEADER_SERVES(scope, "fi_xpu_cq_sread",                     \
					   sread_item(cq, buf, count, FI_XPU_I_NULL, threshold)); \
	}

#define FI_XPU_GROUP_CNTR_ENTRY_POINTS(p, locate, abort_of, mscope)                               \
	FI_XPU_FUNC uint64_t fi_xpu_cntr_read_##p(struct fid_xpu_cntr *c, int scope)     \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_read(c_, r_, 0, scope, mscope);                  \
	}                                                                                \
	FI_XPU_FUNC uint64_t fi_xpu_cntr_readerr_##p(struct fid_xpu_cntr *c, int scope)  \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_read(c_, r_, 1, scope, mscope);                  \
	}                                                                                \
	FI_XPU_FUNC int fi_xpu_cntr_add_##p(struct fid_xpu_cntr *c, uint64_t v, int scope) \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_update(c_, r_, 0, 0, v, scope, mscope);          \
	}                                                                                \
	FI_XPU_FUNC int fi_xpu_cntr_set_##p(struct fid_xpu_cntr *c, uint64_t v, int scope) \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_update(c_, r_, 0, 1, v, scope, mscope);          \
	}                                                                                \
	FI_XPU_FUNC int fi_xpu_cntr_adderr_##p(struct fid_xpu_cntr *c, uint64_t v, int scope) \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_update(c_, r_, 1, 0, v, scope, mscope);          \
	}                                                                                \
	FI_XPU_FUNC int fi_xpu_cntr_seterr_##p(struct fid_xpu_cntr *c, uint64_t v, int scope) \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_update(c_, r_, 1, 1, v, scope, mscope);          \
	}                                                                                \
	FI_XPU_FUNC int fi_xpu_cntr_wait_##p(struct fid_xpu_cntr *c, uint64_t threshold,  \
					     int timeout_ms, int scope)                  \
	{                                                                                \
		const uint64_t *r_;                                                      \
		uint64_t *c_ = locate(c, &r_);                                           \
		return fi_xpu_coop_cntr_wait(c_, r_, abort_of(c), threshold, timeout_ms, \
					     scope, mscope);                              \
	}

#endif /* FI_XPU_INCLUDED_DEVICE_GROUP_H */
