/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A world of N processes, one rank each (tests/world.rs starts them with
 * FI_XPU_BOOTSTRAP_RANK, _SIZE and _ADDR set). Usage: world MODE
 *
 *   ops     one window; a kernel on the host XPU writes a pattern into
 *           every peer's window, adds to every peer's counter word, reads
 *           a peer's part back and compares-and-swaps, at work-item,
 *           subgroup and work-group scope (one work item per peer, so a
 *           group names peers on different lanes at once); barriers at
 *           every scope separate rounds whose results are checked. Prints
 *           each peer's routes ("route P rma=shm amo=ofi").
 *   twice   two windows of different sizes, freed in the other order,
 *           then the world closed and opened again.
 *   bad     refusals with their exact codes (rank 0 and 1 only differ in
 *           the size they pass to one alloc).
 *   dead    rank N-1 exits after the world is open; a device barrier
 *           times out on every other rank, and their next collective
 *           call fails with -FI_ECONNRESET.
 *   open    prints what fi_xpu_world_open returned.
 */
#include <fi_xpu.h>
#include <fi_xpu/device_world.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(expr)                                                                    \
	do {                                                                           \
		int rc_ = (int)(expr);                                                 \
		if (rc_ < 0) {                                                         \
			fprintf(stderr, "[rank %d] %s:%d: %s failed: %s (%d)\n", g_rank, \
				__FILE__, __LINE__, #expr, fi_xpu_strerror(rc_), rc_);  \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

#define EXPECT(expr, want)                                                             \
	do {                                                                           \
		int rc_ = (int)(expr);                                                 \
		if (rc_ != (want)) {                                                   \
			fprintf(stderr, "[rank %d] %s:%d: %s returned %d (%s), want %d (%s)\n", \
				g_rank, __FILE__, __LINE__, #expr, rc_,                 \
				fi_xpu_strerror(rc_), (int)(want), fi_xpu_strerror(want)); \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

#define FAIL(...)                                                                      \
	do {                                                                           \
		fprintf(stderr, "[rank %d] ", g_rank);                                 \
		fprintf(stderr, __VA_ARGS__);                                          \
		fprintf(stderr, "\n");                                                 \
		exit(1);                                                               \
	} while (0)

static int g_rank = -1;

#define WAIT_MS 20000
/* Window layout. */
#define W_COUNT 0                  /* atomic adds of every rank land here */
#define W_CAS 8                    /* compare-and-swap target */
#define W_ROUND 64                 /* per round parity and source rank: the round */
#define W_SLOT 4096                /* per source rank: its pattern */
#define SLOT_LEN 256
#define W_SRC (W_SLOT + 64 * SLOT_LEN) /* this rank's source and result buffers */
#define W_SIZE (W_SRC + 64 * SLOT_LEN)

static const char *prov_name(uint32_t id)
{
	return id == FI_XPU_PROV_SHM ? "shm" : id == FI_XPU_PROV_OFI ? "ofi" : "?";
}

static unsigned char pattern(int src, int dst, int i)
{
	return (unsigned char)(src * 31 + dst * 7 + i);
}

struct job {
	struct fi_xpu_window_dev *win;
	struct fi_xpu_world_dev *world;
	unsigned char *mine;
	int rank, n, scope;
	int errors;
	uint64_t round;
};

/* Reports and counts a call that failed with `rc`; nothing for 0. */
static void bump(struct job *j, const char *what, int peer, int rc)
{
	if (rc == 0)
		return;
	fprintf(stderr, "[rank %d] %s to peer %d at scope %d: %s (%d)\n", j->rank, what, peer,
		j->scope, fi_xpu_strerror(rc), rc);
	__atomic_add_fetch(&j->errors, 1, __ATOMIC_RELAXED);
}

/* One work item per peer: item p writes the pattern to peer p, adds to
 * its counter word and, in its own source slot, fetches-and-adds. */
static void kernel_ops(void *arg)
{
	struct job *j = (struct job *)arg;
	int p = (int)fi_xpu_host_item()->local_id;
	unsigned char *src = j->mine + W_SRC + (size_t)p * SLOT_LEN;
	uint64_t add = (uint64_t)j->rank + 1;
	int i;

	for (i = 0; i < SLOT_LEN; i++)
		src[i] = pattern(j->rank, p, i);
	bump(j, "put", p,
	     fi_xpu_world_put(j->win, p, W_SLOT + (uint64_t)j->rank * SLOT_LEN, src, SLOT_LEN, 0,
			      j->scope));
	bump(j, "atomic", p,
	     fi_xpu_world_atomic(j->win, p, W_COUNT, &add, 1, FI_UINT64, FI_SUM, FI_INJECT,
				 j->scope));
	bump(j, "barrier", p, fi_xpu_world_barrier(j->world, WAIT_MS, j->scope));
}

/* After the barrier: item p reads back what this rank wrote to peer p
 * (the group's reads posted together). */
static void kernel_get(void *arg)
{
	struct job *j = (struct job *)arg;
	int p = (int)fi_xpu_host_item()->local_id;
	unsigned char *dst = j->mine + W_SRC + (size_t)p * SLOT_LEN;
	int i;

	memset(dst, 0, SLOT_LEN);
	bump(j, "get", p,
	     fi_xpu_world_get(j->win, p, W_SLOT + (uint64_t)j->rank * SLOT_LEN, dst, SLOT_LEN, 0,
			      j->scope));
	bump(j, "quiet", p, fi_xpu_world_quiet(j->world, WAIT_MS, j->scope));
	for (i = 0; i < SLOT_LEN; i++)
		if (dst[i] != pattern(j->rank, p, i)) {
			bump(j, "get's data", p, -FI_EIO);
			break;
		}
}

/* Rounds: every item writes the round number into its peer's W_ROUND word
 * for this rank, then all barrier; after it, every word of this rank's
 * window holds the round. Words alternate with the round's parity: a peer
 * may already write the next round while this rank checks, never the one
 * after (it needs this rank's next barrier). */
#define ROUND_WORD(round, src) (W_ROUND + 8 * ((uint64_t)(src) + 64 * ((round) % 2)))
static void kernel_rounds(void *arg)
{
	struct job *j = (struct job *)arg;
	int p = (int)fi_xpu_host_item()->local_id;
	uint64_t *src = (uint64_t *)(j->mine + W_SRC + (size_t)p * SLOT_LEN);

	*src = j->round;
	bump(j, "round put", p,
	     fi_xpu_world_put(j->win, p, ROUND_WORD(j->round, j->rank), src, 8, 0, j->scope));
	if (j->scope == FI_XPU_WORK_ITEM) {
		/* One barrier per rank: the items' puts are posted (the
		 * launcher's group barrier), then item 0 alone calls it. */
		fi_xpu_host_barrier(FI_XPU_WORK_GROUP);
		if (p != 0)
			return;
	}
	bump(j, "round barrier", p, fi_xpu_world_barrier(j->world, WAIT_MS, j->scope));
}

/* Work item 0 alone: compare-and-swap a token around the ring. */
static void kernel_cas(void *arg)
{
	struct job *j = (struct job *)arg;
	int next = (j->rank + 1) % j->n;
	uint64_t *buf = (uint64_t *)(j->mine + W_SRC);

	buf[0] = (uint64_t)j->rank + 100; /* swap in */
	buf[1] = 0;                       /* compare: the initial value */
	buf[2] = ~0ULL;                   /* result */
	bump(j, "cswap", next,
	     fi_xpu_world_compare_atomic(j->win, next, W_CAS, &buf[0], 1, &buf[1], &buf[2],
					 FI_UINT64, FI_CSWAP, 0, FI_XPU_WORK_ITEM));
	bump(j, "quiet", next, fi_xpu_world_quiet(j->world, WAIT_MS, FI_XPU_WORK_ITEM));
	if (buf[2] != 0)
		bump(j, "cswap's old value", next, -FI_EIO);
	bump(j, "barrier", next, fi_xpu_world_barrier(j->world, WAIT_MS, FI_XPU_WORK_ITEM));
}

static void launch(struct job *j, void (*k)(void *), uint32_t groups, uint32_t items)
{
	struct fi_xpu_host_launch_attr la = { .num_groups = groups, .group_size = items,
					      .subgroup_size = 0, .flags = 0 };
	if (j->scope == FI_XPU_SUBGROUP)
		la.subgroup_size = items;
	CHECK(fi_xpu_host_launch(&la, k, j));
	if (j->errors)
		FAIL("%d errors in the kernel", j->errors);
}

static struct fid_xpu_world *open_world(void)
{
	struct fid_xpu_world *w;
	CHECK(fi_xpu_world_open(NULL, &w, NULL));
	return w;
}

static int mode_ops(void)
{
	struct fid_xpu_world *world = open_world();
	struct fi_xpu_world_info info;
	struct fid_xpu_window *win;
	struct job j;
	void *addr, *dev;
	int scopes[] = { FI_XPU_WORK_ITEM, FI_XPU_SUBGROUP, FI_XPU_WORK_GROUP };
	int s, p;
	uint64_t expect_count = 0;

	CHECK(fi_xpu_world_query(world, &info));
	g_rank = info.rank;
	CHECK(fi_xpu_world_alloc(world, W_SIZE, 0, &addr, &dev, &win));
	memset(&j, 0, sizeof(j));
	j.win = (struct fi_xpu_window_dev *)dev;
	j.world = (struct fi_xpu_world_dev *)info.dev;
	j.mine = (unsigned char *)addr;
	j.rank = info.rank;
	j.n = info.nranks;
	if (j.win->valid != FI_XPU_WINDOW_VALID || j.world->valid != FI_XPU_WORLD_VALID ||
	    j.win->size != W_SIZE || (uint64_t)(uintptr_t)addr != j.win->addr ||
	    j.win->nranks != (uint32_t)j.n || j.world->rank != (uint32_t)j.rank)
		FAIL("device tables do not describe this window");
	printf("world rank %d of %d on node %d of %d\n", info.rank, info.nranks, info.node,
	       info.nnodes);
	for (p = 0; p < j.n; p++) {
		const struct fi_xpu_world_route *r = fi_xpu_world_rma_route(j.win, p);
		const struct fi_xpu_world_route *a = fi_xpu_world_amo_route(j.win, p);
		printf("world rank %d route %d rma=%s amo=%s\n", j.rank, p, prov_name(r->prov_id),
		       prov_name(a->prov_id));
	}
	/* Nothing was written yet: the window starts zeroed. */
	for (p = 0; p < W_SIZE; p++)
		if (j.mine[p])
			FAIL("a fresh window holds data at %d", p);
	CHECK(fi_xpu_world_host_barrier(world));

	for (s = 0; s < 3; s++) {
		j.scope = scopes[s];
		/* Work-item scope: one group per peer; otherwise one group of
		 * all peers (one subgroup of them at subgroup scope). */
		if (j.scope == FI_XPU_WORK_ITEM) {
			/* The launcher's local_id is the peer: N groups of 1 would
			 * give every item id 0, so one group of N items calls at
			 * work-item scope (each its own barrier would mismatch:
			 * only item 0 of a work-item launch barriers). */
			struct job one = j;
			for (p = 0; p < j.n; p++) {
				int i;
				unsigned char *src = j.mine + W_SRC + (size_t)p * SLOT_LEN;
				uint64_t add = (uint64_t)j.rank + 1;
				for (i = 0; i < SLOT_LEN; i++)
					src[i] = pattern(j.rank, p, i);
				bump(&one, "put", p,
				     fi_xpu_world_put(j.win, p, W_SLOT + (uint64_t)j.rank * SLOT_LEN,
						      src, SLOT_LEN, 0, FI_XPU_WORK_ITEM));
				bump(&one, "atomic", p,
				     fi_xpu_world_atomic(j.win, p, W_COUNT, &add, 1, FI_UINT64,
							 FI_SUM, FI_INJECT, FI_XPU_WORK_ITEM));
			}
			CHECK(fi_xpu_world_barrier(j.world, WAIT_MS, FI_XPU_WORK_ITEM));
			if (one.errors)
				FAIL("work-item scope failed");
		} else {
			launch(&j, kernel_ops, 1, (uint32_t)j.n);
		}
		expect_count += (uint64_t)j.n * (uint64_t)(j.n + 1) / 2;
		/* The barrier made every rank's writes and adds visible here. */
		for (p = 0; p < j.n; p++) {
			int i;
			for (i = 0; i < SLOT_LEN; i++)
				if (j.mine[W_SLOT + p * SLOT_LEN + i] != pattern(p, j.rank, i))
					FAIL("scope %d: byte %d from rank %d is %d", j.scope, i, p,
					     j.mine[W_SLOT + p * SLOT_LEN + i]);
		}
		if (*(volatile uint64_t *)(j.mine + W_COUNT) != expect_count)
			FAIL("scope %d: counter %" PRIu64 ", want %" PRIu64, j.scope,
			     *(volatile uint64_t *)(j.mine + W_COUNT), expect_count);
		if (j.scope == FI_XPU_WORK_ITEM) {
			/* One work item reads from every peer in turn. (Work items
			 * reading concurrently, each its own read, from four ranks
			 * over libfabric 1.17's tcp;ofi_rxm fail there with
			 * "Connection refused"; not the world's doing.) */
			for (p = 0; p < j.n; p++) {
				unsigned char *dst = j.mine + W_SRC + (size_t)p * SLOT_LEN;
				int i;
				memset(dst, 0, SLOT_LEN);
				CHECK(fi_xpu_world_get(j.win, p, W_SLOT + (uint64_t)j.rank * SLOT_LEN,
						       dst, SLOT_LEN, 0, FI_XPU_WORK_ITEM));
				CHECK(fi_xpu_world_quiet(j.world, WAIT_MS, FI_XPU_WORK_ITEM));
				for (i = 0; i < SLOT_LEN; i++)
					if (dst[i] != pattern(j.rank, p, i))
						FAIL("get from %d: byte %d is %d", p, i, dst[i]);
			}
		} else {
			launch(&j, kernel_get, 1, (uint32_t)j.n);
		}
		CHECK(fi_xpu_world_host_barrier(world));
		memset(j.mine + W_SLOT, 0, (size_t)j.n * SLOT_LEN);
		CHECK(fi_xpu_world_host_barrier(world));
	}

	/* Rounds separated by device barriers at every scope, the launch's
	 * whole device included. */
	for (j.round = 1; j.round <= 8; j.round++) {
		j.scope = (int)(j.round % 4);
		launch(&j, kernel_rounds, 1, (uint32_t)j.n);
		for (p = 0; p < j.n; p++) {
			uint64_t v = *(volatile uint64_t *)(j.mine + ROUND_WORD(j.round, p));
			if (v != j.round)
				FAIL("round %" PRIu64 " at scope %d: rank %d's word is %" PRIu64,
				     j.round, j.scope, p, v);
		}
	}

	j.scope = FI_XPU_WORK_ITEM;
	launch(&j, kernel_cas, 1, 1);
	if (*(volatile uint64_t *)(j.mine + W_CAS) != (uint64_t)((j.rank + j.n - 1) % j.n) + 100)
		FAIL("cswap: my word is %" PRIu64, *(volatile uint64_t *)(j.mine + W_CAS));

	CHECK(fi_xpu_world_free(win));
	CHECK(fi_xpu_world_close(world));
	printf("world rank %d ops: ok\n", g_rank);
	return 0;
}

static int mode_twice(void)
{
	int round;
	for (round = 0; round < 2; round++) {
		struct fid_xpu_world *world = open_world();
		struct fi_xpu_world_info info;
		struct fid_xpu_window *a, *b;
		void *aa, *ad, *ba, *bd;
		CHECK(fi_xpu_world_query(world, &info));
		g_rank = info.rank;
		CHECK(fi_xpu_world_alloc(world, 100, 0, &aa, &ad, &a));
		CHECK(fi_xpu_world_alloc(world, 1 << 20, 0, &ba, &bd, &b));
		if (((struct fi_xpu_window_dev *)ad)->size != 100 ||
		    ((struct fi_xpu_window_dev *)bd)->size != 1 << 20 || aa == ba)
			FAIL("two windows");
		/* A world with windows is busy. */
		EXPECT(fi_xpu_world_close(world), -FI_EBUSY);
		CHECK(fi_xpu_world_free(a));
		EXPECT(fi_xpu_world_free(a), -FI_EINVAL);
		CHECK(fi_close(&b->fid));
		CHECK(fi_close(&world->fid));
		EXPECT(fi_xpu_world_host_barrier(world), -FI_EINVAL);
	}
	printf("world rank %d twice: ok\n", g_rank);
	return 0;
}

static int mode_bad(void)
{
	struct fid_xpu_world *world;
	struct fi_xpu_world_attr attr;
	struct fi_xpu_world_info info;
	struct fid_xpu_window *win;
	void *addr, *dev;
	uint64_t in = 7, out[64];

	/* Refused before anyone is contacted. */
	EXPECT(fi_xpu_world_open(NULL, NULL, NULL), -FI_EINVAL);
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr) - 1;
	attr.rank = -1;
	EXPECT(fi_xpu_world_open(&attr, &world, NULL), -FI_EINVAL);
	attr.size = sizeof(attr);
	attr.flags = 1;
	EXPECT(fi_xpu_world_open(&attr, &world, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.bootstrap = "carrier-pigeon";
	EXPECT(fi_xpu_world_open(&attr, &world, NULL), -FI_EINVAL);
	attr.bootstrap = "tcp";
	attr.rank = 5;
	attr.nranks = 2;
	EXPECT(fi_xpu_world_open(&attr, &world, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_world_query(NULL, &info), -FI_EINVAL);
	EXPECT(fi_xpu_world_host_barrier((struct fid_xpu_world *)&attr), -FI_EINVAL);

	world = open_world();
	CHECK(fi_xpu_world_query(world, &info));
	g_rank = info.rank;
	EXPECT(fi_xpu_world_query(world, NULL), -FI_EINVAL);
	EXPECT(fi_xpu_world_alloc(world, 4096, 1, &addr, &dev, &win), -FI_EBADFLAGS);
	EXPECT(fi_xpu_world_alloc(world, 4096, 0, NULL, &dev, &win), -FI_EINVAL);
	EXPECT(fi_xpu_world_bcast(world, &in, 8, info.nranks), -FI_EINVAL);
	/* Collective refusals: every rank gets the same code. */
	EXPECT(fi_xpu_world_alloc(world, 0, 0, &addr, &dev, &win), -FI_EINVAL);
	EXPECT(fi_xpu_world_alloc(world, info.rank == 1 ? 8192 : 4096, 0, &addr, &dev, &win),
	       -FI_EINVAL);
	EXPECT(fi_xpu_world_allgather(world, &in, out, info.rank == 0 ? 8 : 4), -FI_EINVAL);
	printf("world rank %d bad: ok\n", g_rank);
	/* The failed allgather left the bootstrap failed: later calls fail
	 * at once with the same code, and closing still releases everything. */
	EXPECT(fi_xpu_world_host_barrier(world), -FI_EINVAL);
	EXPECT(fi_xpu_world_close(world), -FI_EINVAL);
	EXPECT(fi_xpu_world_close(world), -FI_EINVAL);
	return 0;
}

static int mode_dead(void)
{
	struct fid_xpu_world *world = open_world();
	struct fi_xpu_world_info info;
	struct fid_xpu_window *win;
	void *addr, *dev;
	int rc;

	CHECK(fi_xpu_world_query(world, &info));
	g_rank = info.rank;
	CHECK(fi_xpu_world_host_barrier(world));
	if (info.rank == info.nranks - 1) {
		printf("world rank %d dead: leaving\n", g_rank);
		fflush(stdout);
		_exit(0);
	}
	/* A device barrier that the departed rank never joins ends on every
	 * rank left: -FI_ETIMEDOUT waiting for it, or -FI_ECONNRESET where
	 * this rank's signal goes to it and the provider has seen it leave.
	 * Rank 0 never signals rank N-1 (it signals rank + 2^k < N-1 for
	 * N = 4), so it times out. */
	rc = fi_xpu_world_barrier((struct fi_xpu_world_dev *)info.dev, 1500, FI_XPU_WORK_ITEM);
	if (rc != -FI_ETIMEDOUT && (info.rank == 0 || rc != -FI_ECONNRESET))
		FAIL("device barrier without rank %d: %d (%s)", info.nranks - 1, rc,
		     fi_xpu_strerror(rc));
	EXPECT(fi_xpu_world_alloc(world, 4096, 0, &addr, &dev, &win), -FI_ECONNRESET);
	EXPECT(fi_xpu_world_host_barrier(world), -FI_ECONNRESET);
	EXPECT(fi_xpu_world_close(world), -FI_ECONNRESET);
	printf("world rank %d dead: ok\n", g_rank);
	return 0;
}

/* Prints what fi_xpu_world_open returned (the bootstrap's refusals). */
static int mode_open(void)
{
	struct fid_xpu_world *world;
	int rc = fi_xpu_world_open(NULL, &world, NULL);
	printf("world open rc %d\n", rc);
	if (rc == 0)
		fi_xpu_world_close(world);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "ops";
	const char *r = getenv("FI_XPU_BOOTSTRAP_RANK");
	g_rank = r ? atoi(r) : -1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "ops"))
		return mode_ops();
	if (!strcmp(mode, "twice"))
		return mode_twice();
	if (!strcmp(mode, "bad"))
		return mode_bad();
	if (!strcmp(mode, "dead"))
		return mode_dead();
	if (!strcmp(mode, "open"))
		return mode_open();
	fprintf(stderr, "usage: world ops|twice|bad|dead|open\n");
	return 2;
}
