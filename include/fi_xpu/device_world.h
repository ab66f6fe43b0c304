/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * One set of peers across providers: the device side of a world
 * (fi_xpu_world(3)). A kernel names a peer by its rank; the tables below,
 * written by fi_xpu_world_open and fi_xpu_world_alloc on the host, say
 * which provider reaches it (shm on the same node, ofi across nodes),
 * through which endpoint, at which address, base and key. The functions
 * dispatch every operation to that provider's device code through the
 * ordinary device API (<fi_xpu/device.h>).
 *
 * Tables
 *   struct fi_xpu_world_dev    one per rank: the lanes (one per provider
 *                              this rank uses: exported endpoint, counter
 *                              of its completions, CQ of its receives) and
 *                              the barrier's state.
 *   struct fi_xpu_window_dev   one per window and rank: the window's size,
 *                              this rank's part (addr; its address and
 *                              descriptor in each lane: local[]), and per
 *                              peer two routes: rma (writes and reads) and
 *                              amo (atomics).
 * Both start with a validity word (FI_XPU_WORLD_VALID, FI_XPU_WINDOW_VALID:
 * magic and the library's FI_XPU_API_VERSION); a function given anything
 * else returns -FI_EINVAL.
 *
 * Atomics: NIC atomics are not atomic with CPU or GPU atomics on the same
 * word, so every atomic on a window goes through one agent. In a world
 * that spans nodes that agent is the ofi lane for every peer, this rank
 * included (loopback); in a world on one node it is shm. The routes say
 * so: peer[p].amo names the ofi lane whenever FI_XPU_WORLD_ATOMICS_OFI is
 * set in the world's flags, even where peer[p].rma is shm. Plain loads of a
 * word that peers update with atomics (a signal, a barrier word) are fine.
 *
 * Local buffers: a source or result buffer inside this rank's part of the
 * window (between addr and addr + size) is translated to the lane's own
 * address of that memory and passed with the lane's descriptor; any other
 * buffer is passed as it is, without a descriptor, and must be memory the
 * lane's context knows (FI_INJECT sources excepted).
 *
 * Completion: operations posted through these functions are counted
 * (lane.issued) and complete into the lane's counter; fi_xpu_world_quiet
 * waits until all of them completed. On ofi lanes writes and atomics are
 * posted with FI_DELIVERY_COMPLETE, so that a completed operation is
 * visible at the target (what the barrier promises).
 *
 * Scopes: every member of the group calls with its own peer and
 * arguments, as with the device API. Members may name peers reached
 * through different lanes: the functions call each lane's operation with
 * the whole group, members whose route is elsewhere taking part without
 * posting. A member with a bad peer or range gets -FI_EINVAL and the
 * others are unaffected.
 *
 *   int fi_xpu_world_put(const struct fi_xpu_window_dev *w, int peer,
 *                        uint64_t offset, const void *src, size_t len,
 *                        uint64_t flags, int scope)
 *       Writes len bytes from src to peer's window at offset.
 *   int fi_xpu_world_get(w, peer, offset, void *dst, len, flags, scope)
 *       Reads len bytes of peer's window at offset into dst.
 *   int fi_xpu_world_atomic(w, peer, offset, const void *buf, size_t count,
 *                           int datatype, int op, uint64_t flags, int scope)
 *   int fi_xpu_world_fetch_atomic(w, peer, offset, buf, count, void *result,
 *                                 datatype, op, flags, scope)
 *   int fi_xpu_world_compare_atomic(w, peer, offset, buf, count,
 *                                   const void *compare, void *result,
 *                                   datatype, op, flags, scope)
 *       Atomics on peer's window at offset through the window's atomic
 *       agent.
 *   int fi_xpu_world_quiet(const struct fi_xpu_world_dev *world,
 *                          int timeout_ms, int scope)
 *       Waits until every operation posted through these functions on
 *       this rank has completed: 0, -FI_EIO when one of them failed since
 *       the last quiet, -FI_ETIMEDOUT after timeout_ms (negative: no
 *       limit). The leader waits; every member gets its result.
 *   int fi_xpu_world_barrier(const struct fi_xpu_world_dev *world,
 *                            int timeout_ms, int scope)
 *       Quiet, then a barrier across all ranks (dissemination: ceil(log2 n)
 *       rounds of one atomic add and one fi_xpu_signal_wait_until on a
 *       local word of the world's control window). Every rank calls it the same number of
 *       times; each call is one barrier, made by the group that calls it
 *       together (a work item, a subgroup, a work group, or the whole
 *       launch at FI_XPU_DEVICE where the target allows it). Returns 0,
 *       the quiet's error, or -FI_ETIMEDOUT when a peer did not arrive.
 *   const struct fi_xpu_world_route *fi_xpu_world_rma_route(w, peer)
 *   const struct fi_xpu_world_route *fi_xpu_world_amo_route(w, peer)
 *       The route to peer (NULL for a bad table or peer), to post other
 *       operations (send, tagged, CQ data) on its lane's endpoint:
 *       fi_xpu_world_route_ep(world, route), &route->addr.
 */
#ifndef FI_XPU_INCLUDED_DEVICE_WORLD_H
#define FI_XPU_INCLUDED_DEVICE_WORLD_H

#include <fi_xpu/device.h>

#define FI_XPU_WORLD_LANES 2
#define FI_XPU_WORLD_BARRIER_ROUNDS 64
#define FI_XPU_WORLD_VALID (0x4658574400000000ULL | (uint64_t)FI_XPU_API_VERSION)
#define FI_XPU_WINDOW_VALID (0x4658574e00000000ULL | (uint64_t)FI_XPU_API_VERSION)
/* fi_xpu_world_dev.flags: atomics on every window go through the ofi lane. */
#define FI_XPU_WORLD_ATOMICS_OFI 1u

/* One provider this rank reaches peers through. */
struct fi_xpu_world_lane {
	struct fid_xpu_ep ep;     /* exported endpoint; ep.fid.prov_id: the provider */
	struct fid_xpu_cntr cntr; /* completions of what is posted here (FI_WRITE, FI_READ, FI_SEND) */
	struct fid_xpu_cq cq;     /* completions of receives posted here */
	uint64_t issued;          /* operations posted through the world functions */
	uint64_t errors_seen;     /* the counter's error count at the last quiet */
};

struct fi_xpu_world_dev {
	uint64_t valid;         /* FI_XPU_WORLD_VALID */
	uint32_t rank;
	uint32_t nranks;
	uint32_t nlanes;
	uint32_t flags;         /* FI_XPU_WORLD_ATOMICS_OFI */
	uint64_t ctl;           /* the control window (struct fi_xpu_window_dev *) */
	uint64_t barrier_epoch; /* barriers this rank completed */
	uint64_t abort;         /* reserved: 0 */
	uint64_t reserved[2];
	struct fi_xpu_world_lane lane[FI_XPU_WORLD_LANES];
};

/* One way to one peer's window. */
struct fi_xpu_world_route {
	uint32_t lane;    /* index into fi_xpu_world_dev.lane */
	uint32_t prov_id; /* that lane's provider (FI_XPU_PROV_SHM, FI_XPU_PROV_OFI) */
	uint64_t addr;    /* the peer's raw address in that lane (fi_xpu_av_lookup) */
	uint64_t base;    /* the peer's window as that provider addresses it */
	uint64_t key;     /* the peer's key for it */
};

struct fi_xpu_window_peer {
	struct fi_xpu_world_route rma;
	struct fi_xpu_world_route amo;
};

/* This rank's part of the window in one lane. */
struct fi_xpu_window_local {
	uint64_t addr;    /* its address in the lane's context */
	uint64_t desc[4]; /* its descriptor there (fi_xpu_mr_desc) */
};

struct fi_xpu_window_dev {
	uint64_t valid;  /* FI_XPU_WINDOW_VALID */
	uint32_t rank;
	uint32_t nranks;
	uint64_t size;   /* bytes of the window on every rank */
	uint64_t addr;   /* this rank's part, as fi_xpu_world_alloc returned it */
	uint64_t world;  /* struct fi_xpu_world_dev * */
	uint64_t peer;   /* struct fi_xpu_window_peer[nranks] */
	uint64_t reserved[2];
	struct fi_xpu_window_local local[FI_XPU_WORLD_LANES];
};

/* ---- internals ----------------------------------------------------------- */

/* A flag no operation takes: a member whose route is on another lane calls
 * the lane's operation with it, taking part in the group without posting. */
#define FI_XPU_I_WORLD_NO_POST (1ULL << 63)

#define FI_XPU_I_WORLD_P(T, v) ((T *)(uintptr_t)(v))

FI_XPU_FUNC const struct fi_xpu_world_dev *fi_xpu_i_world_of(const struct fi_xpu_window_dev *w)
{
	const struct fi_xpu_world_dev *wd;
	if (!w || w->valid != FI_XPU_WINDOW_VALID)
		return FI_XPU_I_NULL;
	wd = FI_XPU_I_WORLD_P(const struct fi_xpu_world_dev, w->world);
	if (!wd || wd->valid != FI_XPU_WORLD_VALID || wd->nlanes > FI_XPU_WORLD_LANES)
		return FI_XPU_I_NULL;
	return wd;
}

FI_XPU_FUNC const struct fi_xpu_window_peer *fi_xpu_i_world_peer(const struct fi_xpu_window_dev *w,
								 int peer)
{
	if (!fi_xpu_i_world_of(w) || peer < 0 || (uint32_t)peer >= w->nranks)
		return FI_XPU_I_NULL;
	return FI_XPU_I_WORLD_P(const struct fi_xpu_window_peer, w->peer) + peer;
}

FI_XPU_FUNC const struct fi_xpu_world_route *fi_xpu_world_rma_route(const struct fi_xpu_window_dev *w,
								    int peer)
{
	const struct fi_xpu_window_peer *p = fi_xpu_i_world_peer(w, peer);
	return p ? &p->rma : FI_XPU_I_NULL;
}

FI_XPU_FUNC const struct fi_xpu_world_route *fi_xpu_world_amo_route(const struct fi_xpu_window_dev *w,
								    int peer)
{
	const struct fi_xpu_window_peer *p = fi_xpu_i_world_peer(w, peer);
	return p ? &p->amo : FI_XPU_I_NULL;
}

/* A lane's endpoint and counter handles. Kernels see the world's table
 * as const, but post and count through the handles in it (their state
 * lives behind them); the cast goes through an integer so that builds
 * with -Wcast-qual stay quiet. */
FI_XPU_FUNC struct fid_xpu_ep *fi_xpu_i_world_lane_ep(const struct fi_xpu_world_dev *wd,
						      uint32_t lane)
{
	return (struct fid_xpu_ep *)(uintptr_t)&wd->lane[lane].ep;
}

FI_XPU_FUNC struct fid_xpu_cntr *fi_xpu_i_world_lane_cntr(const struct fi_xpu_world_dev *wd,
							  uint32_t lane)
{
	return (struct fid_xpu_cntr *)(uintptr_t)&wd->lane[lane].cntr;
}

/* The endpoint of a route's lane. */
FI_XPU_FUNC struct fid_xpu_ep *fi_xpu_world_route_ep(const struct fi_xpu_world_dev *wd,
						     const struct fi_xpu_world_route *r)
{
	if (!wd || !r || r->lane >= wd->nlanes)
		return FI_XPU_I_NULL;
	return fi_xpu_i_world_lane_ep(wd, r->lane);
}

/* `p` in lane `lane`'s terms: inside this rank's part of the window, the
 * lane's address of it and its descriptor; otherwise unchanged, no
 * descriptor. */
FI_XPU_FUNC void *fi_xpu_i_world_local(const struct fi_xpu_window_dev *w, uint32_t lane,
				       const void *p, void **desc)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	if (p && a >= w->addr && a - w->addr < w->size) {
		*desc = (void *)(uintptr_t)w->local[lane].desc;
		return FI_XPU_I_WORLD_P(void, w->local[lane].addr + (a - w->addr));
	}
	*desc = FI_XPU_I_NULL;
	return (void *)(uintptr_t)a;
}

FI_XPU_FUNC uint64_t *fi_xpu_i_world_issued(const struct fi_xpu_world_dev *wd, uint32_t lane)
{
	return (uint64_t *)(uintptr_t)&wd->lane[lane].issued;
}

/* The route a member posts on, or NULL when its peer or range is bad. */
FI_XPU_FUNC const struct fi_xpu_world_route *fi_xpu_i_world_route(const struct fi_xpu_window_dev *w,
								  int peer, uint64_t offset,
								  uint64_t len, int amo)
{
	const struct fi_xpu_window_peer *p = fi_xpu_i_world_peer(w, peer);
	const struct fi_xpu_world_route *r;
	if (!p || offset > w->size || len > w->size - offset)
		return FI_XPU_I_NULL;
	r = amo ? &p->amo : &p->rma;
	return r->lane < fi_xpu_i_world_of(w)->nlanes ? r : FI_XPU_I_NULL;
}

/*
 * The body every operation shares: for each lane, the group calls that
 * lane's operation (the statement passed last, using ep, dest, base, key, desc,
 * ldesc, lflags and scope); a member whose route is on the lane posts with
 * its arguments, the others take part with FI_XPU_I_WORLD_NO_POST. A
 * member that posted counts its operation as issued.
 */
#define FI_XPU_I_WORLD_OP(w, peer, offset, len, amo, flags, scope, ...)                      \
	const struct fi_xpu_world_dev *wd_ = fi_xpu_i_world_of(w);                           \
	const struct fi_xpu_world_route *r_;                                                 \
	uint32_t l_;                                                                         \
	int own_ = -FI_EINVAL;                                                               \
	if (!wd_)                                                                            \
		return -FI_EINVAL;                                                           \
	r_ = fi_xpu_i_world_route(w, peer, offset, len, amo);                                \
	for (l_ = 0; l_ < wd_->nlanes; l_++) {                                               \
		int mine_ = r_ && r_->lane == l_;                                            \
		struct fid_xpu_ep *ep = fi_xpu_i_world_lane_ep(wd_, l_);                     \
		void *dest = mine_ ? (void *)(uintptr_t)&r_->addr : FI_XPU_I_NULL;               \
		uint64_t base = mine_ ? r_->base + (offset) : 0;                             \
		uint64_t key = mine_ ? r_->key : 0;                                          \
		uint64_t lflags = mine_ ? (flags) : FI_XPU_I_WORLD_NO_POST;                  \
		int rc_;                                                                     \
		if (mine_ && wd_->lane[l_].ep.fid.prov_id == FI_XPU_PROV_OFI &&              \
		    !((flags) & FI_XPU_I_WORLD_NO_DC))                                       \
			lflags |= FI_DELIVERY_COMPLETE;                                      \
		if (!mine_ && (scope) == FI_XPU_WORK_ITEM)                                   \
			continue;                                                            \
		if (mine_)                                                                   \
			fi_xpu_arch_fetch_add_u64(fi_xpu_i_world_issued(wd_, l_), 1,          \
						  FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM);  \
		__VA_ARGS__                                                                  \
		if (mine_) {                                                                 \
			own_ = rc_;                                                          \
			if (rc_ < 0)                                                         \
				fi_xpu_arch_fetch_add_u64(fi_xpu_i_world_issued(wd_, l_),     \
							  (uint64_t)-1, FI_XPU_ARCH_RELAXED,  \
							  FI_XPU_ARCH_MS_SYSTEM);             \
		}                                                                            \
	}                                                                                    \
	return own_

/* Reads carry no delivery flag. */
#define FI_XPU_I_WORLD_NO_DC (1ULL << 62)

FI_XPU_FUNC int fi_xpu_world_put(const struct fi_xpu_window_dev *w, int peer, uint64_t offset,
				 const void *src, size_t len, uint64_t flags, int scope)
{
	FI_XPU_I_WORLD_OP(w, peer, offset, len, 0, flags, scope, {
		void *ldesc;
		void *buf = mine_ ? fi_xpu_i_world_local(w, l_, src, &ldesc) : FI_XPU_I_NULL;
		if (!mine_)
			ldesc = FI_XPU_I_NULL;
		rc_ = fi_xpu_write(ep, buf, mine_ ? len : 0, ldesc, 0, dest, base, key, FI_XPU_I_NULL,
				   lflags, scope);
	});
}

FI_XPU_FUNC int fi_xpu_world_get(const struct fi_xpu_window_dev *w, int peer, uint64_t offset,
				 void *dst, size_t len, uint64_t flags, int scope)
{
	FI_XPU_I_WORLD_OP(w, peer, offset, len, 0, flags | FI_XPU_I_WORLD_NO_DC, scope, {
		void *ldesc;
		void *buf = mine_ ? fi_xpu_i_world_local(w, l_, dst, &ldesc) : FI_XPU_I_NULL;
		if (!mine_)
			ldesc = FI_XPU_I_NULL;
		rc_ = fi_xpu_read(ep, buf, mine_ ? len : 0, ldesc, dest, base, key, FI_XPU_I_NULL,
				  lflags & ~FI_XPU_I_WORLD_NO_DC, scope);
	});
}

FI_XPU_FUNC int fi_xpu_world_atomic(const struct fi_xpu_window_dev *w, int peer, uint64_t offset,
				    const void *buf, size_t count, int datatype, int op,
				    uint64_t flags, int scope)
{
	FI_XPU_I_WORLD_OP(w, peer, offset, count * fi_xpu_device_dt_size(datatype), 1, flags,
			  scope, {
				  void *ldesc;
				  void *b = mine_ ? fi_xpu_i_world_local(w, l_, buf, &ldesc)
						  : FI_XPU_I_NULL;
				  if (!mine_)
					  ldesc = FI_XPU_I_NULL;
				  rc_ = fi_xpu_atomic(ep, b, mine_ ? count : 1, ldesc, dest, base, key,
						      datatype, op, FI_XPU_I_NULL, lflags, scope);
			  });
}

FI_XPU_FUNC int fi_xpu_world_fetch_atomic(const struct fi_xpu_window_dev *w, int peer,
					  uint64_t offset, const void *buf, size_t count,
					  void *result, int datatype, int op, uint64_t flags,
					  int scope)
{
	FI_XPU_I_WORLD_OP(w, peer, offset, count * fi_xpu_device_dt_size(datatype), 1, flags,
			  scope, {
				  void *ldesc, *rdesc;
				  void *b = mine_ ? fi_xpu_i_world_local(w, l_, buf, &ldesc)
						  : FI_XPU_I_NULL;
				  void *res = mine_ ? fi_xpu_i_world_local(w, l_, result, &rdesc)
						    : FI_XPU_I_NULL;
				  if (!mine_)
					  ldesc = rdesc = FI_XPU_I_NULL;
				  rc_ = fi_xpu_fetch_atomic(ep, b, mine_ ? count : 1, ldesc, res,
							    rdesc, dest, base, key, datatype, op,
							    FI_XPU_I_NULL, lflags, scope);
			  });
}

FI_XPU_FUNC int fi_xpu_world_compare_atomic(const struct fi_xpu_window_dev *w, int peer,
					    uint64_t offset, const void *buf, size_t count,
					    const void *compare, void *result, int datatype,
					    int op, uint64_t flags, int scope)
{
	FI_XPU_I_WORLD_OP(w, peer, offset, count * fi_xpu_device_dt_size(datatype), 1, flags,
			  scope, {
				  void *ldesc, *cdesc, *rdesc;
				  void *b = mine_ ? fi_xpu_i_world_local(w, l_, buf, &ldesc)
						  : FI_XPU_I_NULL;
				  void *cmp = mine_ ? fi_xpu_i_world_local(w, l_, compare, &cdesc)
						    : FI_XPU_I_NULL;
				  void *res = mine_ ? fi_xpu_i_world_local(w, l_, result, &rdesc)
						    : FI_XPU_I_NULL;
				  if (!mine_)
					  ldesc = cdesc = rdesc = FI_XPU_I_NULL;
				  rc_ = fi_xpu_compare_atomic(ep, b, mine_ ? count : 1, ldesc, cmp,
							      cdesc, res, rdesc, dest, base, key,
							      datatype, op, FI_XPU_I_NULL, lflags, scope);
			  });
}

/* ---- quiet and barrier ------------------------------------------------------ */

FI_XPU_FUNC int fi_xpu_i_world_expired(uint64_t start, int timeout_ms)
{
	return timeout_ms >= 0 &&
	       fi_xpu_arch_clock_ns() - start > (uint64_t)timeout_ms * (uint64_t)1000000;
}

/* Milliseconds left of `timeout_ms` since `start` (negative: no limit). */
FI_XPU_FUNC int fi_xpu_i_world_left_ms(uint64_t start, int timeout_ms)
{
	uint64_t spent_ms = (fi_xpu_arch_clock_ns() - start) / (uint64_t)1000000;
	if (timeout_ms < 0)
		return -1;
	return spent_ms >= (uint64_t)timeout_ms ? 0 : (int)((uint64_t)timeout_ms - spent_ms);
}

/* The quiet of one work item. */
FI_XPU_FUNC int fi_xpu_i_world_quiet(const struct fi_xpu_world_dev *wd, int timeout_ms)
{
	uint64_t start = fi_xpu_arch_clock_ns();
	uint32_t l;
	int rc = 0;
	for (l = 0; l < wd->nlanes; l++) {
		struct fid_xpu_cntr *c = fi_xpu_i_world_lane_cntr(wd, l);
		uint64_t *seen = (uint64_t *)(uintptr_t)&wd->lane[l].errors_seen;
		uint64_t want = fi_xpu_arch_load_u64(fi_xpu_i_world_issued(wd, l),
						     FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_SYSTEM);
		uint64_t done, err;
		for (;;) {
			done = fi_xpu_cntr_read(c, FI_XPU_WORK_ITEM);
			err = fi_xpu_cntr_readerr(c, FI_XPU_WORK_ITEM);
			if ((int64_t)done < 0 && (int64_t)done > -4096)
				return (int)(int64_t)done;
			if (done + err >= want)
				break;
			if (fi_xpu_i_world_expired(start, timeout_ms))
				return -FI_ETIMEDOUT;
			/* The host's abort word (fi_xpu_ctx_abort) ends it too. */
			rc = fi_xpu_wait_aborted(&wd->lane[l].ep);
			if (rc)
				return rc;
			fi_xpu_arch_pause();
		}
		if (err != fi_xpu_arch_load_u64(seen, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM)) {
			fi_xpu_arch_store_u64(seen, err, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM);
			rc = -FI_EIO;
		}
	}
	return rc;
}

FI_XPU_FUNC int fi_xpu_world_quiet(const struct fi_xpu_world_dev *wd, int timeout_ms, int scope)
{
	struct fi_xpu_group g;
	int64_t r = 0;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_world_quiet");
	if (rc)
		return rc;
	fi_xpu_group_sync(&g);
	if (fi_xpu_group_leader(&g))
		r = (!wd || wd->valid != FI_XPU_WORLD_VALID) ? -FI_EINVAL
							     : fi_xpu_i_world_quiet(wd, timeout_ms);
	r = fi_xpu_group_share(&g, r);
	return fi_xpu_group_leave(&g, (int)r);
}

/* The barrier of one work item: quiet, then dissemination over the control
 * window's words, one per round. */
FI_XPU_FUNC int fi_xpu_i_world_barrier(const struct fi_xpu_world_dev *wd, int timeout_ms)
{
	const struct fi_xpu_window_dev *ctl;
	uint64_t *epoch_p, epoch, start, d;
	uint32_t k, n;
	int rc;
	if (!wd || wd->valid != FI_XPU_WORLD_VALID)
		return -FI_EINVAL;
	ctl = FI_XPU_I_WORLD_P(const struct fi_xpu_window_dev, wd->ctl);
	if (!fi_xpu_i_world_of(ctl))
		return -FI_EINVAL;
	rc = fi_xpu_i_world_quiet(wd, timeout_ms);
	if (rc)
		return rc;
	epoch_p = (uint64_t *)(uintptr_t)&wd->barrier_epoch;
	epoch = fi_xpu_arch_load_u64(epoch_p, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM) + 1;
	n = wd->nranks;
	start = fi_xpu_arch_clock_ns();
	for (k = 0, d = 1; d < n; k++, d <<= 1) {
		uint64_t one = 1;
		const uint64_t *word = FI_XPU_I_WORLD_P(const uint64_t, ctl->addr) + k;
		int to = (int)((wd->rank + d) % n);
		/* Only arrival matters here, not this add's completion: its
		 * counting (quiet) is left to the next barrier or quiet. */
		rc = fi_xpu_world_atomic(ctl, to, 8 * (uint64_t)k, &one, 1, FI_UINT64, FI_SUM,
					 FI_INJECT, FI_XPU_WORK_ITEM);
		if (rc)
			return rc;
		/* The wait on a signal word (fi_xpu_signal_wait_until), with
		 * what is left of the timeout and the endpoint's abort hook. */
		rc = fi_xpu_signal_wait_until(fi_xpu_world_route_ep(wd, fi_xpu_world_amo_route(ctl, to)),
					      word, FI_XPU_CMP_GE, epoch,
					      fi_xpu_i_world_left_ms(start, timeout_ms),
					      FI_XPU_WORK_ITEM);
		if (rc)
			return rc;
	}
	fi_xpu_arch_store_u64(epoch_p, epoch, FI_XPU_ARCH_RELAXED, FI_XPU_ARCH_MS_SYSTEM);
	return 0;
}

FI_XPU_FUNC int fi_xpu_world_barrier(const struct fi_xpu_world_dev *wd, int timeout_ms, int scope)
{
	struct fi_xpu_group g;
	int64_t r = 0;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_world_barrier");
	if (rc)
		return rc;
	/* Every member's earlier operations are posted before the leader's
	 * quiet counts them. */
	fi_xpu_group_sync(&g);
	if (fi_xpu_group_leader(&g))
		r = fi_xpu_i_world_barrier(wd, timeout_ms);
	r = fi_xpu_group_share(&g, r);
	return fi_xpu_group_leave(&g, (int)r);
}

#endif /* FI_XPU_INCLUDED_DEVICE_WORLD_H */
