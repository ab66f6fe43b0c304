/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Fuzzes the bytes a peer process can write and the shm device code reads:
 * the receiver's inbox slots and staging lanes, the target's heap header and
 * registration table, and CQ rings. Two endpoints live in one process; each
 * round restores both heaps and endpoint states from a snapshot, corrupts
 * the peer-writable bytes, runs the device operations that read them and
 * checks that every call returns 0 or a negative code and that memory no
 * registration names keeps its pattern.
 */
#include "shm_common.h"

#include <signal.h>

#define ROUNDS 3000
#define GUARD 4096

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static int round_no, round_mode;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A value an attacker would pick: random, extreme, or near the valid one. */
static uint64_t mutate(uint64_t v)
{
	switch (rnd() % 8) {
	case 0: return rnd();
	case 1: return v ^ (1ULL << (rnd() % 64));
	case 2: return v + (rnd() % 9) - 4;
	case 3: return ~0ULL - (rnd() % 256);
	case 4: return 0;
	case 5: return 1ULL << (rnd() % 64);
	case 6: return v * 2 + 1;
	default: return v + ((rnd() % 2) ? 4096 : (uint64_t)0 - 4096);
	}
}

static void maybe(uint64_t *p)
{
	if (rnd() % 3 == 0)
		*p = mutate(*p);
}

static void on_alarm(int sig)
{
	(void)sig;
	fprintf(stderr, "shm_fuzz: round %d (mode %d) hangs\n", round_no, round_mode);
	_exit(3);
}

static void check_rc(long long rc, const char *what)
{
	if (rc > 0 && rc <= 64)
		return; /* CQ reads return counts */
	if (rc == 0 || (rc < 0 && rc > -1000))
		return;
	fprintf(stderr, "round %d mode %d: %s returned %lld\n", round_no, round_mode, what, rc);
	failures++;
}

static int intact(const unsigned char *p, size_t n, unsigned char pat)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (p[i] != pat)
			return 0;
	return 1;
}

static void drain(struct fid_xpu_cq *cq)
{
	struct fi_cq_tagged_entry e[8];
	struct fi_cq_err_entry err;
	int k;
	for (k = 0; k < 4; k++) {
		int64_t n = fi_xpu_cq_read(cq, e, 8, FI_XPU_WORK_ITEM);
		check_rc(n, "fi_xpu_cq_read");
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			check_rc(fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_WORK_ITEM), "fi_xpu_cq_readerr");
		} else if (n <= 0) {
			break;
		}
	}
}

