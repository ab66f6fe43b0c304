/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: messages: the send side (eager,
 * rendezvous, streamed), matching, delivery, streamed receives and sends,
 * progress, posted receives.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_MSG_H
#define FI_XPU_INCLUDED_SHM_SHM_MSG_H

#include <fi_xpu/shm/shm__inbox.h>

/* Defined below: a send that finds the inbox full drives its own receive
 * side first. */
FI_XPU_FUNC void fi_xpu_shm_progress(struct fi_xpu_shm_ep_dev *ep);

FI_XPU_FUNC int fi_xpu_shm_send_any(const struct fid_xpu_ep *hep, const void *buf, size_t len,
				    void *desc, const void *dest_addr, uint64_t tag, uint64_t data,
				    uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	struct fi_xpu_shm_target t = FI_XPU_SHM_NO_TARGET;
	struct fi_xpu_shm_msg *m = FI_XPU_I_NULL;
	uint64_t h = 0, tl, src_region = 0, src_off = 0, lane = 0;
	uint64_t cflags = FI_SEND | ((flags & FI_TAGGED) ? FI_TAGGED : FI_MSG);
	int64_t rc = 0;
	int large = 0, kind = 0, r = 0, locked = 0;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	if (!ep || (!buf && len))
		return -FI_EINVAL;
	/* FI_INJECT: the source must be copied before the call returns, which
	 * only an eager send does. */
	if ((flags & FI_INJECT) && len > FI_XPU_SHM_EAGER_MAX)
		return -FI_EMSGSIZE;
	if (rank == 0) {
		rc = fi_xpu_shm_target_of(ep, dest_addr, &t);
		if (rc == 0 && len > FI_XPU_SHM_EAGER_MAX) {
			const struct fi_xpu_shm_mr_desc *d = (const struct fi_xpu_shm_mr_desc *)desc;
			uint64_t a = (uint64_t)(uintptr_t)buf;
			large = 1;
			fi_xpu_shm_lock(ep, 1);
			locked = 1;
			for (r = 0; r < FI_XPU_SHM_MAX_POSTED; r++)
				if (ep->rdv[r].slot == 0)
					break;
			if (r == FI_XPU_SHM_MAX_POSTED) {
				rc = -FI_EAGAIN;
			} else if (d && a >= d->base && len <= d->len && a - d->base <= d->len - len) {
				/* Registered: the receiver pulls straight from it. */
				kind = FI_XPU_SHM_RDV_REG;
				src_region = d->region;
				src_off = a - d->base;
			} else {
				/* Unregistered: streamed through a staging lane,
				 * which peers map read-only. */
				for (lane = 0; lane < FI_XPU_SHM_STAGE_LANES; lane++)
					if (!(ep->lanes & (1ULL << lane)))
						break;
				if (lane == FI_XPU_SHM_STAGE_LANES) {
					rc = -FI_EAGAIN;
				} else {
					kind = FI_XPU_SHM_RDV_STREAM;
					src_region = ep->stage_region;
					src_off = ep->stage_off + lane * FI_XPU_SHM_STAGE_LANE_SIZE;
				}
			}
		}
		while (rc == 0) {
			/* The tail first, as in fi_xpu_shm_ring_put: otherwise
			 * a busy inbox can look full with room in it. */
			tl = fi_xpu_shm_ld_at(&t.ep->tail, t.ms);
			h = fi_xpu_shm_ld_at(&t.ep->head, t.ms);
			if (h - tl >= FI_XPU_SHM_INBOX_SLOTS) {
				rc = -FI_EAGAIN;
				break;
			}
			if (fi_xpu_shm_cas_at(&t.ep->head, h, h + 1, t.ms)) {
				m = fi_xpu_shm_slot(t.ep, h);
				break;
			}
		}
		if (rc == 0) {
			uint64_t mflags = (flags & (FI_TAGGED | FI_REMOTE_CQ_DATA)) |
					  (kind == FI_XPU_SHM_RDV_REG      ? FI_XPU_SHM_MSG_RDV
					   : kind == FI_XPU_SHM_RDV_STREAM ? FI_XPU_SHM_MSG_STREAM
									   : 0);
			struct fi_xpu_shm_msg_id id;
			m->state = FI_XPU_SHM_SLOT_NEW;
			m->len = len;
			m->tag = tag;
			m->data = data;
			m->flags = mflags;
			id.pos = h;
			id.ep_id = t.pa->ep_id;
			id.src_ep = ep->ep_id;
			id.flags = mflags;
			id.len = len;
			id.tag = tag;
			id.data = data;
			id.src_region = src_region;
			id.src_off = src_off;
			m->stamp = fi_xpu_shm_msg_stamp(t.pa->key, &id);
			m->pstamp = large ? 0 : fi_xpu_shm_bytes_stamp(t.pa->key, h, buf, len, buf, len);
			m->cstamp = 0;
			m->src_ep = ep->ep_id;
			m->src_conn = t.pa->conn_at_peer;
			m->src_gen = t.pa->conn_gen;
			m->src_region = src_region;
			m->src_off = src_off;
			m->produced = 0;
			m->consumed = 0;
		}
		if (rc == 0 && large) {
			/* The receiver finishes the transfer; our progress
			 * reports the send (and feeds a stream) until then. */
			struct fi_xpu_shm_rdv *q = &ep->rdv[r];
			q->context = (uint64_t)(uintptr_t)context;
			q->len = len;
			q->flags = cflags;
			q->buf = (uint64_t)(uintptr_t)buf;
			q->sent = 0;
			q->lane = lane;
			q->kind = (uint64_t)kind;
			q->map = (uint64_t)(uintptr_t)t.map;
			q->gen = t.pa->map_gen;
			q->pos = h;
			q->rep = t.pa->ep_id;
			q->key[0] = t.pa->key[0];
			q->key[1] = t.pa->key[1];
			q->acked = 0;
			q->cseen = 0;
			q->pst = 0;
			if (kind == FI_XPU_SHM_RDV_STREAM)
				ep->lanes |= 1ULL << lane;
			fi_xpu_shm_str(&ep->busy, 1);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&q->slot, (uint64_t)(uintptr_t)m));
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st_at(&m->seq, h + 1, t.ms));
			/* The receiver's CQs, and ours: this endpoint is busy. */
			fi_xpu_shm_ring_bell(fi_xpu_shm_tbell(&t), t.ms);
			fi_xpu_shm_ring_bell(fi_xpu_shm_ep_bell(ep), FI_XPU_SHM_SYS);
		}
		if (locked)
			fi_xpu_shm_unlock(ep);
		if (rc == 0 && kind == FI_XPU_SHM_RDV_STREAM)
			fi_xpu_shm_progress(ep);
	}
	/* Success goes out as 2 + the target's scope, as in fi_xpu_shm_rma. */
	rc = fi_xpu_group_scope_bcast(scope, rc ? rc : 2 + t.ms);
	if (rc < 2)
		return (int)rc;
	t.ms = (int)(rc - 2);
	large = (int)fi_xpu_group_scope_bcast(scope, large);
	if (!large) {
		m = (struct fi_xpu_shm_msg *)(uintptr_t)fi_xpu_group_scope_bcast(scope, (int64_t)(uintptr_t)m);
		fi_xpu_coop_copy((unsigned char *)m + FI_XPU_SHM_MSG_HDR, buf, len, scope, t.ms);
		if (rank == 0) {
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st_at(&m->seq, h + 1, t.ms));
			fi_xpu_shm_ring_bell(fi_xpu_shm_tbell(&t), t.ms);
			fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, cflags, context, len, 0);
		}
	}
	fi_xpu_group_scope_sync(scope);
	return 0;
}

