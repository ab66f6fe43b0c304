/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: the provider entry points of
 * <fi_xpu/device.h> for endpoints and CQs, per scope group.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_ENTRY_H
#define FI_XPU_INCLUDED_SHM_SHM_ENTRY_H

#include <fi_xpu/shm/shm__signal.h>

/* ---- the provider entry points of fi_xpu_device.h -----------------------
 * Every member of the scope group issues its own operation with its own
 * arguments (the work-item path above) and gets its own status; the group
 * leaves together, once every member's operation was issued. CQ reads and
 * flushes have one shared destination: the leader serves them and the
 * group gets its result. The cooperative single transfers
 * (fi_xpu_coop_write & co.) run the group paths above: one operation with
 * the leader's arguments, its copy shared by the members. */
#define FI_XPU_SHM_EACH_ITEM(scope, call, expr)                                          \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int rc_ = fi_xpu_group_enter(&g_, scope, call);                          \
		if (rc_)                                                                 \
			return rc_;                                                      \
		rc_ = (expr);                                                            \
		return fi_xpu_group_leave(&g_, rc_);                                     \
	} while (0)

/* As FI_XPU_SHM_EACH_ITEM, with the common argument checks of
 * fi_xpu/device_check.h first: a refused member still takes part. */
#define FI_XPU_SHM_EACH_CHECKED(scope, call, check, expr)                                \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int rc_ = fi_xpu_group_enter(&g_, scope, call);                          \
		if (rc_)                                                                 \
			return rc_;                                                      \
		rc_ = (check);                                                           \
		if (!rc_)                                                                \
			rc_ = (expr);                                                    \
		return fi_xpu_group_leave(&g_, rc_);                                     \
	} while (0)

#define FI_XPU_SHM_COOP(scope, call, expr)                                               \
	do {                                                                             \
		struct fi_xpu_group g_;                                                  \
		int rc_ = fi_xpu_group_enter(&g_, scope, call);                          \
		if (rc_)                                                                 \
			return rc_;                                                      \
		return (expr);                                                           \
	} while (0)

