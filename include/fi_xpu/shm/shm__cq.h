/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: CQ reads: sources, the idle check, reads
 * and error reads.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_CQ_H
#define FI_XPU_INCLUDED_SHM_SHM_CQ_H

#include <fi_xpu/shm/shm__msg.h>

/* ---- CQ reads ----------------------------------------------------------- */
FI_XPU_FUNC uint64_t fi_xpu_shm_src(const struct fi_xpu_shm_cq_dev *q, uint64_t nonce, uint64_t ep)
{
	uint64_t i, j;
	for (i = 0; i < q->nprog; i++) {
		const struct fi_xpu_shm_ep_dev *e = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_dev, q->prog[i]);
		const struct fi_xpu_shm_av_ent *t = FI_XPU_SHM_P(const struct fi_xpu_shm_av_ent, e->av_tab);
		for (j = 0; t && j < e->av_count; j++)
			if (fi_xpu_shm_ldr(&t[j].ep_id) == ep && fi_xpu_shm_ldr(&t[j].nonce) == nonce)
				return j;
	}
	return FI_ADDR_NOTAVAIL;
}

/* Whether a CQ read would find nothing: no endpoint it progresses has an
 * arrival or a transfer under way (fi_xpu_shm_ep_idle), and neither its
 * own ring nor the ring peers push remote completions into has an entry or
 * an unreported overflow. Relaxed loads only, no fence, no lock, no
 * atomic: what an empty poll costs, inlined into the caller's loop, while
 * the read itself (fi_xpu_shm_cq_read_work) stays out of line. */
FI_XPU_FUNC int fi_xpu_shm_cq_idle(const struct fi_xpu_shm_cq_dev *q)
{
	struct fi_xpu_shm_cq_ring *r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
	struct fi_xpu_shm_cq_ring *rr = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, fi_xpu_shm_poll(&q->rring));
	uint64_t i, t;
	for (i = 0; i < q->nprog && i < FI_XPU_SHM_MAX_PROGRESS; i++)
		if (!fi_xpu_shm_ep_idle(FI_XPU_SHM_P(const struct fi_xpu_shm_ep_dev, q->prog[i])))
			return 0;
	t = fi_xpu_shm_poll(&r->tail);
	if (fi_xpu_shm_poll(&fi_xpu_shm_ring_entry(r, q->size, t)->seq) == t + 1 ||
	    fi_xpu_shm_poll(&r->overflow) != fi_xpu_shm_poll(&r->overflow_seen))
		return 0;
	if (!rr)
		return 1;
	t = fi_xpu_shm_poll(&q->rtail);
	return fi_xpu_shm_poll(&fi_xpu_shm_ring_entry(rr, q->size, t)->seq) != t + 1 &&
	       fi_xpu_shm_poll(&rr->overflow) == fi_xpu_shm_poll(&q->rseen);
}

/* The leader's CQ read once fi_xpu_shm_cq_idle saw something. */
FI_XPU_POLL_WORK_FUNC int64_t fi_xpu_shm_cq_read_work(struct fi_xpu_shm_cq_dev *q, void *buf,
						     size_t count, uint64_t *src_addr)
{
	struct fi_xpu_shm_cq_ring *r;
	size_t n = 0, esz;
	uint64_t i;
	int64_t rc = 0;
	{
		r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
		esz = q->format == FI_CQ_FORMAT_CONTEXT ? sizeof(struct fi_cq_entry)
		    : q->format == FI_CQ_FORMAT_MSG    ? sizeof(struct fi_cq_msg_entry)
		    : q->format == FI_CQ_FORMAT_DATA   ? sizeof(struct fi_cq_data_entry)
						       : sizeof(struct fi_cq_tagged_entry);
		for (i = 0; i < q->nprog; i++)
			fi_xpu_shm_progress(FI_XPU_SHM_P(struct fi_xpu_shm_ep_dev, q->prog[i]));
		fi_xpu_shm_cq_take_remote(q);
		fi_xpu_shm_report_overrun_rung(r, q->size, FI_XPU_SHM_P(uint64_t, q->bell));
		while (n < count) {
			uint64_t t = fi_xpu_shm_poll(&r->tail);
			struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(r, q->size, t);
			struct fi_cq_tagged_entry out;
			int claimed;
			/* Two relaxed words when the ring is empty; one
			 * acquire fence for an entry. */
			if (fi_xpu_shm_poll(&e->seq) != t + 1)
				break;
			fi_xpu_shm_acq();
			if (e->is_err) {
				if (n == 0)
					rc = -FI_EAVAIL;
				break;
			}
			out.op_context = FI_XPU_SHM_P(void, e->context);
			out.flags = e->flags;
			out.len = (size_t)e->len;
			out.buf = FI_XPU_SHM_P(void, e->buf);
			out.data = e->data;
			out.tag = e->tag;
			if (src_addr)
				src_addr[n] = fi_xpu_shm_src(q, e->src_nonce, e->src_ep);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, claimed = fi_xpu_shm_cas(&r->tail, t, t + 1));
			if (!claimed)
				continue;
			fi_xpu_shm_copy((unsigned char *)buf + n * esz, &out, esz);
			n++;
		}
		if (rc == 0)
			rc = n ? (int64_t)n : -FI_EAGAIN;
	}
	return rc;
}