/* Reads the header of an arrived message once: senders may rewrite the
 * slot at any time, so matching and delivery use this copy only. */
FI_XPU_FUNC void fi_xpu_shm_msg_read(const struct fi_xpu_shm_msg *m, struct fi_xpu_shm_msg_seen *h)
{
	h->seq = fi_xpu_shm_ldr(&m->seq);
	h->state = fi_xpu_shm_ldr(&m->state);
	h->len = fi_xpu_shm_ldr(&m->len);
	h->tag = fi_xpu_shm_ldr(&m->tag);
	h->data = fi_xpu_shm_ldr(&m->data);
	h->flags = fi_xpu_shm_ldr(&m->flags);
	h->src_nonce = 0; /* attributed by fi_xpu_shm_msg_source */
	h->src_ep = fi_xpu_shm_ldr(&m->src_ep);
	h->src_conn = fi_xpu_shm_ldr(&m->src_conn);
	h->src_region = fi_xpu_shm_ldr(&m->src_region);
	h->src_off = fi_xpu_shm_ldr(&m->src_off);
	h->src_gen = fi_xpu_shm_ldr(&m->src_gen);
	h->stamp = fi_xpu_shm_ldr(&m->stamp);
	h->pstamp = fi_xpu_shm_ldr(&m->pstamp);
}

