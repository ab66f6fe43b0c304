/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Counters and what peers may write, over the shm provider. A peer maps
 * the shared heap of every context it talks to read-write, so the heap
 * holds only what peers are granted: of a counter, only the words that
 * remote events (FI_REMOTE_WRITE, FI_REMOTE_READ) increment. Rank 0 is
 * the owner of the counters, rank 1 its peer.
 *
 * 1. Remote events: rank 0's world counter bound for FI_REMOTE_WRITE, and
 *    a counter `both` bound for its own reads (FI_READ) and the peer's
 *    reads of its memory (FI_REMOTE_READ), count what they are bound for
 *    together with what device code adds; a set reads back as the value
 *    set, also 0 with remote events counted before it, and later events
 *    add to that value.
 * 2. Where the words live: the {value, errors} words of counters bound
 *    only for local events lie outside the heap, in a file the peer has
 *    not mapped (its inode is in no mapping of the peer's
 *    /proc/self/maps, where the heap's is).
 * 3. A hostile peer writes garbage over every byte of rank 0's heap as it
 *    maps it. Rank 0's counters bound only for local events still read
 *    the values they held, and still count.
 * Prints "shm_cntr: ok".
 */
#include "shm_common.h"

#define KNOWN 0x600dc0de5eed1234ULL
#define KNOWN_ERR 0x0e11ULL

static struct world W;
static struct fid_xpu_host_cntr *hboth;
static struct fid_xpu_cntr both;

/* Rank 0 binds `both` for its reads and the peer's reads of its memory;
 * it takes the read slot from the world's read counter, which is left
 * bound to nothing. */
static void bind_both(struct world *w)
{
	struct fi_xpu_cntr_attr nattr = { .flags = 0, .xpu_ctx = w->ctx };
	if (w->rank != 0)
		return;
	REQUIRE(fi_xpu_cntr_open(w->dom, &nattr, &hboth, NULL), 0);
	REQUIRE(fi_xpu_ep_bind(w->hep, &hboth->fid, FI_READ | FI_REMOTE_READ), 0);
}

/* `n` writes of 8 bytes into rank `to`'s registration, each waited for. */
static void writes(int to, int n)
{
	struct fi_cq_tagged_entry e;
	uint64_t v = 0x77;
	int i;
	for (i = 0; i < n; i++) {
		EXPECT(fi_xpu_write(&W.ep, &v, 8, NULL, 0, &W.raw[to], W.cards[to].base + 8 * (uint64_t)i,
				    W.cards[to].key, &v, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
	}
}

static void reads(int from, int n)
{
	struct fi_cq_tagged_entry e;
	uint64_t v = 0;
	int i;
	for (i = 0; i < n; i++) {
		EXPECT(fi_xpu_read(&W.ep, &v, 8, NULL, &W.raw[from], W.cards[from].base + 8 * (uint64_t)i,
				   W.cards[from].key, &v, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
	}
}

/* ---- 1. remote events ------------------------------------------------------ */
static void remote_events(void)
{
	if (W.rank == 1) {
		writes(0, 4);
		reads(0, 3);
		barrier(&W); /* the first events are in */
		barrier(&W); /* rank 0 added and set */
		writes(0, 2);
		reads(0, 1);
		barrier(&W);
		barrier(&W); /* rank 0 set 0 */
		writes(0, 1);
		barrier(&W);
		return;
	}
	barrier(&W);
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 4);
	EXPECT(fi_xpu_cntr_read(&both, FI_XPU_WORK_ITEM), 3);
	/* Our own reads count locally, beside the peer's. */
	reads(1, 2);
	EXPECT(fi_xpu_cntr_read(&both, FI_XPU_WORK_ITEM), 5);
	EXPECT(fi_xpu_cntr_add(&both, 10, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_read(&both, FI_XPU_WORK_ITEM), 15);
	/* A set reads back as the value set. */
	EXPECT(fi_xpu_cntr_set(&both, 100, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_read(&both, FI_XPU_WORK_ITEM), 100);
	EXPECT(fi_xpu_cntr_set(&W.rwcntr, 50, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 50);
	EXPECT(fi_xpu_cntr_seterr(&both, 9, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_readerr(&both, FI_XPU_WORK_ITEM), 9);
	EXPECT(fi_xpu_cntr_seterr(&W.rwcntr, 3, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_adderr(&W.rwcntr, 1, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_readerr(&W.rwcntr, FI_XPU_WORK_ITEM), 4);
	barrier(&W);
	barrier(&W);
	/* Later remote events add to the value set. */
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 52);
	EXPECT(fi_xpu_cntr_read(&both, FI_XPU_WORK_ITEM), 101);
	EXPECT(fi_xpu_cntr_wait_status(&W.rwcntr, 52, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_wait_status(&W.rwcntr, 53, 20, FI_XPU_WORK_ITEM), -FI_ETIMEDOUT);
	/* 0 after 6 remote events: the local word holds -6. */
	EXPECT(fi_xpu_cntr_set(&W.rwcntr, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 0);
	barrier(&W);
	barrier(&W);
	EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 1);
	EXPECT(fi_xpu_cntr_wait_status(&W.rwcntr, 1, 1000, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_readerr(&W.rwcntr, FI_XPU_WORK_ITEM), 4);
}

/* ---- 2. where the words live ------------------------------------------------ */
/* The inode of the file mapped at `p` in /proc/self/maps (0: none). */
static unsigned long inode_of(const void *p)
{
	char line[512], perm[8], dev[16];
	unsigned long lo, hi, off, ino, found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perm, &off, dev, &ino) == 6 &&
		    lo <= (uintptr_t)p && (uintptr_t)p < hi) {
			found = ino;
			break;
		}
	fclose(f);
	return found;
}

/* Whether some mapping of this process is of the file with inode `ino`. */
static int maps_inode(unsigned long ino)
{
	char line[512], perm[8], dev[16];
	unsigned long lo, hi, off, i;
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += sscanf(line, "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perm, &off, dev, &i) == 6 &&
		     i == ino;
	fclose(f);
	return n > 0;
}

/* The {value, errors} words of an exported counter. */
static const uint64_t *words(const struct fid_xpu_cntr *c)
{
	const struct fi_xpu_shm_cntr_dev *k = (const struct fi_xpu_shm_cntr_dev *)c->fid.prov_ctx;
	return FI_XPU_SHM_P(const uint64_t, k->cntr);
}

static void where_words_live(void)
{
	/* Inodes: the heap's, then the files holding the words of the
	 * counters bound only for local events. */
	unsigned long ino[3] = { 0, 0, 0 };
	int i;

	if (W.rank == 0) {
		const struct fi_xpu_shm_ep_dev *me =
			(const struct fi_xpu_shm_ep_dev *)W.ep.fid.prov_ctx;
		const struct fi_xpu_shm_ctx_dev *cx =
			FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, me->ctx);
		const unsigned char *heap = FI_XPU_SHM_P(const unsigned char, cx->heap_base);
		uint64_t size = ((const struct fi_xpu_shm_heap_hdr *)(const void *)heap)->size;
		const uint64_t *local[2] = { words(&W.wcntr), words(&W.rcntr) };

		ino[0] = inode_of(heap);
		EXPECT(ino[0] != 0, 1);
		for (i = 0; i < 2; i++) {
			const unsigned char *p = (const unsigned char *)local[i];
			EXPECT(p + 16 <= heap || p >= heap + size, 1);
			ino[i + 1] = inode_of(p);
			EXPECT(ino[i + 1] != 0, 1);
			EXPECT(ino[i + 1] != ino[0], 1);
		}
		io(W.socks[1], ino, sizeof(ino), 1);
	} else {
		io(W.sock, ino, sizeof(ino), 0);
		/* The peer maps the heap (so the check below can see a file)... */
		EXPECT(maps_inode(ino[0]), 1);
		/* ...and not the files of the local counters. */
		EXPECT(maps_inode(ino[1]), 0);
		EXPECT(maps_inode(ino[2]), 0);
	}
	barrier(&W);
}

/* ---- 3. a hostile peer --------------------------------------------------------- */
static void hostile_peer(void)
{
	const struct fi_xpu_shm_peer_addr *pa =
		FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, W.raw[0]);
	const struct fi_xpu_shm_peer_map *pm = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
	const struct fi_xpu_shm_ep_info *vi = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_info,
							  pm->base[pa->info_region] + pa->info_off);
	unsigned char *vheap = FI_XPU_SHM_P(unsigned char, pm->base[vi->heap_region]);
	uint64_t vsize = pm->size[vi->heap_region], i, rng = 0x243f6a8885a308d3ULL;

	REQUIRE(vheap != NULL && vsize != 0, 1);
	for (i = 0; i + 8 <= vsize; i += 8) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		memcpy(vheap + i, &rng, 8);
	}
}

static void hostile(void)
{
	uint64_t w0, r0;

	if (W.rank == 1) {
		barrier(&W); /* the counters hold their values */
		hostile_peer();
		barrier(&W); /* the heap is garbage */
		barrier(&W);
		return;
	}
	EXPECT(fi_xpu_cntr_set(&W.rcntr, KNOWN, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_seterr(&W.rcntr, KNOWN_ERR, FI_XPU_WORK_ITEM), 0);
	w0 = fi_xpu_cntr_read(&W.wcntr, FI_XPU_WORK_ITEM);
	r0 = fi_xpu_cntr_read(&W.rcntr, FI_XPU_WORK_ITEM);
	EXPECT(r0, KNOWN);
	barrier(&W);
	barrier(&W);
	EXPECT(fi_xpu_cntr_read(&W.rcntr, FI_XPU_WORK_ITEM), KNOWN);
	EXPECT(fi_xpu_cntr_readerr(&W.rcntr, FI_XPU_WORK_ITEM), KNOWN_ERR);
	EXPECT(fi_xpu_cntr_read(&W.wcntr, FI_XPU_WORK_ITEM), w0);
	EXPECT(fi_xpu_cntr_readerr(&W.wcntr, FI_XPU_WORK_ITEM), 0);
	/* They still count: what device code adds, and our own writes. */
	EXPECT(fi_xpu_cntr_add(&W.rcntr, 1, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_wait_status(&W.rcntr, KNOWN + 1, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cntr_read(&W.rcntr, FI_XPU_WORK_ITEM), KNOWN + 1);
	writes(1, 3);
	EXPECT(fi_xpu_cntr_read(&W.wcntr, FI_XPU_WORK_ITEM), w0 + 3);
	EXPECT(fi_xpu_cntr_wait_status(&W.wcntr, w0 + 3, 0, FI_XPU_WORK_ITEM), 0);
	barrier(&W);
}

/* close_world, with `both` closed once the endpoint holding it is. */
static void close_all(void)
{
	barrier(&W);
	EXPECT(fi_xpu_close(&W.mr->fid), 0);
	EXPECT(fi_xpu_close(&W.ro_mr->fid), 0);
	EXPECT(fi_xpu_free(W.ctx, W.heap), 0);
	EXPECT(fi_xpu_free(W.ctx, W.ro), 0);
	EXPECT(fi_xpu_close(&W.hep->fid), 0);
	if (W.rank == 0)
		EXPECT(fi_xpu_close(&hboth->fid), 0);
	EXPECT(fi_xpu_close(&W.hcq->fid), 0);
	EXPECT(fi_xpu_close(&W.hwc->fid), 0);
	EXPECT(fi_xpu_close(&W.hrwc->fid), 0);
	EXPECT(fi_xpu_close(&W.hrc->fid), 0);
	EXPECT(fi_xpu_close(&W.av->fid), 0);
	EXPECT(fi_xpu_close(&W.ctx->fid), 0);
	EXPECT(fi_xpu_close(&W.dom->fid), 0);
}

int main(void)
{
	before_enable = bind_both;
	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	if (W.rank == 0)
		REQUIRE(fi_xpu_export(&hboth->fid, 0, &both.fid), 0);
	remote_events();
	where_words_live();
	hostile();
	if (W.rank == 0)
		printf("shm_cntr: counters bound only for local events kept their values under a "
		       "peer that rewrote the whole heap\n");
	close_all();
	return finish(&W, "shm_cntr");
}
