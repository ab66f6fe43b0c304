/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Fuzzes the bytes a peer process can write and the shm device code reads:
 * the receiver's inbox slots (with the flow-control words of streamed
 * sends) and staging lanes, the target's heap header, registration table
 * and endpoint block, and the rings that take remote completions. Two
 * endpoints live in one process; each round restores both heaps and
 * endpoint states from a snapshot, corrupts the peer-writable bytes (before
 * the operations, between their steps, or from a second thread while they
 * run), runs the device operations that read them and checks that every
 * call returns 0 or a negative code, that memory no registration names
 * keeps its pattern, and that the sender never writes outside its lanes.
 *
 *   shm_fuzz            random rounds of the modes below
 *   shm_fuzz known      mr_off values that wrap a naive bounds check
 *   shm_fuzz stream     multi-lane streamed sends; flow-control words
 *                       rewound, advanced or near 2^64 between steps
 *   shm_fuzz offsets    endpoint-block offsets near 2^64, some aimed at
 *                       this process's private memory
 *   shm_fuzz race       a second thread corrupts while operations run
 *   shm_fuzz forge      a peer publishes completions in every ring of
 *                       the victim it can reach: a CQ that takes no remote
 *                       events has none, and the one that does refuses
 *                       an entry no connection stamped
 */
#include "shm_common.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#define ROUNDS 3000
#define GUARD 4096
#define LANE FI_XPU_SHM_STAGE_LANE_SIZE
#define NSTREAM FI_XPU_SHM_STAGE_LANES
#define STREAM_MAX (600u * 1024)
#define PRIV_SIZE 65536
#define PRIV_RING 4096

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static int round_no, round_mode;

static uint64_t rnd_s(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t rnd(void)
{
	return rnd_s(&rng);
}

/* A value an attacker would pick: random, extreme, or near the valid one. */
static uint64_t mutate_s(uint64_t *s, uint64_t v)
{
	switch (rnd_s(s) % 8) {
	case 0: return rnd_s(s);
	case 1: return v ^ (1ULL << (rnd_s(s) % 64));
	case 2: return v + (rnd_s(s) % 9) - 4;
	case 3: return ~0ULL - (rnd_s(s) % 256);
	case 4: return 0;
	case 5: return 1ULL << (rnd_s(s) % 64);
	case 6: return v * 2 + 1;
	default: return v + ((rnd_s(s) % 2) ? 4096 : (uint64_t)0 - 4096);
	}
}

static uint64_t mutate(uint64_t v)
{
	return mutate_s(&rng, v);
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

/* ---- the two worlds and what each round restores ------------------------ */
static struct world a, b;
static struct fi_xpu_shm_ep_dev *ea, *eb, snap_ea, snap_eb;
static struct fi_xpu_shm_heap_hdr *hb;
static struct fi_xpu_shm_ep_block *blk_a, *blk_b;
/* The endpoints' information, through their owners' writable mappings:
 * peers map it read-only, but its owner may still corrupt it. */
static struct fi_xpu_shm_ep_info *info_a, *info_b;
static struct fi_xpu_shm_cq_dev *qb;
static unsigned char *heap_a, *heap_b, *snap_a, *snap_b;
/* b's registration table (with its header), through b's own writable
 * mapping: peers map it read-only, but its owner may still corrupt it. */
static unsigned char *tab_b, *snap_tab_b;
static uint64_t size_tab_b;
/* b's heap as a's context maps it: where a's device code resolves b's offsets. */
static unsigned char *theap_b;
static uint64_t size_a, size_b, raw_a, raw_b, slot, mr_off, lanes_end_a;
/* Memory no registration names (spare: shared, the others private), the
 * source and destination buffers of streamed sends. */
static unsigned char *spare, *local, *priv, *priv_copy, *src, *src_copy, *dst;
#define DST_SIZE (GUARD + NSTREAM * ((size_t)STREAM_MAX + GUARD))

static unsigned char *dst_buf(int i)
{
	return dst + GUARD + (size_t)i * (STREAM_MAX + GUARD);
}

static unsigned char src_byte(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 9) + 1);
}

/* The bytes just before b's heap as a's context maps it, when they are
 * mapped here (by whatever mapping the kernel put there): offsets that wrap
 * a naive bounds check land in them. */
#define BELOW 256
static int below_ok;
static unsigned char below_snap[BELOW];

/* Whether [p, p + BELOW) lies in one readable and writable mapping. */
static int mapped_rw(const unsigned char *p)
{
	char line[512];
	int ok = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	while (!ok && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perm[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && lo <= (uintptr_t)p &&
		    (uintptr_t)p + BELOW <= hi && perm[0] == 'r' && perm[1] == 'w')
			ok = 1;
	}
	fclose(f);
	return ok;
}

/* The writable shared mapping of the file that `ro` maps (read-only),
 * found by its inode in /proc/self/maps; its size in *len. */