/* The key the message whose header copy is `h` was stamped under: that
 * of the connection it names, or, for a departed peer's entry after its
 * id went to another one, the key that peer had. NULL when there is none.
 * `*prev` says which. */
FI_XPU_FUNC const uint64_t *fi_xpu_shm_msg_key(const struct fi_xpu_shm_ep_dev *ep,
					       const struct fi_xpu_shm_msg_seen *h, int *prev)
{
	const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_conn_map(ep->ctx, h->src_conn);
	if (!map || (h->src_ep >> 32))
		return FI_XPU_I_NULL;
	*prev = h->src_gen != fi_xpu_shm_ld(&map->gen);
	if (*prev && h->src_gen != fi_xpu_shm_ld(&map->prev_gen))
		return FI_XPU_I_NULL;
	return *prev ? map->prev_key : map->key;
}

/* Attributes the arrived message whose header copy is `h`, at inbox
 * position `pos`: 0 when the connection it names made its stamp, its
 * source then that connection's attested peer (and h->seq the position's
 * own, pos + 1); -1 when it is refused. */
FI_XPU_FUNC int fi_xpu_shm_msg_source(const struct fi_xpu_shm_ep_dev *ep, uint64_t pos,
				      struct fi_xpu_shm_msg_seen *h)
{
	const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_conn_map(ep->ctx, h->src_conn);
	const uint64_t *key;
	struct fi_xpu_shm_msg_id id;
	int prev = 0;
	key = fi_xpu_shm_msg_key(ep, h, &prev);
	if (!key)
		return -1;
	id.pos = pos;
	id.ep_id = ep->ep_id;
	id.src_ep = h->src_ep;
	id.flags = h->flags;
	id.len = h->len;
	id.tag = h->tag;
	id.data = h->data;
	id.src_region = h->src_region;
	id.src_off = h->src_off;
	if (fi_xpu_shm_msg_stamp(key, &id) != h->stamp)
		return -1;
	h->seq = pos + 1;
	h->src_nonce = fi_xpu_shm_ld(prev ? &map->prev_nonce : &map->nonce);
	return 0;
}

FI_XPU_FUNC int fi_xpu_shm_matches(const struct fi_xpu_shm_posted *p,
				   const struct fi_xpu_shm_msg_seen *m)
{
	if ((p->flags & FI_TAGGED) != (m->flags & FI_TAGGED))
		return 0;
	if ((p->flags & FI_XPU_SHM_POSTED_DIRECTED) &&
	    (m->src_nonce != p->src_nonce || m->src_ep != p->src_ep))
		return 0;
	if (!(p->flags & FI_TAGGED))
		return 1;
	return ((m->tag ^ p->tag) & ~p->ignore) == 0;
}

/* Completes receive `p`, which holds the message's length, tag, data,
 * flags and source by now, with `n` bytes delivered. */
