/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: completions written: CQ ring entries,
 * overrun reports, remote completions taken in, counters.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_COMPLETE_H
#define FI_XPU_INCLUDED_SHM_SHM_COMPLETE_H

#include <fi_xpu/shm/shm__base.h>

/* ---- completion queues ------------------------------------------------- */
struct fi_xpu_shm_cqe_in {
	uint64_t flags, context, len, buf, data, tag, olen, src_nonce, src_ep;
	int64_t err;
	/* Remote completions: stamped under `key` (non-NULL) for the ring at
	 * heap offset `roff` of the receiver, which knows us as `src_conn`. */
	const uint64_t *key;
	uint64_t src_conn, roff;
};

FI_XPU_FUNC struct fi_xpu_shm_cqe_in fi_xpu_shm_cqe_zero(void)
{
	struct fi_xpu_shm_cqe_in in;
	in.flags = in.context = in.len = in.buf = in.data = in.tag = 0;
	in.olen = in.src_nonce = in.src_ep = 0;
	in.err = 0;
	in.key = FI_XPU_I_NULL;
	in.src_conn = in.roff = 0;
	return in;
}

/* Entry `pos` of a ring of `size` entries (a power of two): the entries
 * follow the 192-byte header, so they are 8-byte aligned. */
FI_XPU_FUNC struct fi_xpu_shm_cqe *fi_xpu_shm_ring_entry(struct fi_xpu_shm_cq_ring *r, uint64_t size,
							  uint64_t pos)
{
	return (struct fi_xpu_shm_cqe *)(void *)((unsigned char *)r + FI_XPU_SHM_CQ_HDR) +
	       (pos & (size - 1));
}

/* Publishes `in` at position `h` of a ring of `size` entries, claimed. */
FI_XPU_FUNC void fi_xpu_shm_ring_fill(struct fi_xpu_shm_cq_ring *r, uint64_t size, uint64_t h,
				      const struct fi_xpu_shm_cqe_in *in)
{
	struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(r, size, h);
	e->flags = in->flags;
	e->context = in->context;
	e->len = in->len;
	e->buf = in->buf;
	e->data = in->data;
	e->tag = in->tag;
	e->err = in->err;
	e->olen = in->olen;
	e->src_nonce = in->src_nonce;
	e->src_ep = in->src_ep;
	e->is_err = in->err != 0;
	e->src_conn = in->src_conn;
	e->stamp = in->key ? fi_xpu_shm_cqe_stamp(in->key, h, in->roff, in->src_ep, in->len, in->data)
			   : 0;
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_st(&e->seq, h + 1));
}

/* fi_xpu_shm_ring_put when the ring looked full or its head kept moving:
 * out of line, with every bounded retry. */
FI_XPU_NOINLINE_FUNC int fi_xpu_shm_ring_put_full(struct fi_xpu_shm_cq_ring *r, uint64_t size,
						  const struct fi_xpu_shm_cqe_in *in,
						  int count_overflow)
{
	uint64_t h, t;
	int moved = 0;
	for (;;) {
		/* The tail first: the head, read after it, is never behind
		 * it. Read the other way round, readers could take entries
		 * pushed after our head was read, and the ring would look
		 * full (h - t wraps) with room in it. */
		t = fi_xpu_shm_ld(&r->tail);
		h = fi_xpu_shm_ld(&r->head);
		if (h - t >= size) {
			/* Full unless a reader made room since (a few times
			 * at most: a peer that keeps moving the tail of a ring
			 * it can write gains nothing by it). */
			if (fi_xpu_shm_ld(&r->tail) != t && ++moved < 64)
				continue;
			/* Nobody waits for room: the loss is counted, and the
			 * reader reports it as an FI_EOVERRUN entry. */
			if (count_overflow)
				FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_add(&r->overflow, 1));
			return -FI_EAGAIN;
		}
		if (fi_xpu_shm_cas(&r->head, h, h + 1))
			break;
	}
	fi_xpu_shm_ring_fill(r, size, h, in);
	return 0;
}

/* Claims a slot of a ring with `size` entries (a power of two) and
 * publishes `in`; -FI_EAGAIN when the ring is full. One load, the tail
 * (acquire: the reader that moved it is done with the slots behind it);
 * the head is what the claim's compare-and-swap finds, first guessed
 * equal to the tail (an empty ring, the common case), never behind it.
 * A ring that looks full, or a head that keeps moving, takes the out of
 * line path above. */