static unsigned char *owner_mapping(const void *ro, uint64_t *len)
{
	char line[512];
	unsigned long lo, hi, off, ino, want = 0;
	char perm[8], dev[16];
	unsigned char *found = NULL;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perm, &off, dev, &ino) == 6 &&
		    lo <= (uintptr_t)ro && (uintptr_t)ro < hi)
			want = ino;
	rewind(f);
	while (want && !found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perm, &off, dev, &ino) == 6 &&
		    ino == want && perm[1] == 'w' && perm[3] == 's') {
			found = (unsigned char *)(uintptr_t)lo;
			*len = hi - lo;
		}
	fclose(f);
	return found;
}

/* The offset in b's heap that a's device code resolves to `p`. */
static uint64_t aim(const void *p)
{
	return (uint64_t)(uintptr_t)p - (uint64_t)(uintptr_t)theap_b;
}

/* A value for a word that holds an offset into b's heap. */
static uint64_t hostile_offset_s(uint64_t *s, uint64_t v)
{
	switch (rnd_s(s) % 6) {
	case 0: return aim(priv + PRIV_RING);
	case 1: return aim(priv + PRIV_RING + 1024 + 8 * (rnd_s(s) % 64));
	case 2: return (uint64_t)0 - 8 * (1 + rnd_s(s) % (BELOW / 8));
	case 3: return (uint64_t)0 - size_b + 8 * (rnd_s(s) % 64);
	case 4: return size_b - 8 * (rnd_s(s) % 64);
	default: return mutate_s(s, v);
	}
}

/* A value for a flow-control position: rewound, advanced, or extreme. */
static uint64_t hostile_position_s(uint64_t *s, uint64_t v)
{
	switch (rnd_s(s) % 8) {
	case 0: return v - LANE * (1 + rnd_s(s) % 4);
	case 1: return v - 1 - rnd_s(s) % LANE;
	case 2: return 0;
	case 3: return v + 1 + rnd_s(s) % (3 * LANE);
	case 4: return ~0ULL - rnd_s(s) % 4096;
	case 5: return 1ULL << 63;
	case 6: return v - (1ULL << 63);
	default: return mutate_s(s, v);
	}
}

static struct fi_xpu_shm_msg *inbox_slot(uint64_t pos)
{
	return (struct fi_xpu_shm_msg *)(void *)((unsigned char *)(blk_b + 1) +
						 (pos % FI_XPU_SHM_INBOX_SLOTS) *
							 FI_XPU_SHM_SLOT_SIZE);
}

static void restore(void)
{
	memcpy(heap_a, snap_a, size_a);
	memcpy(heap_b, snap_b, size_b);
	memcpy(tab_b, snap_tab_b, size_tab_b);
	*ea = snap_ea;
	*eb = snap_eb;
	memset(local, 0xc3, 2 * GUARD + (1u << 20));
	memset(dst, 0xc3, DST_SIZE);
	memset(b.heap, 0, HEAP_SIZE);
	memcpy(priv, priv_copy, PRIV_SIZE);
	/* The heaps' bells went back with them, the CQs' last idle values did
	 * not: as after a peer rewound a bell (SECURITY.md), polls would find
	 * nothing new until the bell passed them again. */
	((struct fi_xpu_shm_cq_dev *)a.cq.fid.prov_ctx)->bseen = ~0ULL;
	qb->bseen = ~0ULL;
}