FI_XPU_FUNC void fi_xpu_shm_rx_complete(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_posted *p,
					uint64_t n, int err)
{
	struct fi_xpu_shm_cqe_in in = fi_xpu_shm_cqe_zero();
	uint64_t *c = FI_XPU_SHM_P(uint64_t, ep->cntr[FI_XPU_SHM_CNTR_RECV]);
	if (err == 0 && p->mlen > p->len)
		err = -FI_ETRUNC;
	in.flags = FI_RECV | ((p->flags & FI_TAGGED) ? FI_TAGGED : FI_MSG) |
		   (p->flags & FI_REMOTE_CQ_DATA);
	in.context = p->context;
	in.len = err && err != -FI_ETRUNC ? 0 : n;
	in.buf = p->buf;
	in.data = p->data;
	in.tag = p->tag;
	in.olen = err == -FI_ETRUNC ? p->mlen - p->len : 0;
	in.err = err;
	in.src_nonce = p->src_nonce;
	in.src_ep = p->src_ep;
	fi_xpu_arch_fence(FI_XPU_ARCH_RELEASE, FI_XPU_SHM_SYS);
	if (c)
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_CNTR, fi_xpu_shm_add(err ? c + 1 : c, 1));
	(void)fi_xpu_shm_cq_push(ep->rx_cq, &in);
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&p->state, FI_XPU_SHM_POSTED_FREE));
}

/* Ends the streamed or rendezvous message in slot `m` at position `pos`
 * as failed: the stamped word tells its sender (under the connection's
 * `key`, none when unknown) that its lane or buffer is free. */
FI_XPU_FUNC void fi_xpu_shm_flow_fail(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_msg *m,
				      const uint64_t *key, uint64_t pos)
{
	/* The state first: once the sender sees the stamped word it marks
	 * the slot consumed, which no later store of ours may undo (the
	 * inbox would never be retired past it). */
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_RDV_FAILED));
	if (key)
		(void)fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, key, pos, ep->ep_id, 0,
					  FI_XPU_SHM_FLOW_FAILED);
}

/* Takes what the sender has staged for the streamed message of receive
 * `p`; completes the receive after the last byte or when the sender is
 * gone. Only a produced position with the sender's stamp counts; every
 * such value is bounded before use. */
FI_XPU_FUNC void fi_xpu_shm_stream_rx(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_posted *p)
{
	struct fi_xpu_shm_msg *m = FI_XPU_SHM_P(struct fi_xpu_shm_msg, p->slot);
	const struct fi_xpu_shm_peer_map *map = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, p->map);
	const uint64_t *key = fi_xpu_shm_ld(&map->gen) == p->seq ? map->key : FI_XPU_I_NULL;
	uint64_t produced, pst, done = p->done;
	if (fi_xpu_shm_ld(&m->state) != FI_XPU_SHM_SLOT_STREAMING) {
		/* Someone rewrote the slot: its bytes are lost. */
		fi_xpu_shm_flow_fail(ep, m, key, p->pos);
		fi_xpu_shm_rx_complete(ep, p, 0, -FI_EIO);
		return;
	}
	produced = fi_xpu_shm_ld(&m->produced);
	pst = fi_xpu_shm_ld(&m->pstamp);
	if (key && produced != done &&
	    pst == fi_xpu_shm_flow_stamp(key, p->pos, ep->ep_id, produced, FI_XPU_SHM_FLOW_PRODUCED)) {
		if (produced > p->mlen || (produced > done && produced - done > FI_XPU_SHM_STAGE_LANE_SIZE)) {
			/* Stamped by the sender, yet impossible: its
			 * stream is broken. */
			fi_xpu_shm_flow_fail(ep, m, key, p->pos);
			fi_xpu_shm_rx_complete(ep, p, 0, -FI_EIO);
			return;
		}
		if (produced > done) {
			/* Bytes past the posted buffer are taken and dropped,
			 * so that the sender can finish; the receive reports
			 * FI_ETRUNC. */
			uint64_t lo = done < p->len ? done : p->len;
			uint64_t hi = produced < p->len ? produced : p->len;
			if (hi > lo)
				fi_xpu_shm_lane_copy(FI_XPU_SHM_P(unsigned char, p->stage), lo,
						     FI_XPU_SHM_P(unsigned char, p->buf) + lo, hi - lo,
						     0);
			p->done = produced;
			/* The slot's state before the last word: once the
			 * sender sees it, it marks the slot consumed. */
			if (produced == p->mlen)
				FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG,
						 fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_RDV_DONE));
			p->cst = fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, key, p->pos, ep->ep_id,
						     produced, FI_XPU_SHM_FLOW_CONSUMED);
		}
		/* A smaller one is an old word replayed: ignored. */
	} else if (key && p->done && (fi_xpu_shm_ldr(&m->consumed) != p->done ||
				      fi_xpu_shm_ldr(&m->cstamp) != p->cst)) {
		/* Our word was overwritten: published again, so that the
		 * sender is not stalled by whoever wrote it. */
		p->cst = fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, key, p->pos, ep->ep_id, p->done,
					     FI_XPU_SHM_FLOW_CONSUMED);
	}
	if (p->done == p->mlen) {
		fi_xpu_shm_rx_complete(ep, p, p->mlen < p->len ? p->mlen : p->len, 0);
	} else if (!key || !fi_xpu_shm_peer_alive(map)) {
		/* Nobody will finish or retire the slot: the sender is gone. */
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_CONSUMED));
		fi_xpu_shm_rx_complete(ep, p, 0, -FI_ECONNRESET);
	}
}

