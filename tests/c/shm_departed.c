/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Peers that crash give their memory back while this domain lives on.
 * ROUNDS batches of BATCH peers (8 MiB heaps, the default) connect, each
 * sends one message, and all are killed with SIGKILL; after each batch the
 * memfd mappings of this process must return within a bounded time to
 * their size before the first batch (they used to stay until the context
 * closed: 200 crashed peers, 1.7 GB of shared memory pinned). The one
 * thing allowed to stay is this context's small map of each connection id
 * (4 KiB of bases and sizes, kept for the id's next peer; ids are reused,
 * so there are never more than the connection limit): the size after the
 * first batch must be exactly the size after every later one. A live peer
 * keeps exchanging messages with us throughout. An address inside a dead
 * peer's heap, taken while it was alive (as device code in the middle of
 * an operation holds one), can still be read and written without a fault,
 * and no longer reaches shared memory.
 * A peer's memory goes one region after the other (its heap, then its
 * registration table, or the other way round), and under load the kernel
 * may take milliseconds over each, so a size read between the two is not
 * the settled one: each crasher sends the inodes of its memfds, and the
 * figures are taken once none of them is mapped here any more.
 * Prints the figures, then "shm_departed: ok".
 */
#include "shm_common.h"

#include <signal.h>
#include <time.h>

#define ROUNDS 20
#define BATCH 10
#define RELEASE_BOUND_MS 5000
/* One map per connection id (providers/shm/src/layout.rs: MAX_CONNS,
 * PeerMap rounded up to pages). */
#define ID_MAPS_BYTES (64u * 8192u)
/* Memfds of one crasher that rank 0 waits to see go. */
#define MAX_INODES 64

static struct world W;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Bytes of region mappings (`is_region_map`) in this process; with `skip` (a sorted list of
 * `nskip` start addresses) set, returns the start of the first mapping of
 * at least `min` bytes not in it, instead. */
static uint64_t memfd_maps(const uint64_t *skip, int nskip, uint64_t min, uint64_t *starts,
			   int *nstarts)
{
	char line[512];
	uint64_t total = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	if (nstarts)
		*nstarts = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		int i, seen = 0;
		if (!is_region_map(line) || sscanf(line, "%llx-%llx", &lo, &hi) != 2)
			continue;
		if (starts && *nstarts < 4096)
			starts[(*nstarts)++] = lo;
		if (skip) {
			for (i = 0; i < nskip; i++)
				seen |= skip[i] == lo;
			if (!seen && hi - lo >= min) {
				fclose(f);
				return lo;
			}
			continue;
		}
		total += hi - lo;
	}
	fclose(f);
	return skip ? 0 : total;
}

/* Inodes of the region memfds mapped in this process: at most `max` into `ino`;
 * returns how many. */
static int memfd_inodes(uint64_t *ino, int max)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && n < max) {
		unsigned long long i;
		if (is_region_map(line) && sscanf(line, "%*s %*s %*s %*s %llu", &i) == 1)
			ino[n++] = i;
	}
	fclose(f);
	return n;
}

/* Drops from the `n` inodes in `ino` those among the `k` in `old`;
 * returns how many are left. */
static int only_new(uint64_t *ino, int n, const uint64_t *old, int k)
{
	int i, j, left = 0;
	for (i = 0; i < n; i++) {
		for (j = 0; j < k && old[j] != ino[i]; j++)
			;
		if (j == k)
			ino[left++] = ino[i];
	}
	return left;
}

/* How many of the `n` inodes in `ino` are still mapped here. */
static int still_mapped(const uint64_t *ino, int n)
{
	static uint64_t now[4096];
	int k = memfd_inodes(now, 4096), i, j, left = 0;
	for (i = 0; i < n; i++)
		for (j = 0; j < k; j++)
			if (now[j] == ino[i]) {
				left++;
				break;
			}
	return left;
}