int main(int argc, char **argv)
{
	int known = argc > 1 && strcmp(argv[1], "known") == 0;
	static struct world a, b;
	struct fi_xpu_shm_ep_dev *ea, *eb;
	struct fi_xpu_shm_ctx_dev *ca, *cb;
	struct fi_xpu_shm_heap_hdr *hb;
	struct fi_xpu_shm_ep_block *blk;
	struct fi_xpu_shm_cq_dev *qb;
	unsigned char *heap_a, *heap_b, *snap_a, *snap_b, *spare, *local;
	struct fi_xpu_shm_ep_dev snap_ea, snap_eb;
	uint64_t size_a, size_b, raw_b, raw_a, slot, mr_off;
	fi_addr_t fa;
	size_t len;
	int fd;
	uint64_t off;

	signal(SIGALRM, on_alarm);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.n = b.n = 1;
	open_world(&a, FI_CQ_FORMAT_TAGGED);
	open_world(&b, FI_CQ_FORMAT_TAGGED);
	REQUIRE(fi_xpu_av_insert(a.av, b.cards[0].name, 1, &fa, 0, NULL), 1);
	len = sizeof(raw_b);
	REQUIRE(fi_xpu_av_lookup(a.av, fa, &raw_b, &len, 0, a.ctx), 0);
	REQUIRE(fi_xpu_av_insert(b.av, a.cards[0].name, 1, &fa, 0, NULL), 1);
	len = sizeof(raw_a);
	REQUIRE(fi_xpu_av_lookup(b.av, fa, &raw_a, &len, 0, b.ctx), 0);

	/* Memory no registration of either side names. */
	REQUIRE(fi_xpu_alloc(b.ctx, 65536, 0, FI_XPU_ALLOC_DMABUF, (void **)&spare, &fd, &off), 0);
	close(fd);
	memset(spare, 0xa5, 65536);
	local = malloc(2 * GUARD + (1u << 20));
	REQUIRE(local != NULL, 1);

	ea = (struct fi_xpu_shm_ep_dev *)a.ep.fid.prov_ctx;
	eb = (struct fi_xpu_shm_ep_dev *)b.ep.fid.prov_ctx;
	ca = FI_XPU_SHM_P(struct fi_xpu_shm_ctx_dev, ea->ctx);
	cb = FI_XPU_SHM_P(struct fi_xpu_shm_ctx_dev, eb->ctx);
	heap_a = FI_XPU_SHM_P(unsigned char, ca->heap_base);
	heap_b = FI_XPU_SHM_P(unsigned char, cb->heap_base);
	size_a = ((struct fi_xpu_shm_heap_hdr *)(void *)heap_a)->size;
	size_b = ((struct fi_xpu_shm_heap_hdr *)(void *)heap_b)->size;
	hb = (struct fi_xpu_shm_heap_hdr *)(void *)heap_b;
	blk = FI_XPU_SHM_P(struct fi_xpu_shm_ep_block, eb->block);
	qb = (struct fi_xpu_shm_cq_dev *)b.cq.fid.prov_ctx;
	REQUIRE((unsigned char *)blk > heap_b && (unsigned char *)blk < heap_b + size_b, 1);
	snap_a = malloc(size_a);
	snap_b = malloc(size_b);
	REQUIRE(snap_a && snap_b, 1);
	memcpy(snap_a, heap_a, size_a);
	memcpy(snap_b, heap_b, size_b);
	snap_ea = *ea;
	snap_eb = *eb;
	slot = (b.cards[0].key >> 32) & 0xffff;
	mr_off = hb->mr_off;

	for (round_no = 0; round_no < ROUNDS && !failures; round_no++) {
		unsigned char *buf = local + GUARD;
		uint64_t key = b.cards[0].key, addr = b.cards[0].base + (rnd() % 4096) * 8;
		size_t n = 1 + rnd() % 9000;
		uint64_t v[4] = { 1, 2, 3, 4 }, res[4];
		int i;

		round_mode = (int)(rnd() % 3);
		memcpy(heap_a, snap_a, size_a);
		memcpy(heap_b, snap_b, size_b);
		*ea = snap_ea;
		*eb = snap_eb;
		memset(local, 0xc3, 2 * GUARD + (1u << 20));
		memset(b.heap, 0, HEAP_SIZE);
		alarm(20);

		if (round_mode == 0) {
			/* The target's heap header and registration table. */
			struct fi_xpu_shm_mr_entry *e =
				(struct fi_xpu_shm_mr_entry *)(void *)(heap_b + mr_off) + slot;
			maybe(&hb->mr_off);
			/* Besides unaligned values from `maybe`: an mr_off that would
			 * wrap a naive bounds check around to the bytes before the
			 * heap (`shm_fuzz known` feeds it more often). */
			if (rnd() % (known ? 2 : 8) == 0)
				hb->mr_off = (uint64_t)0 - (slot + 1) * 64 - (rnd() % 3) * (1ULL << 30);
			maybe(&hb->mr_slots);
			maybe(&e->gen);
			maybe(&e->base);
			maybe(&e->len);
			maybe(&e->access);
			maybe(&e->region);
			if (rnd() % 4 == 0)
				key = mutate(key);
			if (rnd() % 4 == 0)
				addr = mutate(addr);
			if (n > (1u << 20))
				n = 1u << 20;
			check_rc(fi_xpu_write(&a.ep, buf, n, NULL, 7, &raw_b, addr, key, NULL,
					      (rnd() & 1) ? FI_REMOTE_CQ_DATA : 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_write");
			check_rc(fi_xpu_read(&a.ep, buf, n, NULL, &raw_b, addr, key, NULL, 0,
					     FI_XPU_WORK_ITEM),
				 "fi_xpu_read");
			check_rc(fi_xpu_atomic(&a.ep, v, 4, NULL, &raw_b, addr & ~7ULL, key, FI_UINT64,
					       FI_SUM, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_atomic");
			check_rc(fi_xpu_fetch_atomic(&a.ep, v, 1, NULL, res, NULL, &raw_b, addr & ~7ULL,
						     key, FI_UINT64, FI_SUM, NULL, 0,
						     FI_XPU_WORK_ITEM),
				 "fi_xpu_fetch_atomic");
			drain(&a.cq);
			drain(&b.cq);
		} else if (round_mode == 1) {
			/* A valid message (eager, or large enough to stream or go
			 * by rendezvous), then its slot, the inbox and the staging
			 * lanes are corrupted before the receiver looks. */
			size_t m = (rnd() & 1) ? 1 + rnd() % 4000 : 4097 + rnd() % 200000;
			const unsigned char *src = (rnd() & 1) ? a.heap : local + GUARD + 4096;
			unsigned char *inbox = heap_b + blk->inbox_off;
			check_rc(fi_xpu_tsend(&a.ep, src, m, NULL, 0, &raw_b, 5, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_tsend");
			for (i = 0; i < 3; i++) {
				struct fi_xpu_shm_msg *h = (struct fi_xpu_shm_msg *)(void *)(
					inbox + (rnd() % FI_XPU_SHM_INBOX_SLOTS) * FI_XPU_SHM_SLOT_SIZE);
				if (i == 0)
					h = (struct fi_xpu_shm_msg *)(void *)inbox;
				maybe(&h->seq);
				maybe(&h->state);
				maybe(&h->len);
				maybe(&h->tag);
				maybe(&h->flags);
				maybe(&h->src_nonce);
				maybe(&h->src_ep);
				maybe(&h->src_conn);
				maybe(&h->src_region);
				maybe(&h->src_off);
				maybe(&h->produced);
				maybe(&h->consumed);
				maybe(&h->src_gen);
			}
			if (rnd() % 4 == 0)
				blk->head = mutate(blk->head);
			if (rnd() % 4 == 0)
				blk->tail = mutate(blk->tail);
			for (i = 0; i < 16; i++) {
				uint64_t lanes = FI_XPU_SHM_STAGE_LANES * FI_XPU_SHM_STAGE_LANE_SIZE;
				inbox[FI_XPU_SHM_INBOX_SLOTS * FI_XPU_SHM_SLOT_SIZE + rnd() % lanes] =
					(unsigned char)rnd();
			}
			/* Receive into the middle of `local`: guards on each side. */
			if (rnd() & 1)
				check_rc(fi_xpu_trecv(&b.ep, buf, 1u << 18, NULL, NULL, 5, 0, NULL, 0,
						      FI_XPU_WORK_ITEM),
					 "fi_xpu_trecv");
			else
				check_rc(fi_xpu_recv(&b.ep, buf, 1u << 18, NULL, NULL, NULL, 0,
						     FI_XPU_WORK_ITEM),
					 "fi_xpu_recv");
			for (i = 0; i < 3; i++) {
				drain(&b.cq);
				drain(&a.cq);
			}
			if (!intact(buf + (1u << 18), (1u << 20) - (1u << 18) + GUARD, 0xc3)) {
				fprintf(stderr, "round %d: receive wrote past its buffer\n", round_no);
				failures++;
			}
		} else {
			/* The receiver's CQ ring, which senders push into. */
			struct fi_xpu_shm_cq_ring *r = FI_XPU_SHM_P(struct fi_xpu_shm_cq_ring, qb->ring);
			struct fi_xpu_shm_cqe *q = (struct fi_xpu_shm_cqe *)(void *)((unsigned char *)r +
										FI_XPU_SHM_CQ_HDR);
			check_rc(fi_xpu_write(&a.ep, buf, 8, NULL, 9, &raw_b, b.cards[0].base,
					      b.cards[0].key, NULL, FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM),
				 "fi_xpu_write");
			maybe(&r->head);
			maybe(&r->tail);
			maybe(&r->size);
			maybe(&r->format);
			maybe(&r->overflow);
			maybe(&r->overflow_seen);
			for (i = 0; i < 4; i++) {
				struct fi_xpu_shm_cqe *c = q + rnd() % qb->size;
				maybe(&c->seq);
				maybe(&c->flags);
				maybe(&c->len);
				maybe((uint64_t *)&c->err);
				maybe(&c->olen);
				maybe(&c->is_err);
				maybe(&c->src_nonce);
				maybe(&c->src_ep);
			}
			check_rc(fi_xpu_send(&a.ep, buf, 16, NULL, 0, &raw_b, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_send");
			check_rc(fi_xpu_recv(&b.ep, buf, 64, NULL, NULL, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_recv");
			drain(&b.cq);
			{
				struct fi_cq_tagged_entry e[4];
				fi_addr_t src[4];
				check_rc(fi_xpu_cq_readfrom(&b.cq, e, 4, src, FI_XPU_WORK_ITEM),
					 "fi_xpu_cq_readfrom");
			}
		}
		alarm(0);
		if (!intact(local, GUARD, 0xc3) || !intact(local + GUARD + (1u << 20), GUARD, 0xc3)) {
			fprintf(stderr, "round %d mode %d: a guard of local memory changed\n", round_no,
				round_mode);
			failures++;
		}
		if (!intact(spare, 65536, 0xa5)) {
			fprintf(stderr, "round %d mode %d: unregistered memory changed\n", round_no,
				round_mode);
			failures++;
		}
		if (!intact(a.ro, 4096, 0x5a) || !intact(b.ro, 4096, 0x5a)) {
			fprintf(stderr, "round %d mode %d: read-only registration changed\n", round_no,
				round_mode);
			failures++;
		}
	}
	memcpy(heap_a, snap_a, size_a);
	memcpy(heap_b, snap_b, size_b);
	*ea = snap_ea;
	*eb = snap_eb;
	EXPECT(fi_xpu_free(b.ctx, spare), 0);
	free(snap_a);
	free(snap_b);
	free(local);
	close_world(&a);
	close_world(&b);
	/* One process plays both peers: the fork helpers stay unused. */
	(void)spawn;
	(void)finish;
	if (failures) {
		fprintf(stderr, "shm_fuzz: FAILED (%d) at round %d\n", failures, round_no);
		return 1;
	}
	printf("shm_fuzz rounds=%d: ok\n", round_no);
	return 0;
}