/* Delivers message `m` into posted receive `p`: at once for eager and
 * rendezvous messages, by `fi_xpu_shm_stream_rx` for streamed ones. */
FI_XPU_NOINLINE_FUNC void fi_xpu_shm_deliver(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_posted *p,
				    struct fi_xpu_shm_msg *m, const struct fi_xpu_shm_msg_seen *h)
{
	uint64_t mflags = h->flags, n, state = FI_XPU_SHM_SLOT_CONSUMED;
	int err = 0;
	p->mlen = h->len;
	p->tag = h->tag;
	p->data = h->data;
	p->src_nonce = h->src_nonce;
	p->src_ep = h->src_ep;
	p->flags = (mflags & (FI_TAGGED | FI_REMOTE_CQ_DATA));
	n = p->mlen < p->len ? p->mlen : p->len;
	if (mflags & (FI_XPU_SHM_MSG_RDV | FI_XPU_SHM_MSG_STREAM)) {
		uint64_t gen = h->src_gen, size = 0, base, off = h->src_off;
		const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_src_map(ep, h->src_conn, gen);
		uint64_t need = (mflags & FI_XPU_SHM_MSG_STREAM) ? FI_XPU_SHM_STAGE_LANE_SIZE : n;
		base = fi_xpu_shm_region(map, h->src_region, &size);
		if (!fi_xpu_shm_peer_alive(map)) {
			/* A departed sender, or one whose connection id was
			 * reused since: never read from whoever holds it now. */
			err = -FI_ECONNRESET;
		} else if (!base || off > size || need > size - off) {
			err = -FI_EIO;
			fi_xpu_shm_flow_fail(ep, m, map->key, h->seq - 1);
			fi_xpu_shm_rx_complete(ep, p, n, err);
			return;
		} else if (mflags & FI_XPU_SHM_MSG_STREAM) {
			p->slot = (uint64_t)(uintptr_t)m;
			p->map = (uint64_t)(uintptr_t)map;
			p->seq = gen; /* posting order matters no more */
			p->stage = base + off;
			p->done = 0;
			p->pos = h->seq - 1;
			p->cst = 0;
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_STREAMING));
			/* Progress takes its bytes (fi_xpu_shm_stream_rx) right
			 * after the arrivals it matched: kept out of here, the
			 * registers of both stay out of every kernel's count. */
			fi_xpu_shm_str(&ep->busy, 1);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&p->state, FI_XPU_SHM_POSTED_ACTIVE));
			fi_xpu_shm_ring_bell(fi_xpu_shm_ep_bell(ep), FI_XPU_SHM_SYS);
			return;
		} else {
			fi_xpu_shm_copy(FI_XPU_SHM_P(void, p->buf), FI_XPU_SHM_P(const void, base + off),
					n);
			/* Taken: only this stamped word frees the sender's
			 * buffer, and the sender then marks the slot consumed,
			 * so the state goes first and nothing is stored after. */
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG,
					 fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_RDV_DONE));
			(void)fi_xpu_shm_flow_put(&m->consumed, &m->cstamp, map->key, h->seq - 1,
						  ep->ep_id, h->len, FI_XPU_SHM_FLOW_CONSUMED);
			fi_xpu_shm_rx_complete(ep, p, n, 0);
			return;
		}
	} else if (p->mlen > FI_XPU_SHM_EAGER_MAX) {
		err = -FI_EIO; /* a slot cannot hold that much: corrupt header */
	} else {
		const unsigned char *bytes = (const unsigned char *)m + FI_XPU_SHM_MSG_HDR;
		const uint64_t *key;
		int prev = 0;
		fi_xpu_shm_copy(FI_XPU_SHM_P(void, p->buf), bytes, n);
		/* Stamped again over what was copied: bytes a peer changed in
		 * the slot are an error, never a message. */
		key = fi_xpu_shm_msg_key(ep, h, &prev);
		if (!key || fi_xpu_shm_bytes_stamp(key, h->seq - 1, FI_XPU_SHM_P(const void, p->buf),
						   n, bytes, p->mlen) != h->pstamp)
			err = -FI_EIO;
	}
	fi_xpu_shm_rx_complete(ep, p, n, err);
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, state));
}