FI_XPU_FUNC int fi_xpu_write_shm(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t addr, uint64_t key,
				 void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_write", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_WRITE_FLAGS),
			     fi_xpu_shm_rma(ep, 1, (void *)(uintptr_t)buf, len, dest_addr, addr, key,
					    data, flags, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_read_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, uint64_t addr, uint64_t key, void *context,
				uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_read", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_READ_FLAGS),
			     fi_xpu_shm_rma(ep, 0, buf, len, src_addr, addr, key, 0,
					    flags & ~FI_REMOTE_CQ_DATA, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_send_shm(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				uint64_t data, void *dest_addr, void *context, uint64_t flags,
				int scope)
{
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_send", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS),
			     fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, 0, data,
						 flags & ~FI_TAGGED, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_tsend_shm(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
				 uint64_t data, void *dest_addr, uint64_t tag, void *context,
				 uint64_t flags, int scope)
{
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_tsend", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_SEND_FLAGS),
			     fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, tag, data,
						 flags | FI_TAGGED, context, FI_XPU_WORK_ITEM));
}

/* A NULL src_addr matches any source; otherwise only messages from that
 * raw address (FI_DIRECTED_RECV semantics). */
FI_XPU_FUNC int fi_xpu_recv_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				void *src_addr, void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_recv", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS),
			     fi_xpu_shm_recv_any(ep, buf, len, src_addr, 0, 0, flags & ~FI_TAGGED,
						 context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_trecv_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				 void *src_addr, uint64_t tag, uint64_t ignore, void *context,
				 uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_trecv", fi_xpu_device_check_flags(flags, FI_XPU_DEVICE_RECV_FLAGS),
			     fi_xpu_shm_recv_any(ep, buf, len, src_addr, tag, ignore,
						 flags | FI_TAGGED, context, FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_atomic_shm(struct fid_xpu_ep *ep, const void *buf, size_t count,
				  void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				  int datatype, int op, void *context,
				  uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_atomic", fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_ATOMIC_FLAGS, count, addr, (int)datatype, 0),
			     op == FI_ATOMIC_READ || (op >= FI_CSWAP && op <= FI_MSWAP)
				     ? -FI_EINVAL
				     : fi_xpu_shm_atomic_any(ep, buf, count, FI_XPU_I_NULL,
							     FI_XPU_I_NULL, dest_addr, addr, key,
							     (int)datatype, (int)op, flags, context,
							     FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_fetch_atomic_shm(struct fid_xpu_ep *ep, const void *buf, size_t count,
					void *desc, void *result, void *result_desc,
					void *dest_addr, uint64_t addr, uint64_t key,
					int datatype, int op, void *context,
					uint64_t flags, int scope)
{
	(void)desc;
	(void)result_desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_fetch_atomic", fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr, (int)datatype, !result),
			     op >= FI_CSWAP && op <= FI_MSWAP
				     ? -FI_EINVAL
				     : fi_xpu_shm_atomic_any(ep, buf, count, FI_XPU_I_NULL, result,
							     dest_addr, addr, key, (int)datatype,
							     (int)op, flags, context,
							     FI_XPU_WORK_ITEM));
}

FI_XPU_FUNC int fi_xpu_compare_atomic_shm(struct fid_xpu_ep *ep, const void *buf, size_t count,
					  void *desc, const void *compare, void *compare_desc,
					  void *result, void *result_desc, void *dest_addr,
					  uint64_t addr, uint64_t key, int datatype,
					  int op, void *context, uint64_t flags, int scope)
{
	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_compare_atomic", fi_xpu_device_check_atomic(flags, FI_XPU_DEVICE_FETCH_FLAGS, count, addr, (int)datatype, !result || !compare),
			     op < FI_CSWAP || op > FI_MSWAP
				     ? -FI_EINVAL
				     : fi_xpu_shm_atomic_any(ep, buf, count, compare, result,
							     dest_addr, addr, key, (int)datatype,
							     (int)op, flags, context,
							     FI_XPU_WORK_ITEM));
}

/* The cooperative single transfers: see fi_xpu_device.h. */
#define FI_XPU_DEVICE_COOP_shm ~, 1

FI_XPU_FUNC int fi_xpu_coop_write_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, uint64_t data, void *dest_addr, uint64_t addr,
				      uint64_t key, void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_write",
			fi_xpu_shm_rma(ep, 1, (void *)(uintptr_t)buf, len, dest_addr, addr, key,
				       data, flags, context, scope));
}

FI_XPU_FUNC int fi_xpu_coop_read_shm(struct fid_xpu_ep *ep, void *buf, size_t len, void *desc,
				     void *src_addr, uint64_t addr, uint64_t key, void *context,
				     uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_read",
			fi_xpu_shm_rma(ep, 0, buf, len, src_addr, addr, key, 0,
				       flags & ~FI_REMOTE_CQ_DATA, context, scope));
}

FI_XPU_FUNC int fi_xpu_coop_send_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				     void *desc, uint64_t data, void *dest_addr, void *context,
				     uint64_t flags, int scope)
{
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_send",
			fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, 0, data,
					    flags & ~FI_TAGGED, context, scope));
}

FI_XPU_FUNC int fi_xpu_coop_tsend_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, uint64_t data, void *dest_addr, uint64_t tag,
				      void *context, uint64_t flags, int scope)
{
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_tsend",
			fi_xpu_shm_send_any(ep, buf, len, desc, dest_addr, tag, data,
					    flags | FI_TAGGED, context, scope));
}

/* Data operations are complete when they return, so a system-scope fence
 * is all that is left; progress also reports rendezvous sends the peers
 * have pulled. */
FI_XPU_FUNC int fi_xpu_flush_shm(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	struct fi_xpu_group g;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_flush");
	(void)flags;
	if (rc)
		return rc;
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_SHM_SYS);
	fi_xpu_group_sync(&g);
	if (fi_xpu_group_leader(&g))
		fi_xpu_shm_progress(fi_xpu_shm_ep(ep));
	return fi_xpu_group_leave(&g, fi_xpu_shm_ep(ep) ? 0 : -FI_EINVAL);
}

/* The ordered-signalling extensions of fi_xpu/device.h. */
#define FI_XPU_DEVICE_SIGNAL_shm ~, 1

FI_XPU_FUNC int fi_xpu_put_signal_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *desc, void *dest_addr, uint64_t addr, uint64_t key,
				      uint64_t sig_addr, uint64_t sig_key, uint64_t signal,
				      int sig_op, void *context, uint64_t flags, int scope)
{
	(void)desc;
	FI_XPU_SHM_EACH_CHECKED(scope, "fi_xpu_put_signal",
				fi_xpu_device_check_put_signal(flags, sig_addr, sig_op),
				fi_xpu_shm_put_signal_item(ep, buf, len, dest_addr, addr, key, sig_addr,
							   sig_key, signal, sig_op, context));
}

