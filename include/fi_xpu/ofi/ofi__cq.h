/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu ofi provider, device side: completion queues: reads, error reads, waits.
 * Part of <fi_xpu/device_ofi.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_OFI_OFI_CQ_H
#define FI_XPU_INCLUDED_OFI_OFI_CQ_H

#include <fi_xpu/ofi/ofi__post.h>

/* ---- completion queues ------------------------------------------------ */
FI_XPU_FUNC size_t fi_xpu_ofi_entry_size(uint64_t format)
{
	return format == FI_CQ_FORMAT_MSG    ? sizeof(struct fi_cq_msg_entry)
	     : format == FI_CQ_FORMAT_DATA   ? sizeof(struct fi_cq_data_entry)
	     : format == FI_CQ_FORMAT_TAGGED ? sizeof(struct fi_cq_tagged_entry)
					     : sizeof(struct fi_cq_entry);
}

FI_XPU_FUNC struct fi_xpu_ofi_cqe *fi_xpu_ofi_cqe_at(struct fi_xpu_ofi_cq_dev *q, uint64_t pos)
{
	return FI_XPU_OFI_P(struct fi_xpu_ofi_cqe, q->ring) + (pos & (q->size - 1));
}

/* Whether the CQ's next entry is not there yet: two relaxed words (the
 * head and that entry's sequence), no fence, inlined into the caller's
 * poll loop; the read itself (fi_xpu_ofi_cq_read_work) is out of line. */
FI_XPU_FUNC int fi_xpu_ofi_cq_empty(struct fi_xpu_ofi_cq_dev *q)
{
	uint64_t h = fi_xpu_ofi_poll(&q->head);
	return fi_xpu_ofi_poll(&fi_xpu_ofi_cqe_at(q, h)->seq) != h + 1;
}

FI_XPU_POLL_WORK_FUNC int64_t fi_xpu_ofi_cq_read_work(struct fi_xpu_ofi_cq_dev *q, void *buf,
						     size_t count, uint64_t *src_addr)
{
	size_t n = 0, esz;
	int64_t rc = 0;
	{
		esz = fi_xpu_ofi_entry_size(q->format);
		while (n < count) {
			uint64_t h = fi_xpu_ofi_poll(&q->head), seen;
			struct fi_xpu_ofi_cqe *e = fi_xpu_ofi_cqe_at(q, h);
			struct fi_cq_tagged_entry out;
			uint64_t src;
			/* Two relaxed words when empty; one fence for an entry. */
			if (fi_xpu_ofi_poll(&e->seq) != h + 1)
				break;
			fi_xpu_ofi_acq();
			if (e->is_err) {
				if (n == 0)
					rc = -FI_EAVAIL;
				break;
			}
			out.op_context = FI_XPU_OFI_P(void, e->context);
			out.flags = e->flags;
			out.len = (size_t)e->len;
			out.buf = FI_XPU_OFI_P(void, e->buf);
			out.data = e->data;
			out.tag = e->tag;
			src = e->src;
			/* Hands the slot back to the proxy; release only:
			 * the fence above ordered the entry's reads. */
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ,
					 seen = fi_xpu_arch_cas_u64(&q->head, h, h + 1,
								    FI_XPU_ARCH_RELEASE, FI_XPU_OFI_SYS));
			if (seen != h)
				continue;
			fi_xpu_ofi_copy_bytes((unsigned char *)buf + n * esz, &out, esz);
			if (src_addr)
				src_addr[n] = src;
			n++;
		}
		if (rc == 0)
			rc = n ? (int64_t)n : -FI_EAGAIN;
	}
	return rc;
}

/* CQ reads, for one work item (the leader of a group). */
FI_XPU_FUNC int64_t fi_xpu_ofi_cq_read_item(const struct fid_xpu_cq *hcq, void *buf, size_t count,
					    uint64_t *src_addr)
{
	struct fi_xpu_ofi_cq_dev *q = fi_xpu_ofi_cq(hcq);
	if (!q || (!buf && count))
		return -FI_EINVAL;
	if (count == 0 || fi_xpu_ofi_cq_empty(q))
		return -FI_EAGAIN;
	return fi_xpu_ofi_cq_read_work(q, buf, count, src_addr);
}

FI_XPU_FUNC int64_t fi_xpu_ofi_cq_readerr_item(const struct fid_xpu_cq *cq, void *buf)
{
	struct fi_xpu_ofi_cq_dev *q;
	struct fi_cq_err_entry *out = (struct fi_cq_err_entry *)buf;
	int64_t rc;
	q = fi_xpu_ofi_cq(cq);
	if (!q || !out)
		return -FI_EINVAL;
	rc = -FI_EAGAIN;
	{
		for (;;) {
			uint64_t h = fi_xpu_ofi_poll(&q->head), seen;
			struct fi_xpu_ofi_cqe *e = fi_xpu_ofi_cqe_at(q, h);
			struct fi_cq_err_entry o;
			if (fi_xpu_ofi_poll(&e->seq) != h + 1)
				break;
			fi_xpu_ofi_acq();
			if (!e->is_err)
				break;
			o.op_context = FI_XPU_OFI_P(void, e->context);
			o.flags = e->flags;
			o.len = (size_t)e->len;
			o.buf = FI_XPU_OFI_P(void, e->buf);
			o.data = e->data;
			o.tag = e->tag;
			o.olen = (size_t)e->olen;
			/* libfabric reports a positive errno here. */
			o.err = (int)-e->err;
			o.prov_errno = e->prov_errno ? (int)e->prov_errno : (int)e->err;
			o.err_data = FI_XPU_I_NULL;
			o.err_data_size = 0;
			/* Hands the slot back to the proxy; release only:
			 * the fence above ordered the entry's reads. */
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ,
					 seen = fi_xpu_arch_cas_u64(&q->head, h, h + 1,
								    FI_XPU_ARCH_RELEASE, FI_XPU_OFI_SYS));
			if (seen != h)
				continue;
			*out = o;
			rc = 1;
			break;
		}
	}
	return rc;
}

/* Blocking read: waits until `threshold` entries (at least one, at most
 * `count`) were read or an error entry is next, for at most the CQ's
 * timeout (negative: no limit); -FI_ETIMEDOUT when nothing came. */
FI_XPU_FUNC int64_t fi_xpu_ofi_cq_sread_item(const struct fid_xpu_cq *cq, void *buf, size_t count,
					     void *src_addr, uint64_t threshold)
{
	const struct fi_xpu_ofi_cq_dev *q = fi_xpu_ofi_cq(cq);
	if (!q || (!buf && count))
		return -FI_EINVAL;
	FI_XPU_GROUP_SREAD(fi_xpu_ofi_cq_read_item, cq, buf, count, src_addr, threshold,
			   q->timeout_ms, fi_xpu_ofi_entry_size(q->format), q->abort);
}

FI_XPU_FUNC int64_t fi_xpu_ofi_cq_readerr_flags(const struct fid_xpu_cq *cq, void *buf,
						uint64_t flags)
{
	(void)flags;
	return fi_xpu_ofi_cq_readerr_item(cq, buf);
}

/* A group reads a CQ once: the leader reads into the buffer the group
 * shares and every member gets the leader's count or error. */
FI_XPU_GROUP_CQ_ENTRY_POINTS(ofi, fi_xpu_ofi_cq_read_item, fi_xpu_ofi_cq_readerr_flags,
			     fi_xpu_ofi_cq_sread_item)

#endif /* FI_XPU_INCLUDED_OFI_OFI_CQ_H */