static void check_memory(void)
{
	size_t i;
	if (!intact(local, GUARD, 0xc3) || !intact(local + GUARD + (1u << 20), GUARD, 0xc3)) {
		fprintf(stderr, "round %d mode %d: a guard of local memory changed\n", round_no,
			round_mode);
		failures++;
	}
	if (!intact(dst, GUARD, 0xc3)) {
		fprintf(stderr, "round %d mode %d: a receive wrote before its buffer\n", round_no,
			round_mode);
		failures++;
	}
	for (i = 0; i < NSTREAM; i++)
		if (!intact(dst_buf((int)i) + STREAM_MAX, GUARD, 0xc3)) {
			fprintf(stderr, "round %d mode %d: a receive wrote past its buffer\n",
				round_no, round_mode);
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
	if (memcmp(priv, priv_copy, PRIV_SIZE) != 0) {
		fprintf(stderr, "round %d mode %d: private memory outside every peer heap changed\n",
			round_no, round_mode);
		failures++;
	}
	/* Nothing after the sender's endpoint block (its lanes end it) is
	 * written by any operation of these rounds but a forger. */
	if (round_mode != 6 && memcmp(heap_a + lanes_end_a, snap_a + lanes_end_a, size_a - lanes_end_a) != 0) {
		fprintf(stderr, "round %d mode %d: the sender wrote past its staging lanes\n",
			round_no, round_mode);
		failures++;
	}
	if (memcmp(src, src_copy, NSTREAM * (size_t)STREAM_MAX) != 0) {
		fprintf(stderr, "round %d mode %d: a send changed its source\n", round_no,
			round_mode);
		failures++;
	}
}

/* ---- modes 0-2: registration table, inbox slots, CQ ring ---------------- */
static void round_classic(int known)
{
	unsigned char *buf = local + GUARD;
	uint64_t key = b.cards[0].key, addr = b.cards[0].base + (rnd() % 4096) * 8;
	size_t n = 1 + rnd() % 9000;
	uint64_t v[4] = { 1, 2, 3, 4 }, res[4];
	int i;

	if (round_mode == 0) {
		/* The target's heap header and registration table. */
		struct fi_xpu_shm_mr_entry *e =
			(struct fi_xpu_shm_mr_entry *)(void *)(tab_b + mr_off) + slot;
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
		check_rc(fi_xpu_fetch_atomic(&a.ep, v, 1, NULL, res, NULL, &raw_b, addr & ~7ULL, key,
					     FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM),
			 "fi_xpu_fetch_atomic");
		drain(&a.cq);
		drain(&b.cq);
	} else if (round_mode == 1) {
		/* A valid message (eager, or large enough to stream or go
		 * by rendezvous), then its slot, the inbox and the staging
		 * lanes are corrupted before the receiver looks. */
		size_t m = (rnd() & 1) ? 1 + rnd() % 4000 : 4097 + rnd() % 200000;
		const unsigned char *from = (rnd() & 1) ? a.heap : src;
		check_rc(fi_xpu_tsend(&a.ep, from, m, NULL, 0, &raw_b, 5, NULL, 0, FI_XPU_WORK_ITEM),
			 "fi_xpu_tsend");
		for (i = 0; i < 3; i++) {
			struct fi_xpu_shm_msg *h = inbox_slot(i == 0 ? 0 : rnd());
			maybe(&h->seq);
			maybe(&h->state);
			maybe(&h->len);
			maybe(&h->tag);
			maybe(&h->flags);
			maybe(&h->cstamp);
			maybe(&h->pstamp);
			maybe(&h->src_ep);
			maybe(&h->src_conn);
			maybe(&h->src_region);
			maybe(&h->src_off);
			maybe(&h->produced);
			maybe(&h->consumed);
			maybe(&h->src_gen);
		}
		if (rnd() % 4 == 0)
			blk_b->head = mutate(blk_b->head);
		if (rnd() % 4 == 0)
			blk_b->tail = mutate(blk_b->tail);
		/* The sender's lanes, which peers map read-only: through its
		 * own mapping, as a buggy sender would. */
		for (i = 0; i < 16; i++) {
			uint64_t lanes = FI_XPU_SHM_STAGE_LANES * FI_XPU_SHM_STAGE_LANE_SIZE;
			FI_XPU_SHM_P(unsigned char, ea->stage)[rnd() % lanes] = (unsigned char)rnd();
		}
		/* Receive into the middle of `dst`: guards on each side. */
		if (rnd() & 1)
			check_rc(fi_xpu_trecv(&b.ep, dst_buf(0), STREAM_MAX, NULL, NULL, 5, 0, NULL, 0,
					      FI_XPU_WORK_ITEM),
				 "fi_xpu_trecv");
		else
			check_rc(fi_xpu_recv(&b.ep, dst_buf(0), STREAM_MAX, NULL, NULL, NULL, 0,
					     FI_XPU_WORK_ITEM),
				 "fi_xpu_recv");
		for (i = 0; i < 3; i++) {
			drain(&b.cq);
			drain(&a.cq);
		}
	} else {
		/* The receiver's ring that takes remote completions. */
		uint64_t roff = fi_xpu_shm_ldr(&info_b->rx_cq);
		struct fi_xpu_shm_cq_ring *r = (struct fi_xpu_shm_cq_ring *)(void *)(heap_b + roff);
		struct fi_xpu_shm_cqe *q =
			(struct fi_xpu_shm_cqe *)(void *)((unsigned char *)r + FI_XPU_SHM_CQ_HDR);
		uint64_t entries = r->size;
		check_rc(fi_xpu_write(&a.ep, buf, 8, NULL, 9, &raw_b, b.cards[0].base, b.cards[0].key,
				      NULL, FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM),
			 "fi_xpu_write");
		maybe(&r->head);
		maybe(&r->tail);
		maybe(&r->size);
		maybe(&r->format);
		maybe(&r->overflow);
		maybe(&r->overflow_seen);
		for (i = 0; i < 4; i++) {
			struct fi_xpu_shm_cqe *c = q + rnd() % entries;
			maybe(&c->seq);
			maybe(&c->flags);
			maybe(&c->context);
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
			fi_addr_t from[4];
			check_rc(fi_xpu_cq_readfrom(&b.cq, e, 4, from, FI_XPU_WORK_ITEM),
				 "fi_xpu_cq_readfrom");
		}
	}
}

/* ---- mode 3: multi-lane streamed sends ---------------------------------- */
/* Corrupts one flow-control word (or the length or state) of one of the
 * first `k` inbox slots, which hold the streamed messages. */
static void corrupt_stream(int k)
{
	struct fi_xpu_shm_msg *m = inbox_slot(rnd() % (uint64_t)k);
	switch (rnd() % 10) {
	case 0:
	case 1:
	case 2: m->consumed = hostile_position_s(&rng, m->consumed); break;
	case 3:
	case 4: m->produced = hostile_position_s(&rng, m->produced); break;
	/* A third peer's best moves: let the sender refill the lane over
	 * bytes not yet taken, let the receiver take bytes not yet staged,
	 * replay a stamp, or say the transfer ended. */
	case 5: m->consumed = m->produced; break;
	case 6: m->produced = m->consumed + LANE; break;
	case 7: m->cstamp = m->pstamp; break;
	case 8: m->state = (rnd() & 1) ? FI_XPU_SHM_SLOT_RDV_DONE : FI_XPU_SHM_SLOT_CONSUMED; break;
	default: m->len = hostile_position_s(&rng, m->len); break;
	}
}

/* Up to one send per lane from unregistered memory, as many receives; the
 * endpoints progress in turns, with flow-control words corrupted between
 * turns unless `clean`, where every byte must arrive and every operation
 * complete exactly once. */
static void round_stream(int clean)
{
	int k = 1 + (int)(rnd() % NSTREAM), i, step, got_rx = 0, got_tx = 0;
	size_t len[NSTREAM];
	struct fi_cq_tagged_entry e[8];
	int64_t n;

	for (i = 0; i < k; i++) {
		len[i] = LANE + 1 + rnd() % (STREAM_MAX - LANE);
		check_rc(fi_xpu_tsend(&a.ep, src + (size_t)i * STREAM_MAX, len[i], NULL, 0, &raw_b,
				      100 + (uint64_t)i, (void *)(uintptr_t)(i + 1), 0,
				      FI_XPU_WORK_ITEM),
			 "fi_xpu_tsend");
	}
	for (i = 0; i < k; i++)
		check_rc(fi_xpu_trecv(&b.ep, dst_buf(i), STREAM_MAX, NULL, NULL, 100 + (uint64_t)i, 0,
				      (void *)(uintptr_t)(i + 1), 0, FI_XPU_WORK_ITEM),
			 "fi_xpu_trecv");
	for (step = 0; step < 48; step++) {
		check_rc(fi_xpu_flush(&a.ep, 0, FI_XPU_WORK_ITEM), "fi_xpu_flush");
		if (!clean && rnd() % 4 == 0) {
			/* A third peer's hidden overwrite: the sender is told
			 * part of the staged bytes were taken and refills over
			 * them; then the produced word is put back so that the
			 * receiver's bounds see nothing wrong. */
			struct fi_xpu_shm_msg *m = inbox_slot(rnd() % (uint64_t)k);
			uint64_t p0 = m->produced, c0 = m->consumed;
			if (p0 > c0 && p0 - c0 <= LANE) {
				m->consumed = c0 + 1 + rnd() % (p0 - c0);
				check_rc(fi_xpu_flush(&a.ep, 0, FI_XPU_WORK_ITEM), "fi_xpu_flush");
				m->produced = p0;
			}
		} else if (!clean && rnd() % 3 == 0) {
			corrupt_stream(k);
			/* The sender may act on it before the receiver does. */
			if (rnd() & 1)
				check_rc(fi_xpu_flush(&a.ep, 0, FI_XPU_WORK_ITEM), "fi_xpu_flush");
		}
		check_rc(fi_xpu_flush(&b.ep, 0, FI_XPU_WORK_ITEM), "fi_xpu_flush");
		if (!clean && rnd() % 3 == 0)
			corrupt_stream(k);
	}
	/* A receive that completes successfully holds exactly what was sent,
	 * however the words were corrupted; corrupted rounds may end
	 * receives in errors (read and dropped here) or leave them pending. */
	for (;;) {
		n = fi_xpu_cq_read(&b.cq, e, 8, FI_XPU_WORK_ITEM);
		if (n == -FI_EAVAIL && !clean) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			check_rc(fi_xpu_cq_readerr(&b.cq, &err, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_cq_readerr");
			continue;
		}
		if (n <= 0)
			break;
		for (i = 0; i < n; i++) {
			int j = (int)(uintptr_t)e[i].op_context - 1;
			size_t x;
			got_rx++;
			if (j < 0 || j >= k || e[i].len != len[j] || e[i].tag != 100 + (uint64_t)j) {
				fprintf(stderr, "round %d: stream receive completed wrongly\n",
					round_no);
				failures++;
				continue;
			}
			for (x = 0; x < len[j]; x++)
				if (dst_buf(j)[x] != src[(size_t)j * STREAM_MAX + x]) {
					fprintf(stderr, "round %d: stream %d byte %zu wrong\n",
						round_no, j, x);
					failures++;
					break;
				}
		}
	}
	if (!clean) {
		for (i = 0; i < 3; i++)
			drain(&a.cq);
		return;
	}
	check_rc(n, "fi_xpu_cq_read");
	while ((n = fi_xpu_cq_read(&a.cq, e, 8, FI_XPU_WORK_ITEM)) > 0)
		got_tx += (int)n;
	check_rc(n, "fi_xpu_cq_read");
	if (got_rx != k || got_tx != k) {
		fprintf(stderr, "round %d: %d streams, %d receives and %d sends completed\n",
			round_no, k, got_rx, got_tx);
		failures++;
	}
}

/* ---- mode 4: endpoint-block offsets near 2^64 ---------------------------- */
static void round_offsets(void)
{
	unsigned char *buf = local + GUARD;
	uint64_t v[2] = { 1, 2 }, res[2];
	uint64_t *w[3] = { &info_b->rx_cq, &info_b->rem_write_cntr, &info_b->rem_read_cntr };
	int i;
	for (i = 0; i < 3; i++)
		if (rnd() % 4 != 0)
			*w[i] = hostile_offset_s(&rng, *w[i]);
	check_rc(fi_xpu_write(&a.ep, buf, 8, NULL, 9, &raw_b, b.cards[0].base, b.cards[0].key,
			      NULL, FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM),
		 "fi_xpu_write");
	check_rc(fi_xpu_read(&a.ep, buf, 8, NULL, &raw_b, b.cards[0].base, b.cards[0].key, NULL, 0,
			     FI_XPU_WORK_ITEM),
		 "fi_xpu_read");
	check_rc(fi_xpu_atomic(&a.ep, v, 2, NULL, &raw_b, b.cards[0].base, b.cards[0].key,
			       FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM),
		 "fi_xpu_atomic");
	check_rc(fi_xpu_fetch_atomic(&a.ep, v, 1, NULL, res, NULL, &raw_b, b.cards[0].base,
				     b.cards[0].key, FI_UINT64, FI_ATOMIC_READ, NULL, 0,
				     FI_XPU_WORK_ITEM),
		 "fi_xpu_fetch_atomic");
	drain(&a.cq);
	drain(&b.cq);
}

/* ---- mode 5: corruption racing the operations ---------------------------- */
static int race_on, race_parked, race_stop;

static uint64_t *race_word(uint64_t *s)
{
	uint64_t roff = fi_xpu_shm_ldr(&((struct fi_xpu_shm_ep_info *)(void *)(snap_tab_b +
			((unsigned char *)info_b - tab_b)))->rx_cq);
	switch (rnd_s(s) % 6) {
	case 0:
	case 1: {
		struct fi_xpu_shm_msg *m = inbox_slot(rnd_s(s) % 8);
		return (uint64_t *)(void *)m + rnd_s(s) % 14;
	}
	case 2: {
		uint64_t *bw[5] = { &blk_b->head, &blk_b->tail, &info_b->rx_cq,
				    &info_b->rem_write_cntr, &info_b->rem_read_cntr };
		return bw[rnd_s(s) % 5];
	}
	case 3: {
		struct fi_xpu_shm_cq_ring *r = (struct fi_xpu_shm_cq_ring *)(void *)(heap_b + roff);
		uint64_t *rw[5] = { &r->head, &r->tail, &r->size, &r->overflow, &r->overflow_seen };
		if (rnd_s(s) & 1)
			return rw[rnd_s(s) % 5];
		return (uint64_t *)(void *)((unsigned char *)r + FI_XPU_SHM_CQ_HDR) +
		       rnd_s(s) % (8 * 12);
	}
	case 4: {
		struct fi_xpu_shm_mr_entry *e =
			(struct fi_xpu_shm_mr_entry *)(void *)(tab_b + mr_off) + slot;
		return (uint64_t *)(void *)e + rnd_s(s) % 6;
	}
	default:
		return (rnd_s(s) & 1) ? &hb->mr_off : &hb->mr_slots;
	}
}

static void *corruptor(void *arg)
{
	uint64_t s = 0x2545f4914f6cdd1dULL;
	(void)arg;
	while (!__atomic_load_n(&race_stop, __ATOMIC_SEQ_CST)) {
		uint64_t *w, v;
		/* Dekker-style: announce, then look; the main thread stops
		 * us, then waits for the announcement that we stopped. */
		__atomic_store_n(&race_parked, 0, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&race_on, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&race_parked, 1, __ATOMIC_SEQ_CST);
			while (!__atomic_load_n(&race_on, __ATOMIC_SEQ_CST) &&
			       !__atomic_load_n(&race_stop, __ATOMIC_SEQ_CST))
				sched_yield();
			continue;
		}
		w = race_word(&s);
		v = __atomic_load_n(w, __ATOMIC_RELAXED);
		if (w == &info_b->rx_cq || w == &info_b->rem_write_cntr || w == &info_b->rem_read_cntr)
			v = hostile_offset_s(&s, v);
		else if (rnd_s(&s) & 1)
			v = hostile_position_s(&s, v);
		else
			v = mutate_s(&s, v);
		__atomic_store_n(w, v, __ATOMIC_RELAXED);
		if (rnd_s(&s) % 4 == 0)
			sched_yield();
	}
	__atomic_store_n(&race_parked, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void round_race(void)
{
	int i, ops = 24 + (int)(rnd() % 24), nrecv = 0;
	unsigned char *buf = local + GUARD;
	uint64_t v[2] = { 1, 2 }, res[2];

	__atomic_store_n(&race_on, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < ops; i++) {
		size_t n;
		switch (rnd() % 9) {
		case 0:
			n = 1 + rnd() % 3000;
			check_rc(fi_xpu_tsend(&a.ep, src, n, NULL, 0, &raw_b, 7, NULL, 0,
					      FI_XPU_WORK_ITEM),
				 "fi_xpu_tsend");
			break;
		case 1:
			n = LANE + 1 + rnd() % (STREAM_MAX - LANE);
			check_rc(fi_xpu_tsend(&a.ep, src + (rnd() % NSTREAM) * STREAM_MAX, n, NULL,
					      0, &raw_b, 7, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_tsend");
			break;
		case 2:
			check_rc(fi_xpu_trecv(&b.ep, dst_buf(nrecv++ % NSTREAM), STREAM_MAX, NULL,
					      NULL, 7, 0, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_trecv");
			break;
		case 3:
			check_rc(fi_xpu_write(&a.ep, buf, 64, NULL, 9, &raw_b, b.cards[0].base,
					      b.cards[0].key, NULL, FI_REMOTE_CQ_DATA,
					      FI_XPU_WORK_ITEM),
				 "fi_xpu_write");
			break;
		case 4:
			check_rc(fi_xpu_read(&a.ep, buf, 64, NULL, &raw_b, b.cards[0].base + 64,
					     b.cards[0].key, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_read");
			break;
		case 5:
			check_rc(fi_xpu_fetch_atomic(&a.ep, v, 1, NULL, res, NULL, &raw_b,
						     b.cards[0].base + 128, b.cards[0].key,
						     FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM),
				 "fi_xpu_fetch_atomic");
			break;
		case 6:
			check_rc(fi_xpu_flush(&a.ep, 0, FI_XPU_WORK_ITEM), "fi_xpu_flush");
			break;
		case 7:
			check_rc(fi_xpu_flush(&b.ep, 0, FI_XPU_WORK_ITEM), "fi_xpu_flush");
			break;
		default:
			drain((rnd() & 1) ? &a.cq : &b.cq);
			break;
		}
	}
	__atomic_store_n(&race_on, 0, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&race_parked, __ATOMIC_SEQ_CST))
		sched_yield();
}

/* ---- forge: completions a peer publishes ------------------------------- */
#define FORGED 0xdeadbeefULL

/* Publishes one send completion with a context of the peer's choosing in
 * the ring at `ring` (as the peer maps it), the way device code does. */
static void forge_into(unsigned char *ring)
{
	struct fi_xpu_shm_cq_ring *r = (struct fi_xpu_shm_cq_ring *)(void *)ring;
	uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), size = r->size;
	struct fi_xpu_shm_cqe *e;
	if (size == 0 || (size & (size - 1)))
		return;
	e = (struct fi_xpu_shm_cqe *)(void *)(ring + FI_XPU_SHM_CQ_HDR) + (h & (size - 1));
	memset(e, 0, sizeof(*e));
	e->flags = FI_SEND | FI_MSG;
	e->context = FORGED;
	e->len = 1;
	e->buf = FORGED;
	__atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&e->seq, h + 1, __ATOMIC_RELEASE);
}

static int in_heap_a(uint64_t p)
{
	return p >= (uint64_t)(uintptr_t)heap_a && p < (uint64_t)(uintptr_t)heap_a + size_a;
}

/* Reads `cq` empty; counts entries, fails on any that carries the forged
 * context or buffer or claims to be anything but a remote completion. */
static int read_checked(struct fid_xpu_cq *cq, const char *which)
{
	struct fi_cq_tagged_entry e[8];
	int64_t n;
	int got = 0, i;
	while ((n = fi_xpu_cq_read(cq, e, 8, FI_XPU_WORK_ITEM)) > 0)
		for (i = 0; i < n; i++, got++)
			if ((uint64_t)(uintptr_t)e[i].op_context == FORGED ||
			    (uint64_t)(uintptr_t)e[i].buf == FORGED ||
			    e[i].flags != (FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA)) {
				fprintf(stderr,
					"round %d: %s returned a completion a peer forged "
					"(flags %#llx context %p)\n",
					round_no, which, (unsigned long long)e[i].flags,
					e[i].op_context);
				failures++;
			}
	EXPECT(n, -FI_EAGAIN);
	return got;
}

static void round_forge(struct fid_xpu_cq *txcq, unsigned char *theap_a)
{
	struct fi_xpu_shm_cq_dev *qa = (struct fi_xpu_shm_cq_dev *)a.cq.fid.prov_ctx;
	struct fi_xpu_shm_cq_dev *qt = (struct fi_xpu_shm_cq_dev *)txcq->fid.prov_ctx;
	uint64_t roff = info_a->rx_cq;
	/* Every completion ring of `a` that lies in memory the peer maps. */
	if (in_heap_a(qa->ring))
		forge_into(theap_a + (qa->ring - (uint64_t)(uintptr_t)heap_a));
	if (in_heap_a(qt->ring))
		forge_into(theap_a + (qt->ring - (uint64_t)(uintptr_t)heap_a));
	/* The ring that takes remote completions is the peer's to write. */
	if (roff)
		forge_into(theap_a + roff);
	if (read_checked(txcq, "a CQ that takes no remote events") != 0) {
		fprintf(stderr, "round %d: a CQ that takes no remote events got a completion\n",
			round_no);
		failures++;
	}
	/* Not even the ring that takes remote completions passes an entry
	 * on that no connection stamped: the forged one is refused. */
	EXPECT(read_checked(&a.cq, "the receive CQ"), 0);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	int known = strcmp(what, "known") == 0;
	int stream = strcmp(what, "stream") == 0, offsets = strcmp(what, "offsets") == 0;
	int race = strcmp(what, "race") == 0, forge = strcmp(what, "forge") == 0;
	int rounds = stream ? 300 : offsets ? 600 : race ? 400 : forge ? 50 : ROUNDS;
	struct fid_xpu_host_cq *hcq2 = NULL;
	struct fid_xpu_host_ep *hep2 = NULL;
	struct fid_xpu_cq cq2;
	unsigned char *theap_a = NULL;
	struct fi_xpu_shm_ctx_dev *ca, *cb;
	const struct fi_xpu_shm_peer_addr *pa;
	const struct fi_xpu_shm_peer_map *pm;
	pthread_t thr;
	fi_addr_t fa;
	size_t len, i;
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
	dst = malloc(DST_SIZE);
	src = malloc(NSTREAM * (size_t)STREAM_MAX);
	src_copy = malloc(NSTREAM * (size_t)STREAM_MAX);
	priv = malloc(PRIV_SIZE);
	priv_copy = malloc(PRIV_SIZE);
	REQUIRE(local && dst && src && src_copy && priv && priv_copy, 1);
	for (i = 0; i < NSTREAM * (size_t)STREAM_MAX; i++)
		src[i] = src_byte(i);
	memcpy(src_copy, src, NSTREAM * (size_t)STREAM_MAX);
	/* Private memory that looks like an empty completion ring to whoever
	 * is led to it. */
	memset(priv, 0x77, PRIV_SIZE);
	memset(priv + PRIV_RING, 0, FI_XPU_SHM_CQ_HDR + 4 * sizeof(struct fi_xpu_shm_cqe));
	((struct fi_xpu_shm_cq_ring *)(void *)(priv + PRIV_RING))->size = 4;
	memset(priv + PRIV_RING + 1024, 0, 1024);
	memcpy(priv_copy, priv, PRIV_SIZE);

	ea = (struct fi_xpu_shm_ep_dev *)a.ep.fid.prov_ctx;
	eb = (struct fi_xpu_shm_ep_dev *)b.ep.fid.prov_ctx;
	ca = FI_XPU_SHM_P(struct fi_xpu_shm_ctx_dev, ea->ctx);
	cb = FI_XPU_SHM_P(struct fi_xpu_shm_ctx_dev, eb->ctx);
	heap_a = FI_XPU_SHM_P(unsigned char, ca->heap_base);
	heap_b = FI_XPU_SHM_P(unsigned char, cb->heap_base);
	size_a = ((struct fi_xpu_shm_heap_hdr *)(void *)heap_a)->size;
	size_b = ((struct fi_xpu_shm_heap_hdr *)(void *)heap_b)->size;

	blk_a = FI_XPU_SHM_P(struct fi_xpu_shm_ep_block, ea->block);
	blk_b = FI_XPU_SHM_P(struct fi_xpu_shm_ep_block, eb->block);
	qb = (struct fi_xpu_shm_cq_dev *)b.cq.fid.prov_ctx;
	(void)qb;
	REQUIRE((unsigned char *)blk_b > heap_b && (unsigned char *)blk_b < heap_b + size_b, 1);
	info_a = FI_XPU_SHM_P(struct fi_xpu_shm_ep_info,
			      ea->stage + FI_XPU_SHM_STAGE_LANES * FI_XPU_SHM_STAGE_LANE_SIZE);
	lanes_end_a = (uint64_t)((unsigned char *)blk_a - heap_a) + FI_XPU_SHM_PEER_BLOCK;
	REQUIRE(lanes_end_a < size_a, 1);
	pa = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, raw_b);
	pm = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
	theap_b = FI_XPU_SHM_P(unsigned char,
			       pm->base[FI_XPU_SHM_P(const struct fi_xpu_shm_ep_info,
						     pm->base[pa->info_region] + pa->info_off)
						->heap_region]);
	REQUIRE(theap_b != NULL, 1);
	tab_b = owner_mapping(FI_XPU_SHM_P(void, pm->base[b.cards[0].key >> 48]), &size_tab_b);
	REQUIRE(tab_b != NULL, 1);
	info_b = (struct fi_xpu_shm_ep_info *)(void *)(tab_b + eb->stage_off +
						      FI_XPU_SHM_STAGE_LANES *
							      FI_XPU_SHM_STAGE_LANE_SIZE);
	REQUIRE(info_b->rx_cq != 0, 1);
	hb = (struct fi_xpu_shm_heap_hdr *)(void *)tab_b;
	below_ok = mapped_rw(theap_b - BELOW);
	snap_a = malloc(size_a);
	snap_b = malloc(size_b);
	snap_tab_b = malloc(size_tab_b);
	REQUIRE(snap_a && snap_b && snap_tab_b, 1);
	memcpy(snap_tab_b, tab_b, size_tab_b);
	memcpy(snap_a, heap_a, size_a);
	memcpy(snap_b, heap_b, size_b);
	snap_ea = *ea;
	snap_eb = *eb;
	slot = (b.cards[0].key >> 32) & 0xffff;
	mr_off = hb->mr_off;
	if (race)
		REQUIRE(pthread_create(&thr, NULL, corruptor, NULL), 0);
	if (forge) {
		/* A second endpoint of `a` whose CQ takes its sends only. */
		open_send_ep(&a, 64, FI_CQ_FORMAT_TAGGED, &hcq2, &hep2, &cq2);
		pa = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, raw_a);
		pm = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
		theap_a = FI_XPU_SHM_P(unsigned char,
				       pm->base[FI_XPU_SHM_P(const struct fi_xpu_shm_ep_info,
							     pm->base[pa->info_region] + pa->info_off)
							->heap_region]);
		REQUIRE(theap_a != NULL, 1);
		/* The heap (and everything in it) changed: snapshot it again. */
		memcpy(snap_a, heap_a, size_a);
		snap_ea = *ea;
	}

	restore();
	for (round_no = 0; round_no < rounds && !failures; round_no++) {
		/* Forged entries are all a forge round leaves: its rings keep
		 * their positions from round to round. */
		if (!forge)
			restore();
		if (below_ok)
			memcpy(below_snap, theap_b - BELOW, BELOW);
		alarm(60);
		if (stream) {
			round_mode = 3;
			round_stream(round_no % 4 == 0);
		} else if (offsets) {
			round_mode = 4;
			round_offsets();
		} else if (race) {
			round_mode = 5;
			round_race();
		} else if (forge) {
			round_mode = 6;
			round_forge(&cq2, theap_a);
		} else {
			round_mode = (int)(rnd() % 3);
			round_classic(known);
		}
		alarm(0);
		check_memory();
		/* No operation of these modes addresses the bytes before the
		 * peer heap (the classic modes write anywhere registered). */
		if ((offsets || race || stream) && below_ok &&
		    memcmp(below_snap, theap_b - BELOW, BELOW) != 0) {
			fprintf(stderr, "round %d mode %d: memory before the peer heap changed\n",
				round_no, round_mode);
			failures++;
		}
	}
	if (race) {
		__atomic_store_n(&race_stop, 1, __ATOMIC_SEQ_CST);
		pthread_join(thr, NULL);
	}
	restore();
	if (forge) {
		EXPECT(fi_xpu_close(&hep2->fid), 0);
		EXPECT(fi_xpu_close(&hcq2->fid), 0);
	}
	EXPECT(fi_xpu_free(b.ctx, spare), 0);
	free(snap_a);
	free(snap_b);
	free(snap_tab_b);
	free(local);
	free(dst);
	free(src);
	free(src_copy);
	free(priv);
	free(priv_copy);
	close_world(&a);
	close_world(&b);
	/* One process plays both peers: the fork helpers stay unused. */
	(void)spawn;
	(void)finish;
	if (failures) {
		fprintf(stderr, "shm_fuzz %s: FAILED (%d) at round %d\n", what, failures, round_no);
		return 1;
	}
	printf("shm_fuzz%s%s rounds=%d: ok\n", *what ? " " : "", what, round_no);
	return 0;
}