/* Whether `addr` lies in a memfd mapping. */
static int in_memfd(uint64_t addr)
{
	char line[512];
	int in = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && addr >= lo && addr < hi)
			in = strstr(line, "/memfd:") != NULL;
	}
	fclose(f);
	return in;
}

static long shmem_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Shmem: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* A peer that connects, sends its index, and is killed once told to. */
static void crasher(int i, int sock)
{
	struct lone l;
	struct fi_cq_msg_entry e;
	uint64_t raw, v = (uint64_t)i;
	size_t len = sizeof(raw);
	fi_addr_t fa;
	char c;

	my_rank = 100 + i;
	alarm(60 * (unsigned)time_scale());
	open_lone(&l, 1, 10000 * time_scale());
	REQUIRE(fi_xpu_av_insert(l.av, W.cards[0].name, 1, &fa, 0, NULL), 1);
	REQUIRE(fi_xpu_av_lookup(l.av, fa, &raw, &len, 0, l.ctx), 0);
	REQUIRE(fi_xpu_send(&l.ep, &v, 8, NULL, 0, &raw, &v, 0, FI_XPU_WORK_ITEM), 0);
	REQUIRE(fi_xpu_cq_sread(&l.cq, &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	{
		/* What of this process may be mapped in rank 0. */
		uint64_t ino[MAX_INODES];
		int n = memfd_inodes(ino, MAX_INODES);
		io(sock, &n, sizeof(n), 1);
		io(sock, ino, sizeof(ino[0]) * (size_t)n, 1);
	}
	io(sock, "x", 1, 1);
	io(sock, &c, 1, 0);
	kill(getpid(), SIGKILL);
	_exit(3);
}

static void live_peer(void)
{
	struct fi_cq_tagged_entry e;
	uint64_t v;
	int r;

	for (r = 0; r < ROUNDS; r++) {
		v = ~0ULL;
		EXPECT(fi_xpu_recv(&W.ep, &v, sizeof(v), NULL, NULL, &v, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
		if (v == ~0ULL - 1)
			break; /* rank 0 gave up */
		EXPECT(v, (uint64_t)r);
		v += 1000;
		EXPECT(fi_xpu_send(&W.ep, &v, 8, NULL, 0, &W.raw[0], &v, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
	}
}

static uint64_t exchange(uint64_t v)
{
	struct fi_cq_tagged_entry e;
	static uint64_t got;
	got = ~0ULL;
	if (v != ~0ULL - 1)
		EXPECT(fi_xpu_recv(&W.ep, &got, sizeof(got), NULL, NULL, &got, 0,
				   FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_send(&W.ep, &v, 8, NULL, 0, &W.raw[1], &v, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(next(&W, &e, NULL), 1);
	if (v != ~0ULL - 1)
		EXPECT(next(&W, &e, NULL), 1);
	return got;
}

static void crash_rounds(void)
{
	static uint64_t base_starts[4096], ino[BATCH * MAX_INODES], mine[4096];
	int nino, nmine;
	uint64_t base, peak = 0, after = 0, held = 0, v, settled = 0;
	double slowest = 0;
	long shm0 = shmem_kb(), shm_peak = 0;
	int r, i, nbase = 0, done_rounds = 0;

	base = memfd_maps(NULL, 0, 0, base_starts, &nbase);
	for (r = 0; r < ROUNDS; r++) {
		int sock[BATCH], st, ok;
		pid_t p[BATCH];
		uint64_t got[BATCH] = { 0 }, bytes;
		struct fi_cq_tagged_entry e;
		double t0;
		char c;

		nmine = memfd_inodes(mine, 4096);
		for (i = 0; i < BATCH; i++)
			p[i] = spawn_fresh(&W, "crasher", r * BATCH + i, &sock[i]);
		for (i = 0; i < BATCH; i++) {
			uint64_t x = ~0ULL;
			EXPECT(fi_xpu_recv(&W.ep, &x, sizeof(x), NULL, NULL, &x, 0,
					   FI_XPU_WORK_ITEM), 0);
			EXPECT(next(&W, &e, NULL), 1);
			if (x >= (uint64_t)(r * BATCH) && x < (uint64_t)((r + 1) * BATCH))
				got[x - (uint64_t)(r * BATCH)]++;
		}
		/* A crasher's own memfds: what it maps, less what it imported
		 * from us. */
		nino = 0;
		for (i = 0; i < BATCH; i++) {
			int n;
			EXPECT(got[i], 1);
			io(sock[i], &n, sizeof(n), 0);
			REQUIRE(n >= 0 && n <= MAX_INODES, 1);
			io(sock[i], ino + nino, sizeof(ino[0]) * (size_t)n, 0);
			nino += only_new(ino + nino, n, mine, nmine);
			io(sock[i], &c, 1, 0);
		}
		EXPECT(still_mapped(ino, nino) > 0, 1);
		bytes = memfd_maps(NULL, 0, 0, NULL, NULL);
		peak = bytes > peak ? bytes : peak;
		if (shmem_kb() > shm_peak)
			shm_peak = shmem_kb();
		/* An address inside a live peer's heap, as a device operation
		 * under way would hold one. */
		if (r == 0) {
			held = memfd_maps(base_starts, nbase, 8u << 20, NULL, NULL);
			EXPECT(held != 0, 1);
		}
		for (i = 0; i < BATCH; i++) {
			io(sock[i], "d", 1, 1);
			EXPECT(waitpid(p[i], &st, 0), p[i]);
			EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, 1);
			close(sock[i]);
		}
		t0 = now_ms();
		while ((still_mapped(ino, nino) ||
			(bytes = memfd_maps(NULL, 0, 0, NULL, NULL)) >
				(settled ? settled : base + ID_MAPS_BYTES)) &&
		       now_ms() - t0 < RELEASE_BOUND_MS * time_scale())
			usleep(1000);
		bytes = memfd_maps(NULL, 0, 0, NULL, NULL);
		EXPECT(still_mapped(ino, nino), 0);
		if (now_ms() - t0 > slowest)
			slowest = now_ms() - t0;
		after = bytes;
		if (!settled)
			settled = bytes;
		ok = bytes <= base + ID_MAPS_BYTES && bytes == settled;
		EXPECT(bytes <= base + ID_MAPS_BYTES, 1);
		EXPECT(bytes, settled);
		/* The live peer still answers. */
		EXPECT(exchange(ok ? (uint64_t)r : ~0ULL - 1), ok ? (uint64_t)r + 1000 : ~0ULL);
		done_rounds++;
		if (!ok)
			break; /* memory is not coming back: stop here */
	}
	if (held) {
		volatile uint64_t *q = (volatile uint64_t *)(uintptr_t)held;
		EXPECT(in_memfd(held), 0);
		v = q[0] + q[4095];
		q[0] = v + 1;
		EXPECT(q[0], v + 1);
	}
	printf("shm_departed: %d crashed peers; memfd mappings: before %.1f MiB, peak %.1f MiB, "
	       "after %.1f MiB; slowest return to baseline %.1f ms; Shmem (node) before %ld kB, "
	       "peak %ld kB, after %ld kB\n",
	       done_rounds * BATCH, (double)base / 1048576.0, (double)peak / 1048576.0,
	       (double)after / 1048576.0, slowest, shm0, shm_peak, shmem_kb());
}

int main(int argc, char **argv)
{
	static const struct fresh_role roles[] = { { "crasher", crasher }, { NULL, NULL } };

	run_fresh_role(&W, argc, argv, roles);
	unsetenv("FI_XPU_SHM_HEAP_SIZE");
	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	if (W.rank == 0)
		crash_rounds();
	else
		live_peer();
	close_world(&W);
	return finish(&W, "shm_departed");
}