FI_XPU_FUNC int fi_xpu_shm_ring_put(struct fi_xpu_shm_cq_ring *r, uint64_t size,
				    const struct fi_xpu_shm_cqe_in *in, int count_overflow)
{
	uint64_t t = fi_xpu_shm_ld(&r->tail), h = t, old;
	int n;
	for (n = 0; n < 4 && h - t < size; n++) {
		old = fi_xpu_arch_cas_u64(&r->head, h, h + 1, FI_XPU_ARCH_ACQ_REL, FI_XPU_SHM_SYS);
		if (old == h) {
			fi_xpu_shm_ring_fill(r, size, h, in);
			return 0;
		}
		h = old;
	}
	return fi_xpu_shm_ring_put_full(r, size, in, count_overflow);
}

FI_XPU_FUNC int fi_xpu_shm_ring_push(struct fi_xpu_shm_cq_ring *r, uint64_t size,
				     const struct fi_xpu_shm_cqe_in *in)
{
	return fi_xpu_shm_ring_put(r, size, in, 1);
}

/* Completions lost to a full ring since the last report become one error
 * entry (err FI_EOVERRUN, olen the number lost) as soon as there is room
 * for it, and rings `bell` (fi_xpu_shm_ring_bell). Run by the ring's reader. */
FI_XPU_FUNC void fi_xpu_shm_report_overrun_rung(struct fi_xpu_shm_cq_ring *r, uint64_t size,
						uint64_t *bell)
{
	/* What was reported first: the count, read after it, is never behind
	 * it. Read the other way round, another reader's report between the
	 * two reads would let this one move the reported count back, and
	 * report ov - seen wrapped (2^64 - 1 completions lost). */
	uint64_t seen = fi_xpu_shm_poll(&r->overflow_seen), ov = fi_xpu_shm_poll(&r->overflow);
	struct fi_xpu_shm_cqe_in in;
	if (ov == seen)
		return;
	fi_xpu_shm_acq();
	if (!fi_xpu_shm_cas(&r->overflow_seen, seen, ov))
		return;
	in = fi_xpu_shm_cqe_zero();
	in.err = -FI_EOVERRUN;
	in.olen = ov - seen;
	if (fi_xpu_shm_ring_put(r, size, &in, 0) != 0)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_add(&r->overflow_seen, (uint64_t)0 - (ov - seen)));
	else
		fi_xpu_shm_ring_bell(bell, FI_XPU_SHM_SYS);
}

/* The same for a ring without a bell. */
FI_XPU_FUNC void fi_xpu_shm_report_overrun(struct fi_xpu_shm_cq_ring *r, uint64_t size)
{
	fi_xpu_shm_report_overrun_rung(r, size, FI_XPU_I_NULL);
}

/* The map (private to this process) of connection `conn` of the context
 * whose device root is `cx`; 0 when there is none. */
FI_XPU_FUNC const struct fi_xpu_shm_peer_map *fi_xpu_shm_conn_map(uint64_t cx, uint64_t conn)
{
	const struct fi_xpu_shm_ctx_dev *c = FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, cx);
	if (!c || conn >= FI_XPU_SHM_MAX_CONNS)
		return FI_XPU_I_NULL;
	return FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, fi_xpu_shm_ld(&c->maps[conn]));
}

/* Moves the remote completions peers pushed into the CQ's shared ring to
 * its private one. Of each entry only what a remote completion carries
 * (length, CQ data, source) is kept; flags are set here and context and
 * buffer are none, so a peer can never publish a completion of any other
 * kind, and a CQ that takes no remote events has no ring peers can reach.
 * An entry whose stamp the connection it names did not make is refused;
 * the source of the others is that connection's attested peer.
 * Overflows of the shared ring carry over as overflows of the private one. */