/* What the receiver of send `q` (lock held) said in the flow word of
 * slot `m`: 1 once it took every byte, -1 when it failed the transfer, 0
 * otherwise, with `q->acked` the most it stamped as consumed so far. A
 * word without the receiver's stamp, or a smaller position replayed, is
 * ignored: no other peer can end the send or free its lane. */
FI_XPU_FUNC int fi_xpu_shm_rdv_verdict(struct fi_xpu_shm_rdv *q, struct fi_xpu_shm_msg *m)
{
	uint64_t cs = fi_xpu_shm_ld(&m->cstamp), c, most;
	if (cs != q->cseen) {
		c = fi_xpu_shm_ld(&m->consumed);
		/* A receiver never takes more than was staged. */
		most = q->kind == FI_XPU_SHM_RDV_REG ? q->len : q->sent;
		if (cs == fi_xpu_shm_flow_stamp(q->key, q->pos, q->rep, c, FI_XPU_SHM_FLOW_CONSUMED)) {
			q->cseen = cs;
			if (c > q->acked && c <= most)
				q->acked = c;
		} else if (c == 0 &&
			   cs == fi_xpu_shm_flow_stamp(q->key, q->pos, q->rep, 0, FI_XPU_SHM_FLOW_FAILED)) {
			return -1;
		}
	}
	return q->acked == q->len ? 1 : 0;
}

/* Feeds streamed send `q` (lock held): stages as much as the lane has
 * room for behind what the receiver stamped as consumed, publishes it
 * with its stamp, and reports the send once every byte is staged. */
FI_XPU_FUNC void fi_xpu_shm_stream_tx(struct fi_xpu_shm_ep_dev *ep, struct fi_xpu_shm_rdv *q,
				      struct fi_xpu_shm_msg *m)
{
	uint64_t room, n;
	if (q->sent && (fi_xpu_shm_ldr(&m->produced) != q->sent || fi_xpu_shm_ldr(&m->pstamp) != q->pst))
		/* Our word was overwritten: published again, so that the
		 * receiver is not stalled by whoever wrote it. */
		q->pst = fi_xpu_shm_flow_put(&m->produced, &m->pstamp, q->key, q->pos, q->rep, q->sent,
					     FI_XPU_SHM_FLOW_PRODUCED);
	if (q->kind != FI_XPU_SHM_RDV_STREAM)
		return;
	room = FI_XPU_SHM_STAGE_LANE_SIZE - (q->sent - q->acked);
	n = q->len - q->sent < room ? q->len - q->sent : room;
	if (n) {
		fi_xpu_shm_lane_copy(fi_xpu_shm_lane(ep, q->lane), q->sent,
				     FI_XPU_SHM_P(unsigned char, q->buf) + q->sent, n, 1);
		fi_xpu_arch_fence(FI_XPU_ARCH_RELEASE, FI_XPU_SHM_SYS);
		q->sent += n;
		q->pst = fi_xpu_shm_flow_put(&m->produced, &m->pstamp, q->key, q->pos, q->rep, q->sent,
					     FI_XPU_SHM_FLOW_PRODUCED);
	}
	if (q->sent == q->len) {
		/* The buffer is no longer needed: the send is complete. */
		fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, q->flags, FI_XPU_SHM_P(void, q->context),
				    q->len, 0);
		q->kind = FI_XPU_SHM_RDV_STAGED;
	}
}

