/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A peer claiming another peer's source, over the shm provider. Rank 0 is
 * the victim, rank 1 an honest peer (A), rank 2 a hostile one (C); all are
 * in each other's address vectors. Every peer can write the victim's inbox
 * and the ring its receive CQ takes remote completions in, so C forges,
 * in both:
 *   - replays of A's genuine entries (copied whole) at new positions;
 *   - entries of its own, genuinely sent, relabelled with A's source
 *     (domain nonce and endpoint id);
 *   - entries written from scratch that name A as their source.
 * The victim must attribute nothing of that to A: a receive directed at A
 * takes only what A sent; what arrives is refused or attributed to C
 * (fi_xpu_cq_readfrom), never to A. Then A's genuine message and remote
 * completion still arrive, attributed to A.
 * Prints "shm_source: ok".
 *
 * With the argument "tamper", C alters A's messages in flight instead:
 * the tag of one, a byte of another's data, the length of a third; a
 * fourth is left alone. The victim must receive none of the altered ones
 * as if A had sent it: the relabelled and resized ones are refused, the
 * one with changed bytes fails with FI_EIO, and the untouched one
 * arrives intact (truncated by a short buffer, FI_ETRUNC, which checks
 * the stamp over the copy and the rest left in the slot).
 * Prints "shm_source: ok".
 */
#include "shm_common.h"

#include <time.h>

#define TAG_A 0xa1
#define TAG_C 0xc1
#define VAL_A 0xaaaa0001ULL
#define VAL_C 0xcccc0001ULL
#define DATA_A 0xa1a1ULL
#define DATA_C 0xc1c1ULL
#define REPLAYS 4

static struct world W;

static void pause_ms(int ms)
{
	struct timespec t = { 0, (long)ms * 1000000L };
	nanosleep(&t, NULL);
}

/* ---- what the hostile peer sees of the victim ----------------------------- */
struct view {
	const struct fi_xpu_shm_peer_addr *a; /* our record of A */
	unsigned char *heap;                  /* the victim's heap, as we map it */
	struct fi_xpu_shm_ep_block *blk;      /* the victim's endpoint block */
	const struct fi_xpu_shm_ep_info *info; /* what the victim says of it */
};

static struct view view_of_victim(void)
{
	const struct fi_xpu_shm_peer_addr *pa =
		FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, W.raw[0]);
	const struct fi_xpu_shm_peer_map *pm = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
	/* The victim endpoint's information, in its table region. */
	const struct fi_xpu_shm_ep_info *vi = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_info,
							  pm->base[pa->info_region] + pa->info_off);
	struct view v;
	v.a = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, W.raw[1]);
	v.heap = FI_XPU_SHM_P(unsigned char, pm->base[vi->heap_region]);
	REQUIRE(v.heap != NULL, 1);
	v.blk = (struct fi_xpu_shm_ep_block *)(void *)(v.heap + vi->block_off);
	v.info = vi;
	return v;
}

static struct fi_xpu_shm_msg *slot(const struct view *v, uint64_t pos)
{
	return (struct fi_xpu_shm_msg *)(void *)((unsigned char *)(v->blk + 1) +
						  (pos % FI_XPU_SHM_INBOX_SLOTS) *
							  FI_XPU_SHM_SLOT_SIZE);
}