/* The cooperative put-with-signal: one for the group, its copy shared. The
 * public call checked the flags and the signal operation. */
#define FI_XPU_DEVICE_COOP_SIGNAL_shm ~, 1

FI_XPU_FUNC int fi_xpu_coop_put_signal_shm(struct fid_xpu_ep *ep, const void *buf, size_t len,
					   void *desc, void *dest_addr, uint64_t addr,
					   uint64_t key, uint64_t sig_addr, uint64_t sig_key,
					   uint64_t signal, int sig_op, void *context,
					   uint64_t flags, int scope)
{
	(void)desc;
	(void)flags;
	FI_XPU_SHM_COOP(scope, "fi_xpu_coop_put_signal",
			fi_xpu_shm_put_signal_group(ep, buf, len, dest_addr, addr, key, sig_addr,
						    sig_key, signal, sig_op, context, scope));
}

/* Every operation has placed its data when it returns: ordering later ones
 * after earlier ones needs only a system-scope fence. */
FI_XPU_FUNC int fi_xpu_fence_shm(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	struct fi_xpu_group g;
	int rc = fi_xpu_group_enter(&g, scope, "fi_xpu_fence");
	(void)flags;
	if (rc)
		return rc;
	fi_xpu_arch_fence(FI_XPU_ARCH_SEQ_CST, FI_XPU_SHM_SYS);
	return fi_xpu_group_leave(&g, fi_xpu_shm_ep(ep) ? 0 : -FI_EINVAL);
}

/* Complete means what fi_xpu_flush waits for. */
FI_XPU_FUNC int fi_xpu_quiet_shm(struct fid_xpu_ep *ep, uint64_t flags, int scope)
{
	return fi_xpu_flush_shm(ep, flags, scope);
}

FI_XPU_FUNC void *fi_xpu_peer_ptr_shm(struct fid_xpu_ep *ep, void *dest_addr, uint64_t addr,
				      uint64_t key, size_t len)
{
	return fi_xpu_shm_peer_ptr_item(ep, dest_addr, addr, key, len);
}

FI_XPU_FUNC int64_t fi_xpu_shm_cq_read_item(const struct fid_xpu_cq *cq, void *buf, size_t count,
					    uint64_t *src_addr)
{
	return fi_xpu_shm_cq_read_any(cq, buf, count, src_addr, FI_XPU_WORK_ITEM);
}

FI_XPU_FUNC int64_t fi_xpu_shm_cq_readerr_item(const struct fid_xpu_cq *cq, void *buf,
					       uint64_t flags)
{
	return fi_xpu_shm_cq_readerr_any(cq, (struct fi_cq_err_entry *)buf, flags,
					 FI_XPU_WORK_ITEM);
}

/* Blocking read: waits until `threshold` entries (at least one, at most
 * `count`) have been read or an error entry is next, for at most the CQ's
 * timeout attribute (negative: no limit). -FI_ETIMEDOUT when nothing came. */
FI_XPU_FUNC int64_t fi_xpu_shm_cq_sread_item(const struct fid_xpu_cq *cq, void *buf, size_t count,
					     void *src_addr, uint64_t threshold)
{
	const struct fi_xpu_shm_cq_dev *q = fi_xpu_shm_cq(cq);
	if (!q || (!buf && count))
		return -FI_EINVAL;
	FI_XPU_GROUP_SREAD(fi_xpu_shm_cq_read_item, cq, buf, count, src_addr, threshold,
			   q->timeout_ms,
			   q->format == FI_CQ_FORMAT_CONTEXT ? sizeof(struct fi_cq_entry)
			   : q->format == FI_CQ_FORMAT_MSG   ? sizeof(struct fi_cq_msg_entry)
			   : q->format == FI_CQ_FORMAT_DATA  ? sizeof(struct fi_cq_data_entry)
							     : sizeof(struct fi_cq_tagged_entry),
			   q->abort);
}

/* The leader reads, every member gets its count or error. */
FI_XPU_GROUP_CQ_ENTRY_POINTS(shm, fi_xpu_shm_cq_read_item, fi_xpu_shm_cq_readerr_item,
			     fi_xpu_shm_cq_sread_item)

/* Counters: {value, errors} words private to the owner's process, plus,
 * for a counter bound for remote events, the words in the shared heap that
 * peers increment (fi_xpu/device_coop.h reads their sum), behind a local
 * device block; every work item of a scope may call these (reads are
 * idempotent, and updates are made once, by the scope's leader). */

#endif /* FI_XPU_INCLUDED_SHM_SHM_ENTRY_H */