/* Device-side progress of one endpoint: matches arrived messages against
 * posted receives (in arrival and posting order), moves streamed messages
 * in both directions, retires consumed slots, and completes sends the
 * receivers have finished with. */
FI_XPU_FUNC void fi_xpu_shm_progress(struct fi_xpu_shm_ep_dev *ep)
{
	struct fi_xpu_shm_ep_block *b;
	uint64_t pos, head, tail;
	int i, busy = 0;
	if (!ep)
		return;
	b = FI_XPU_SHM_P(struct fi_xpu_shm_ep_block, ep->block);
	if (fi_xpu_shm_ep_idle(ep) || !fi_xpu_shm_lock(ep, 0))
		return;
	tail = fi_xpu_shm_ld(&b->tail);
	head = fi_xpu_shm_ld(&b->head);
	/* Senders move head; never scan more than the inbox holds. */
	if (head - tail > FI_XPU_SHM_INBOX_SLOTS)
		head = tail + FI_XPU_SHM_INBOX_SLOTS;
	for (pos = tail; pos != head; pos++) {
		struct fi_xpu_shm_msg *m = fi_xpu_shm_slot(b, pos);
		struct fi_xpu_shm_msg_seen h;
		struct fi_xpu_shm_posted *best = FI_XPU_I_NULL;
		if (fi_xpu_shm_ld(&m->seq) != pos + 1)
			break;
		if (fi_xpu_shm_ld(&m->state) != FI_XPU_SHM_SLOT_NEW)
			continue;
		fi_xpu_shm_msg_read(m, &h);
		if (fi_xpu_shm_msg_source(ep, pos, &h) != 0) {
			/* Not sent by the peer it names: never delivered. If
			 * that peer has a pull or stream waiting here (one a
			 * third peer altered), it learns it failed. */
			int prev = 0;
			if (h.flags & (FI_XPU_SHM_MSG_RDV | FI_XPU_SHM_MSG_STREAM))
				fi_xpu_shm_flow_fail(ep, m, fi_xpu_shm_msg_key(ep, &h, &prev), pos);
			else
				FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG,
						 fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_CONSUMED));
			continue;
		}
		for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++) {
			struct fi_xpu_shm_posted *p = &ep->posted[i];
			if (p->state == FI_XPU_SHM_POSTED_READY && fi_xpu_shm_matches(p, &h) &&
			    (!best || p->seq < best->seq))
				best = p;
		}
		if (best)
			fi_xpu_shm_deliver(ep, best, m, &h);
	}
	for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++)
		if (ep->posted[i].state == FI_XPU_SHM_POSTED_ACTIVE) {
			fi_xpu_shm_stream_rx(ep, &ep->posted[i]);
			busy |= ep->posted[i].state == FI_XPU_SHM_POSTED_ACTIVE;
		}
	/* Retire the prefix the sender no longer needs. */
	for (;;) {
		struct fi_xpu_shm_msg *m = fi_xpu_shm_slot(b, tail);
		if (tail == head || fi_xpu_shm_ld(&m->seq) != tail + 1 ||
		    fi_xpu_shm_ld(&m->state) != FI_XPU_SHM_SLOT_CONSUMED)
			break;
		tail++;
		FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&b->tail, tail));
	}
	for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++) {
		struct fi_xpu_shm_rdv *r = &ep->rdv[i];
		struct fi_xpu_shm_msg *m = FI_XPU_SHM_P(struct fi_xpu_shm_msg, fi_xpu_shm_ld(&r->slot));
		const struct fi_xpu_shm_peer_map *map =
			FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, r->map);
		int v;
		if (!m)
			continue;
		if (!fi_xpu_shm_peer_alive(map) || fi_xpu_shm_ld(&map->gen) != r->gen) {
			/* The receiver departed: nothing it left in its slot will
			 * ever change, so the send ends here (a streamed one
			 * already reported stays reported). */
			if (r->kind != FI_XPU_SHM_RDV_STAGED)
				fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, r->flags,
						    FI_XPU_SHM_P(void, r->context), r->len,
						    -FI_ECONNRESET);
			if (r->kind != FI_XPU_SHM_RDV_REG)
				ep->lanes &= ~(1ULL << r->lane);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&r->slot, 0));
			continue;
		}
		v = fi_xpu_shm_rdv_verdict(r, m);
		if (v) {
			/* A streamed send was reported when fully staged. */
			if (r->kind != FI_XPU_SHM_RDV_STAGED)
				fi_xpu_shm_complete(ep, FI_XPU_SHM_CNTR_SEND, r->flags,
						    FI_XPU_SHM_P(void, r->context), r->len,
						    v > 0 && r->kind == FI_XPU_SHM_RDV_REG ? 0 : -FI_EIO);
			if (r->kind != FI_XPU_SHM_RDV_REG)
				ep->lanes &= ~(1ULL << r->lane);
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&r->slot, 0));
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&m->state, FI_XPU_SHM_SLOT_CONSUMED));
		} else {
			if (r->kind != FI_XPU_SHM_RDV_REG)
				fi_xpu_shm_stream_tx(ep, r, m);
			busy = 1;
		}
	}
	/* Under the lock, which every setter holds: none is lost. */
	if (!busy)
		fi_xpu_shm_str(&ep->busy, 0);
	fi_xpu_shm_unlock(ep);
}