FI_XPU_FUNC void fi_xpu_shm_cq_take_remote(struct fi_xpu_shm_cq_dev *q)
{
	/* Set once by the host, before peers can push: read relaxed, as the
	 * words below, and fenced once when an entry or overflow is there. */
	struct fi_xpu_shm_cq_ring *rr = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, fi_xpu_shm_poll(&q->rring));
	struct fi_xpu_shm_cq_ring *r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring);
	uint64_t ov, seen, *bell = FI_XPU_SHM_P(uint64_t, q->bell);
	int moved = 0;
	if (!rr)
		return;
	for (;;) {
		uint64_t t = fi_xpu_shm_poll(&q->rtail);
		struct fi_xpu_shm_cqe *e = fi_xpu_shm_ring_entry(rr, q->size, t);
		struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
		const struct fi_xpu_shm_peer_map *map;
		uint64_t conn, stamp;
		if (fi_xpu_shm_poll(&e->seq) != t + 1)
			break;
		fi_xpu_shm_acq();
		in.flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
		in.len = fi_xpu_shm_ldr(&e->len);
		in.data = fi_xpu_shm_ldr(&e->data);
		in.src_ep = fi_xpu_shm_ldr(&e->src_ep);
		conn = fi_xpu_shm_ldr(&e->src_conn);
		stamp = fi_xpu_shm_ldr(&e->stamp);
		/* Claimed by this reader: the copy above is the entry. */
		if (!fi_xpu_shm_cas(&q->rtail, t, t + 1))
			continue;
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_st(&rr->tail, t + 1));
		map = fi_xpu_shm_conn_map(q->ctx, conn);
		if (!map || (in.src_ep >> 32) || in.len)
			continue; /* not made by the peer it names: refused */
		if (fi_xpu_shm_cqe_stamp(map->key, t, q->roff, in.src_ep, in.len, in.data) == stamp)
			in.src_nonce = fi_xpu_shm_ld(&map->nonce);
		else if (fi_xpu_shm_cqe_stamp(map->prev_key, t, q->roff, in.src_ep, in.len, in.data) ==
			 stamp)
			in.src_nonce = fi_xpu_shm_ld(&map->prev_nonce); /* a departed peer's */
		else
			continue;
		(void)fi_xpu_shm_ring_push(r, q->size, &in);
		moved = 1;
	}
	/* As in fi_xpu_shm_report_overrun: what was carried over first. */
	seen = fi_xpu_shm_poll(&q->rseen);
	ov = fi_xpu_shm_poll(&rr->overflow);
	if (ov != seen) {
		fi_xpu_shm_acq();
		/* A rewound or absurd count is a peer's scribble:
		 * resynchronised, never reported. */
		if (fi_xpu_shm_cas(&q->rseen, seen, ov) && ov - seen < (1ULL << 32)) {
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CQ, fi_xpu_shm_add(&r->overflow, ov - seen));
			moved = 1;
		}
	}
	/* What moved into the private ring is an event of its own: another
	 * reader may have found both rings empty in between. */
	if (moved)
		fi_xpu_shm_ring_bell(bell, FI_XPU_SHM_SYS);
}

FI_XPU_FUNC int fi_xpu_shm_cq_push(uint64_t cq_dev, const struct fi_xpu_shm_cqe_in *in)
{
	struct fi_xpu_shm_cq_dev *q = FI_XPU_SHM_P(struct fi_xpu_shm_cq_dev, cq_dev);
	int rc;
	if (!q)
		return 0;
	rc = fi_xpu_shm_ring_push(FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, q->ring), q->size, in);
	/* An entry, or an overflow counted: either way the reader has work. */
	fi_xpu_shm_ring_bell(FI_XPU_SHM_P(uint64_t, q->bell), FI_XPU_SHM_SYS);
	return rc;
}

/* Local completion of an initiator operation, or its error, plus counters. */
FI_XPU_FUNC void fi_xpu_shm_complete(struct fi_xpu_shm_ep_dev *ep, int cntr, uint64_t flags,
				     void *context, size_t len, int err)
{
	struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
	uint64_t *c = FI_XPU_SHM_P(uint64_t, ep->cntr[cntr]);
	in.flags = flags;
	in.context = (uint64_t)(uintptr_t)context;
	in.len = err ? 0 : len;
	in.olen = err ? len : 0;
	in.err = err;
	/* The counter first: whoever reads the completion also sees it counted. */
	if (c)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(err ? c + 1 : c, 1));
	(void)fi_xpu_shm_cq_push(ep->tx_cq, &in);
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_COMPLETE_H */