/* Claims the next inbox position as a sender does. */
static uint64_t claim_slot(const struct view *v)
{
	uint64_t h = __atomic_load_n(&v->blk->head, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&v->blk->head, &h, h + 1, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return h;
}

static struct fi_xpu_shm_cq_ring *remote_ring(const struct view *v)
{
	uint64_t off = v->info->rx_cq;
	REQUIRE(off != 0, 1);
	return (struct fi_xpu_shm_cq_ring *)(void *)(v->heap + off);
}

static struct fi_xpu_shm_cqe *ring_entry(struct fi_xpu_shm_cq_ring *r, uint64_t pos)
{
	return (struct fi_xpu_shm_cqe *)(void *)((unsigned char *)r + FI_XPU_SHM_CQ_HDR) +
	       (pos & (r->size - 1));
}

static uint64_t claim_entry(struct fi_xpu_shm_cq_ring *r)
{
	uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&r->head, &h, h + 1, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return h;
}

/* Forged inbox entries: replays of A's message, our own relabelled, and
 * one from scratch. */
static void forge_messages(void)
{
	struct view v = view_of_victim();
	const struct fi_xpu_shm_msg *genuine = NULL;
	struct fi_xpu_shm_msg *m;
	uint64_t i, h, val = VAL_C;

	for (i = 0; i < FI_XPU_SHM_INBOX_SLOTS; i++) {
		m = slot(&v, i);
		if (m->tag == TAG_A && m->src_ep == v.a->ep_id)
			genuine = m;
	}
	REQUIRE(genuine != NULL, 1);
	for (i = 0; i < REPLAYS; i++) {
		h = claim_slot(&v);
		m = slot(&v, h);
		memcpy(m, genuine, FI_XPU_SHM_MSG_HDR + 8);
		m->state = FI_XPU_SHM_SLOT_NEW;
		__atomic_store_n(&m->seq, h + 1, __ATOMIC_RELEASE);
	}
	/* Our own message, sent as any, then claiming A as its source. */
	h = __atomic_load_n(&v.blk->head, __ATOMIC_ACQUIRE);
	REQUIRE(fi_xpu_tsend(&W.ep, &val, 8, NULL, 0, &W.raw[0], TAG_A, &val, 0, FI_XPU_WORK_ITEM),
		0);
	m = slot(&v, h);
	REQUIRE(m->seq, h + 1);
	m->src_ep = v.a->ep_id;
	m->src_conn = genuine->src_conn;
	m->src_gen = genuine->src_gen;
	/* From scratch: everything names A. */
	h = claim_slot(&v);
	m = slot(&v, h);
	memset(m, 0, FI_XPU_SHM_MSG_HDR);
	m->len = 8;
	m->tag = TAG_A;
	m->flags = FI_TAGGED;
	m->src_ep = v.a->ep_id;
	m->src_conn = genuine->src_conn;
	m->src_gen = genuine->src_gen;
	memcpy((unsigned char *)m + FI_XPU_SHM_MSG_HDR, &val, 8);
	__atomic_store_n(&m->seq, h + 1, __ATOMIC_RELEASE);
}

/* The same in the ring of remote completions. */
static void forge_completions(void)
{
	struct view v = view_of_victim();
	struct fi_xpu_shm_cq_ring *r = remote_ring(&v);
	const struct fi_xpu_shm_cqe *genuine = NULL;
	struct fi_xpu_shm_cqe *e;
	struct fi_cq_tagged_entry ce;
	uint64_t i, h, val = 1;

	for (i = 0; i < r->size; i++) {
		e = ring_entry(r, i);
		if (e->data == DATA_A && e->src_nonce == v.a->nonce)
			genuine = e;
	}
	REQUIRE(genuine != NULL, 1);
	for (i = 0; i < REPLAYS; i++) {
		h = claim_entry(r);
		e = ring_entry(r, h);
		memcpy(e, genuine, sizeof(*e));
		__atomic_store_n(&e->seq, h + 1, __ATOMIC_RELEASE);
	}
	h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	REQUIRE(fi_xpu_write(&W.ep, &val, 8, NULL, DATA_C, &W.raw[0], W.cards[0].base + 64,
			     W.cards[0].key, &val, FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM), 0);
	REQUIRE(next(&W, &ce, NULL), 1);
	e = ring_entry(r, h);
	REQUIRE(e->seq, h + 1);
	e->src_nonce = v.a->nonce;
	e->src_ep = v.a->ep_id;
	h = claim_entry(r);
	e = ring_entry(r, h);
	memset(e, 0, sizeof(*e));
	e->flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
	e->data = DATA_C;
	e->src_nonce = v.a->nonce;
	e->src_ep = v.a->ep_id;
	__atomic_store_n(&e->seq, h + 1, __ATOMIC_RELEASE);
}

/* ---- the victim ------------------------------------------------------------ */
/* Reads what arrives for a while: how many completions, and how many of
 * them were attributed to A; each must carry C's value or data. */
static int drain_for(int ms, int *as_a, const uint64_t *rx, int nrx)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	int got = 0, k, i;
	for (k = 0; k < ms; k++) {
		int64_t n;
		memset(&e, 0, sizeof(e));
		src = FI_ADDR_NOTAVAIL;
		n = fi_xpu_cq_readfrom(&W.cq, &e, 1, &src, FI_XPU_WORK_ITEM);
		if (n == -FI_EAGAIN) {
			pause_ms(1);
			continue;
		}
		EXPECT(n, 1);
		if (n != 1)
			break;
		got++;
		if (src == W.fa[1]) {
			fprintf(stderr, "a forged %s was attributed to A (flags %#llx)\n",
				(e.flags & FI_RECV) ? "message" : "remote completion",
				(unsigned long long)e.flags);
			(*as_a)++;
		} else {
			EXPECT(src, W.fa[2]);
		}
		if (e.flags & FI_RECV)
			for (i = 0; i < nrx; i++)
				if (e.op_context == &rx[i])
					EXPECT(rx[i], VAL_C);
		if (e.flags & FI_REMOTE_CQ_DATA)
			EXPECT(e.data, DATA_C);
	}
	return got;
}