FI_XPU_FUNC int fi_xpu_shm_recv_any(const struct fid_xpu_ep *hep, void *buf, size_t len,
				    const void *src_addr, uint64_t tag, uint64_t ignore,
				    uint64_t flags, void *context, int scope)
{
	struct fi_xpu_shm_ep_dev *ep = fi_xpu_shm_ep(hep);
	const struct fi_xpu_shm_peer_addr *src = FI_XPU_I_NULL;
	int64_t rc = 0;
	int i;
	FI_XPU_GROUP_ENTER_RANK(scope, rank);
	if (!ep || (!buf && len))
		return -FI_EINVAL;
	if (src_addr) {
		/* Directed receive: the raw address of the one source. */
		src = fi_xpu_shm_peer(ep, *(const uint64_t *)src_addr);
		if (!src)
			return -FI_EINVAL;
	}
	if (rank == 0) {
		fi_xpu_shm_lock(ep, 1);
		for (i = 0; i < FI_XPU_SHM_MAX_POSTED; i++)
			if (ep->posted[i].state == FI_XPU_SHM_POSTED_FREE)
				break;
		if (i == FI_XPU_SHM_MAX_POSTED) {
			rc = -FI_EAGAIN;
		} else {
			struct fi_xpu_shm_posted *p = &ep->posted[i];
			p->buf = (uint64_t)(uintptr_t)buf;
			p->len = len;
			p->tag = tag;
			p->ignore = ignore;
			p->context = (uint64_t)(uintptr_t)context;
			p->flags = (flags & FI_TAGGED) | (src ? FI_XPU_SHM_POSTED_DIRECTED : 0);
			p->src_nonce = src ? src->nonce : 0;
			p->src_ep = src ? src->ep_id : 0;
			p->seq = ++ep->post_seq;
			FI_XPU_I_PUBLISH(FI_XPU_I_PUB_MSG, fi_xpu_shm_st(&p->state, FI_XPU_SHM_POSTED_READY));
		}
		fi_xpu_shm_unlock(ep);
		if (rc == 0)
			fi_xpu_shm_progress(ep);
	}
	rc = fi_xpu_group_scope_bcast(scope, rc);
	return (int)rc;
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_MSG_H */