/* The leader's CQ read once the bell rang since the CQ was last found
 * idle (or it has none): the handle checked, the bell read with acquire,
 * the full read; when it found nothing and the CQ is idle after it, the
 * bell's value goes to `bseen`, unless another reader or the host changed
 * that since it read `seen`. */
FI_XPU_POLL_WORK_FUNC int64_t fi_xpu_shm_cq_read_rung(const struct fid_xpu_cq *hcq, void *buf,
						     size_t count, uint64_t *src_addr,
						     uint64_t seen)
{
	struct fi_xpu_shm_cq_dev *q = fi_xpu_shm_cq(hcq);
	uint64_t *bell, rung = 0;
	int64_t rc;
	int idle;
	if (!q || (!buf && count))
		return -FI_EINVAL;
	bell = FI_XPU_SHM_P(uint64_t, q->bell);
	if (bell)
		rung = fi_xpu_shm_ld(bell);
	idle = fi_xpu_shm_cq_idle(q);
	rc = idle ? -FI_EAGAIN : fi_xpu_shm_cq_read_work(q, buf, count, src_addr);
	if (bell && rc == -FI_EAGAIN && (idle || fi_xpu_shm_cq_idle(q)))
		(void)fi_xpu_shm_cas(&q->bseen, seen, rung);
	return rc;
}

/* A poll of a CQ whose bell did not ring since a read found it idle polls
 * two words, the bell and `bseen`, and returns -FI_EAGAIN. Before them it
 * reads, as plain loads, the handle's pointer to the CQ's block, the
 * block's validity word (a handle of another class, or a forged one, must
 * not lead to a load through whatever its block holds where a CQ keeps
 * its bell; only the host writes that word, at open and close) and the
 * bell's address. A closed CQ's `bseen` never matches: the read above
 * checks the validity word as a poll and reports it. */
FI_XPU_FUNC int64_t fi_xpu_shm_cq_read_any(const struct fid_xpu_cq *hcq, void *buf, size_t count,
					   uint64_t *src_addr, int scope)
{
	const struct fi_xpu_shm_cq_dev *q;
	const uint64_t *bell;
	uint64_t seen = 0;
	int64_t rc = 0;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	if (rank == 0) {
		q = hcq ? FI_XPU_SHM_P(const struct fi_xpu_shm_cq_dev, hcq->fid.prov_ctx)
			: FI_XPU_I_NULL;
		bell = q && q->magic == FI_XPU_HANDLE_WORD(FI_XPU_HANDLE_CQ, FI_XPU_HANDLE_LIVE)
			       ? FI_XPU_SHM_P(const uint64_t, q->bell)
			       : FI_XPU_I_NULL;
		if (bell && (buf || !count) &&
		    (seen = fi_xpu_shm_poll(&q->bseen)) == fi_xpu_shm_poll(bell))
			rc = -FI_EAGAIN;
		else
			rc = fi_xpu_shm_cq_read_rung(hcq, buf, count, src_addr, seen);
	}
	return fi_xpu_group_scope_bcast(scope, rc);
}

FI_XPU_FUNC int64_t fi_xpu_shm_cq_readerr_any(const struct fid_xpu_cq *hcq,
					      struct fi_cq_err_entry *buf, uint64_t flags, int scope)
{
	struct fi_xpu_shm_cq_dev *q;
	struct fi_xpu_shm_cq_ring *r;
	int64_t rc = -FI_EAGAIN;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	(void)flags;
	q = fi_xpu_shm_cq(hcq);
	if (!q || !buf)
		return -FI_EINVAL;
	if (rank == 0) {
		r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
		fi_xpu_shm_cq_take_remote(q);
		fi_xpu_shm_report_overrun_rung(r, q->size, FI_XPU_SHM_P(uint64_t, q->bell));
		for (;;) {
			uint64_t t = fi_xpu_shm_ld(&r->tail);
			struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(r, q->size, t);
			struct fi_cq_err_entry out;
			int claimed;
			if (fi_xpu_shm_ld(&e->seq) != t + 1 || !e->is_err)
				break;
			out.op_context = FI_XPU_SHM_P(void, e->context);
			out.flags = e->flags;
			out.len = (size_t)e->len;
			out.buf = FI_XPU_SHM_P(void, e->buf);
			out.data = e->data;
			out.tag = e->tag;
			out.olen = (size_t)e->olen;
			/* libfabric reports a positive errno here. */
			out.err = (int)-e->err;
			out.prov_errno = (int)e->err;
			out.err_data = FI_XPU_I_NULL;
			out.err_data_size = 0;
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, claimed = fi_xpu_shm_cas(&r->tail, t, t + 1));
			if (!claimed)
				continue;
			*buf = out;
			rc = 1;
			break;
		}
	}
	return fi_xpu_group_scope_bcast(scope, rc);
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_CQ_H */