static void victim(void)
{
	static uint64_t rx[8], directed;
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	int as_a = 0, msgs, cqes, i;

	/* Genuine first: A's message and remote completion, attributed to A. */
	EXPECT(fi_xpu_trecv(&W.ep, &rx[0], 8, NULL, NULL, TAG_A, 0, &rx[0], 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(next(&W, &e, &src), 1);
	EXPECT(src, W.fa[1]);
	EXPECT(rx[0], VAL_A);
	EXPECT(next(&W, &e, &src), 1);
	EXPECT(src, W.fa[1]);
	EXPECT(e.data, DATA_A);
	barrier(&W); /* C forges messages */
	barrier(&W);
	/* A receive directed at A: nothing that arrived is A's. */
	EXPECT(fi_xpu_trecv(&W.ep, &directed, 8, NULL, &W.raw[1], TAG_A, 0, &directed, 0,
			    FI_XPU_WORK_ITEM), 0);
	for (i = 0; i < 8; i++)
		EXPECT(fi_xpu_trecv(&W.ep, &rx[i], 8, NULL, NULL, TAG_A, 0, &rx[i], 0,
				    FI_XPU_WORK_ITEM), 0);
	msgs = drain_for(200, &as_a, rx, 8);
	EXPECT(directed, 0);
	barrier(&W); /* C forges completions */
	barrier(&W);
	cqes = drain_for(200, &as_a, rx, 8);
	EXPECT(as_a, 0);
	/* What A sends still arrives as A's. */
	barrier(&W);
	EXPECT(next(&W, &e, &src), 1);
	EXPECT(e.op_context == &directed, 1);
	EXPECT(src, W.fa[1]);
	EXPECT(directed, VAL_A + 1);
	EXPECT(next(&W, &e, &src), 1);
	EXPECT(src, W.fa[1]);
	EXPECT(e.data, DATA_A + 1);
	printf("shm_source: %d forged messages and %d forged remote completions; %d delivered, "
	       "%d attributed to A\n",
	       REPLAYS + 2, REPLAYS + 2, msgs + cqes, as_a);
}

static void honest(uint64_t round)
{
	static uint64_t val;
	struct fi_cq_tagged_entry e;
	val = VAL_A + round;
	REQUIRE(fi_xpu_tsend(&W.ep, &val, 8, NULL, 0, &W.raw[0], TAG_A, &val, 0, FI_XPU_WORK_ITEM),
		0);
	REQUIRE(next(&W, &e, NULL), 1);
	REQUIRE(fi_xpu_write(&W.ep, &val, 8, NULL, DATA_A + round, &W.raw[0],
			     W.cards[0].base + 128, W.cards[0].key, &val, FI_REMOTE_CQ_DATA,
			     FI_XPU_WORK_ITEM), 0);
	REQUIRE(next(&W, &e, NULL), 1);
}

/* ---- altering messages in flight ----------------------------------------- */
#define TAG_T(k) (0x7a00 + (k))
#define TAMPERED 3

static const unsigned char tamper_bytes[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

static struct fi_xpu_shm_msg *find_sent(const struct view *v, uint64_t tag)
{
	uint64_t i;
	for (i = 0; i < FI_XPU_SHM_INBOX_SLOTS; i++) {
		struct fi_xpu_shm_msg *m = slot(v, i);
		if (m->tag == tag && m->src_ep == v->a->ep_id && m->state == FI_XPU_SHM_SLOT_NEW)
			return m;
	}
	return NULL;
}

static void tamper(void)
{
	struct view v = view_of_victim();
	struct fi_xpu_shm_msg *m;
	m = find_sent(&v, TAG_T(0));
	REQUIRE(m != NULL, 1);
	m->tag = TAG_C; /* now it would match the victim's receive for C */
	m = find_sent(&v, TAG_T(1));
	REQUIRE(m != NULL, 1);
	((unsigned char *)m + FI_XPU_SHM_MSG_HDR)[3] ^= 0xff;
	m = find_sent(&v, TAG_T(2));
	REQUIRE(m != NULL, 1);
	m->len = 8;
}

static void send_for_tamper(void)
{
	static unsigned char buf[4][16];
	struct fi_cq_tagged_entry e;
	int k;
	for (k = 0; k < 4; k++) {
		memcpy(buf[k], tamper_bytes, sizeof(buf[k]));
		REQUIRE(fi_xpu_tsend(&W.ep, buf[k], 16, NULL, 0, &W.raw[0], TAG_T(k), buf[k], 0,
				     FI_XPU_WORK_ITEM), 0);
		REQUIRE(next(&W, &e, NULL), 1);
	}
}

static void victim_of_tamper(void)
{
	static unsigned char rx[5][16];
	static const uint64_t tags[5] = { TAG_C, TAG_T(0), TAG_T(1), TAG_T(2), TAG_T(3) };
	int done[5] = { 0 }, errs[5] = { 0 }, k, ms;
	for (k = 0; k < 5; k++)
		EXPECT(fi_xpu_trecv(&W.ep, rx[k], k == 4 ? 8 : 16, NULL, NULL, tags[k], 0, rx[k], 0,
				    FI_XPU_WORK_ITEM), 0);
	for (ms = 0; ms < 300; ms++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry ee;
		int64_t n = fi_xpu_cq_read(&W.cq, &e, 1, FI_XPU_WORK_ITEM);
		void *ctx = NULL;
		int err = 0;
		if (n == -FI_EAGAIN) {
			pause_ms(1);
			continue;
		}
		if (n == -FI_EAVAIL) {
			memset(&ee, 0, sizeof(ee));
			EXPECT(fi_xpu_cq_readerr(&W.cq, &ee, 0, FI_XPU_WORK_ITEM), 1);
			ctx = ee.op_context;
			err = ee.err;
			if (err == FI_ETRUNC)
				EXPECT(ee.olen, 8);
		} else {
			EXPECT(n, 1);
			ctx = e.op_context;
		}
		for (k = 0; k < 5; k++)
			if (ctx == rx[k]) {
				done[k]++;
				errs[k] = err;
			}
	}
	for (k = 0; k < 5; k++)
		printf("shm_source: receive for tag %#llx: %d completion(s), error %d\n",
		       (unsigned long long)tags[k], done[k], errs[k]);
	/* Relabelled and resized: refused, so their receives never complete. */
	EXPECT(done[0], 0);
	EXPECT(done[1], 0);
	EXPECT(done[3], 0);
	/* Changed bytes: the receive fails. */
	EXPECT(done[2], 1);
	EXPECT(errs[2], FI_EIO);
	/* Untouched: intact, truncated to the 8-byte buffer. */
	EXPECT(done[4], 1);
	EXPECT(errs[4], FI_ETRUNC);
	EXPECT(memcmp(rx[4], tamper_bytes, 8), 0);
	/* What is left is cancelled at close. */
}

static int tamper_main(void)
{
	if (W.rank == 0) {
		barrier(&W); /* A sent */
		barrier(&W); /* C altered */
		victim_of_tamper();
	} else if (W.rank == 1) {
		send_for_tamper();
		barrier(&W);
		barrier(&W);
	} else {
		barrier(&W);
		tamper();
		barrier(&W);
	}
	barrier(&W);
	close_world(&W);
	return finish(&W, "shm_source");
}

int main(int argc, char **argv)
{
	spawn(&W, 3);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	/* Every rank registered the same way in the same order: the keys
	 * still differ, so an access sent to the wrong peer is refused
	 * there instead of landing. */
	EXPECT(W.cards[0].key != W.cards[1].key && W.cards[1].key != W.cards[2].key &&
		       W.cards[0].key != W.cards[2].key,
	       1);
	if (argc > 1 && strcmp(argv[1], "tamper") == 0)
		return tamper_main();
	if (W.rank == 0) {
		victim();
	} else if (W.rank == 1) {
		honest(0);
		barrier(&W);
		barrier(&W);
		barrier(&W);
		barrier(&W);
		barrier(&W);
		honest(1);
	} else {
		barrier(&W);
		forge_messages();
		barrier(&W);
		barrier(&W);
		forge_completions();
		barrier(&W);
		barrier(&W);
	}
	close_world(&W);
	return finish(&W, "shm_source");
}
