/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu shm provider, device side: the inbox and its slots, the endpoint
 * lock, staging lanes, the liveness of a source.
 * Part of <fi_xpu/device_shm.h>, which states the contract; kernels
 * include that header.
 */
#ifndef FI_XPU_INCLUDED_SHM_SHM_INBOX_H
#define FI_XPU_INCLUDED_SHM_SHM_INBOX_H

#include <fi_xpu/shm/shm__atomic.h>

/* ---- messages ----------------------------------------------------------- */
/* The inbox follows its endpoint block; its geometry is fixed, so no value
 * another process can write decides where a slot is. */
FI_XPU_FUNC struct fi_xpu_shm_msg *fi_xpu_shm_slot(struct fi_xpu_shm_ep_block *b, uint64_t pos)
{
	return (struct fi_xpu_shm_msg *)(void *)((unsigned char *)(b + 1) +
						 (pos % FI_XPU_SHM_INBOX_SLOTS) *
							 FI_XPU_SHM_SLOT_SIZE);
}

FI_XPU_FUNC int fi_xpu_shm_lock(struct fi_xpu_shm_ep_dev *ep, int wait)
{
	while (!fi_xpu_shm_cas(&ep->lock, 0, 1)) {
		if (!wait)
			return 0;
		fi_xpu_arch_pause();
	}
	return 1;
}

FI_XPU_FUNC void fi_xpu_shm_unlock(struct fi_xpu_shm_ep_dev *ep)
{
	FI_XPU_I_PUBLISH(FI_XPU_I_PUB_LOCK, fi_xpu_shm_st(&ep->lock, 0));
}


/* Nothing arrived in the endpoint's inbox and nothing of its own is under
 * way (fi_xpu_shm_ep_dev.busy): progress would do nothing. Three relaxed
 * words; a stale answer only moves the work to the next poll. */
FI_XPU_FUNC int fi_xpu_shm_ep_idle(const struct fi_xpu_shm_ep_dev *ep)
{
	const struct fi_xpu_shm_ep_block *b;
	if (!ep)
		return 1;
	b = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_block, ep->block);
	return fi_xpu_shm_poll(&b->head) == fi_xpu_shm_poll(&b->tail) &&
	       fi_xpu_shm_poll(&ep->busy) == 0;
}

/* The bell of an endpoint's context heap (fi_xpu_shm_ring_bell). */
FI_XPU_FUNC uint64_t *fi_xpu_shm_ep_bell(const struct fi_xpu_shm_ep_dev *ep)
{
	const struct fi_xpu_shm_ctx_dev *c = FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, ep->ctx);
	return c && c->heap_base ? &FI_XPU_SHM_P(struct fi_xpu_shm_heap_hdr, c->heap_base)->bell
				 : FI_XPU_I_NULL;
}

/* Where this process writes lane `lane` of an endpoint's staging area. */
FI_XPU_FUNC unsigned char *fi_xpu_shm_lane(const struct fi_xpu_shm_ep_dev *ep, uint64_t lane)
{
	return FI_XPU_SHM_P(unsigned char, ep->stage) + lane * FI_XPU_SHM_STAGE_LANE_SIZE;
}

/* Copies `n` bytes between a flat buffer and a lane (a byte ring) at
 * stream position `pos`, in two pieces where the ring wraps. */
FI_XPU_FUNC void fi_xpu_shm_lane_copy(unsigned char *lane, uint64_t pos, unsigned char *flat,
				      uint64_t n, int into_lane)
{
	uint64_t at = pos % FI_XPU_SHM_STAGE_LANE_SIZE;
	uint64_t first = FI_XPU_SHM_STAGE_LANE_SIZE - at < n ? FI_XPU_SHM_STAGE_LANE_SIZE - at : n;
	if (into_lane) {
		fi_xpu_shm_copy(lane + at, flat, first);
		fi_xpu_shm_copy(lane, flat + first, n - first);
	} else {
		fi_xpu_shm_copy(flat, lane + at, first);
		fi_xpu_shm_copy(flat + first, lane, n - first);
	}
}

/* The map of the connection a message came through, when it is still the
 * connection the message was sent on (same generation); 0 otherwise. */
FI_XPU_FUNC const struct fi_xpu_shm_peer_map *fi_xpu_shm_src_map(const struct fi_xpu_shm_ep_dev *ep,
								 uint64_t conn, uint64_t gen)
{
	const struct fi_xpu_shm_peer_map *map = fi_xpu_shm_conn_map(ep->ctx, conn);
	if (!map || fi_xpu_shm_ld(&map->gen) != gen)
		return FI_XPU_I_NULL;
	return map;
}

FI_XPU_FUNC int fi_xpu_shm_peer_alive(const struct fi_xpu_shm_peer_map *map)
{
	return map && fi_xpu_shm_ld(&map->state) == FI_XPU_SHM_PEER_ALIVE;
}

#endif /* FI_XPU_INCLUDED_SHM_SHM_INBOX_H */
