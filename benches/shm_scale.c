/*
 * How the shm provider's costs grow, and its large copies (run by
 * `cargo xtask bench-shm`). Device code runs on CPU threads (iface
 * FI_HMEM_SYSTEM); ranks are forked processes that meet on a shared page.
 *
 *   shm_scale rate N POSTS      N work items (one host launch, one group)
 *                               post POSTS 8-byte writes each on one endpoint
 *   shm_scale alltoall P POSTS  P processes, each writing POSTS 8-byte
 *                               messages round-robin to all the others
 *   shm_scale mem P R BOTH      P processes, each with R more registrations
 *                               (R allocations of 64 KiB), each pair
 *                               connected once (the lower rank inserts the
 *                               higher one's address) or, with BOTH 1, by
 *                               both (two connections); rank 0's memory from
 *                               /proc/self/smaps_rollup, before any peer and
 *                               after one write to each
 *   shm_scale lookup M K POSTS  M registrations at the target (as many as
 *                               it takes, if fewer: printed), K entries in
 *                               the initiator's AV (the same peer): POSTS
 *                               writes to the last of both through
 *                               post_one(), the first fi_xpu_av_lookup of the
 *                               last entry through lookup_first() and POSTS
 *                               more through lookup_one() (for callgrind
 *                               --toggle-collect)
 *   shm_scale copy ROUNDS       16 MiB and 4 MiB writes to a peer beside
 *                               memcpy between private buffers, interleaved,
 *                               best of ROUNDS; and the first 16 MiB write
 *                               through the fresh mapping of the peer's
 *                               memory: time and minor page faults
 *
 * Prints "name value unit" lines.
 */
#include "xpu_bench.h"

#include <dirent.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXP 64
#define MAXK 1024
#define CQ_SIZE 16384
#define BIG (16u << 20)

struct card {
	uint8_t name[64];
	uint64_t base, key;
};

/* The page the ranks share (mapped before fork). */
struct board {
	uint64_t count, gen;
	double secs[MAXP], cpu[MAXP];
	uint64_t keys[MAXK];
	struct card cards[MAXP];
};

struct rank {
	int me, np;
	struct board *board;
	struct xpu_ep x;
	fi_addr_t fa[MAXK];
	uint64_t raw[MAXP][8];
};

/* CPU time of this process (all its threads) in seconds: unlike wall
 * time, it does not grow while other programs hold the cores. */
static double cpu_secs(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
	       (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

/* Every rank waits for all; yields, since ranks may outnumber cores. */
static void barrier(struct rank *r)
{
	struct board *b = r->board;
	uint64_t g = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == (uint64_t)r->np) {
		__atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&b->gen, g + 1, __ATOMIC_RELEASE);
	} else {
		while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == g) {
			int st;
			/* A rank that failed never arrives: rank 0 gives up. */
			if (r->me == 0 && waitpid(-1, &st, WNOHANG) > 0)
				exit(2);
			sched_yield();
		}
	}
}

/* Opens this rank's objects and registers a heap of `heap_len` bytes. */
static void open_rank(struct rank *r, size_t heap_len)
{
	struct card *mine = &r->board->cards[r->me];

	xpu_ep_open(&r->x, "shm", CQ_SIZE, heap_len, mine->name, &mine->key);
	mine->base = (uint64_t)(uintptr_t)r->x.heap;
}

/* Inserts every other rank's address; raw[p] is rank p's raw address. */
static void connect_all(struct rank *r)
{
	for (int p = 0; p < r->np; p++) {
		size_t len = sizeof(r->raw[p]);
		if (p == r->me)
			continue;
		CHECK(fi_xpu_av_insert(r->x.av, r->board->cards[p].name, 1, &r->fa[p], 0, NULL));
		CHECK(fi_xpu_av_lookup(r->x.av, r->fa[p], r->raw[p], &len, 0, r->x.ctx));
	}
}

/* Reaps up to 64 completions; exits on an error entry (such as a
 * completion lost to a full CQ). */
static int64_t reap_some(struct fid_xpu_cq *cq)
{
	struct fi_cq_entry e[64];
	int64_t n = fi_xpu_cq_read(cq, e, 64, FI_XPU_WORK_ITEM);
	if (n == -FI_EAGAIN)
		return 0;
	CHECK(n);
	return n;
}

static void reap(struct rank *r, int64_t *outstanding, int64_t target)
{
	while (*outstanding > target)
		*outstanding -= reap_some(&r->x.cq);
}

/* One 8-byte write: the post whose instruction count is reported. */
__attribute__((noinline)) int post_one(struct rank *r, int peer, size_t src, uint64_t dst,
				       uint64_t key)
{
	return fi_xpu_write(&r->x.ep, r->x.heap + src, 8, r->x.desc, 0, r->raw[peer], dst, key, NULL, 0,
			    FI_XPU_WORK_ITEM);
}

static void write_to(struct rank *r, int peer, size_t src, uint64_t dst, uint64_t key,
		     int64_t *outstanding)
{
	int rc;
	while ((rc = post_one(r, peer, src, dst, key)) == -FI_EAGAIN)
		*outstanding -= reap_some(&r->x.cq);
	CHECK(rc);
	if (++*outstanding >= 64)
		reap(r, outstanding, 32);
}

static void close_rank(struct rank *r)
{
	xpu_ep_close(&r->x);
}

/* ---- rate: N posting work items on one endpoint ------------------------ */
struct rate_arg {
	struct rank *r;
	int posts;
	int64_t posted, reaped; /* counted in batches of RATE_BATCH */
};

#define RATE_BATCH 16

static void rate_kernel(void *p)
{
	struct rate_arg *a = p;
	struct rank *r = a->r;
	uint32_t me = fi_xpu_host_item()->local_id;
	uint64_t dst = r->board->cards[1].base + 64 + 8 * (uint64_t)(me % 4096);
	for (int i = 0; i < a->posts; i++) {
		int rc;
		/* A post completes at once; its entry waits in the CQ until
		 * some work item reads it. A poster preempted between claiming
		 * an entry and filling it holds up every reader behind it, so
		 * the CQ is kept under half full before each batch of posts
		 * (a post into a full CQ would lose its completion). */
		if (i % RATE_BATCH == 0) {
			while (__atomic_load_n(&a->posted, __ATOMIC_RELAXED) -
				       __atomic_load_n(&a->reaped, __ATOMIC_RELAXED) >
			       CQ_SIZE / 2)
				__atomic_add_fetch(&a->reaped, reap_some(&r->x.cq), __ATOMIC_RELAXED);
			__atomic_add_fetch(&a->posted, RATE_BATCH, __ATOMIC_RELAXED);
		}
		while ((rc = post_one(r, 1, 8, dst, r->board->cards[1].key)) == -FI_EAGAIN)
			__atomic_add_fetch(&a->reaped, reap_some(&r->x.cq), __ATOMIC_RELAXED);
		CHECK(rc);
		if (i % RATE_BATCH == RATE_BATCH - 1)
			__atomic_add_fetch(&a->reaped, reap_some(&r->x.cq), __ATOMIC_RELAXED);
	}
}

static int rate(struct rank *r, int n, int posts)
{
	if (r->me == 0) {
		struct fi_xpu_host_launch_attr la = { .num_groups = 1, .group_size = (uint32_t)n };
		struct rate_arg a = { .r = r, .posts = posts, .posted = 0, .reaped = 0 };
		double t0 = now(), c0 = cpu_secs();
		CHECK(fi_xpu_host_launch(&la, rate_kernel, &a));
		int64_t left = (int64_t)n * posts - a.reaped;
		reap(r, &left, 0);
		double t = now() - t0, c = cpu_secs() - c0;
		printf("rate_%d_items_mps %.3f Mmsg/s\n", n, (double)n * posts / t / 1e6);
		printf("rate_%d_items_cpu_mps %.3f Mmsg/cpu-s\n", n, (double)n * posts / c / 1e6);
	}
	barrier(r);
	return 0;
}

/* ---- all-to-all among P processes ------------------------------------- */
static int alltoall(struct rank *r, int posts)
{
	int64_t out = 0;
	int others = r->np - 1;
	barrier(r);
	double t0 = now(), c0 = cpu_secs();
	for (int i = 0; i < posts; i++) {
		int peer = (r->me + 1 + i % others) % r->np;
		write_to(r, peer, 8, r->board->cards[peer].base + 64 + 8 * (uint64_t)r->me,
			 r->board->cards[peer].key, &out);
	}
	reap(r, &out, 0);
	r->board->secs[r->me] = now() - t0;
	r->board->cpu[r->me] = cpu_secs() - c0;
	barrier(r);
	if (r->me == 0) {
		double worst = 0, cpu = 0;
		for (int p = 0; p < r->np; p++) {
			worst = r->board->secs[p] > worst ? r->board->secs[p] : worst;
			cpu += r->board->cpu[p];
		}
		printf("alltoall_%d_procs_mps %.3f Mmsg/s\n", r->np,
		       (double)r->np * posts / worst / 1e6);
		printf("alltoall_%d_procs_cpu_mps %.3f Mmsg/cpu-s\n", r->np,
		       (double)r->np * posts / cpu / 1e6);
	}
	return 0;
}

/* ---- memory ------------------------------------------------------------ */
static void print_memory(const char *tag)
{
	static const char *keys[] = { "Rss:", "Pss:", "Pss_Shmem:", "Shared_Clean:",
				      "Shared_Dirty:", "Private_Clean:", "Private_Dirty:" };
	char line[256];
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	int maps = 0;
	if (!f) {
		perror("smaps_rollup");
		exit(2);
	}
	while (fgets(line, sizeof(line), f))
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strncmp(line, keys[k], strlen(keys[k])) == 0) {
				char name[32];
				snprintf(name, sizeof(name), "%.*s", (int)strlen(keys[k]) - 1, keys[k]);
				printf("%s_%s_kib %lld KiB\n", tag, name,
				       atoll(line + strlen(keys[k])));
			}
	fclose(f);
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		maps++;
	if (f)
		fclose(f);
	f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmSize:", 7) == 0)
			printf("%s_VmSize_kib %lld KiB\n", tag, atoll(line + 7));
	if (f)
		fclose(f);
	printf("%s_mappings %d maps\n", tag, maps);
	int fds = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d && readdir(d))
		fds++;
	if (d)
		closedir(d);
	printf("%s_fds %d fds\n", tag, fds - 3); /* ., .. and opendir's own */
}

static int memory(struct rank *r, int regs, int both)
{
	static struct fid_xpu_mr *mrs[MAXK];
	static void *bufs[MAXK];
	char tag[32];
	int64_t out = 0;
	for (int i = 0; i < regs; i++) {
		int fd;
		uint64_t off;
		CHECK(fi_xpu_alloc(r->x.ctx, 64 << 10, 4096, FI_XPU_ALLOC_DMABUF, &bufs[i], &fd, &off));
		close(fd);
		CHECK(fi_xpu_mr_reg(r->x.dom, r->x.ctx, bufs[i], 64 << 10, FI_REMOTE_WRITE, 0, 0, 0,
				    &mrs[i], NULL));
	}
	if (r->me == 0) {
		snprintf(tag, sizeof(tag), "mem_%d_%d_%d_alone", r->np, regs, both);
		print_memory(tag);
	}
	barrier(r);
	if (both) {
		connect_all(r);
	} else {
		for (int p = r->me + 1; p < r->np; p++) {
			size_t len = sizeof(r->raw[p]);
			CHECK(fi_xpu_av_insert(r->x.av, r->board->cards[p].name, 1, &r->fa[p], 0, NULL));
			CHECK(fi_xpu_av_lookup(r->x.av, r->fa[p], r->raw[p], &len, 0, r->x.ctx));
		}
	}
	barrier(r);
	for (int p = both ? 0 : r->me + 1; p < r->np; p++)
		if (p != r->me)
			write_to(r, p, 8, r->board->cards[p].base + 64 + 8 * (uint64_t)r->me,
				 r->board->cards[p].key, &out);
	reap(r, &out, 0);
	barrier(r);
	if (r->me == 0) {
		snprintf(tag, sizeof(tag), "mem_%d_%d_%d", r->np, regs, both);
		print_memory(tag);
	}
	barrier(r);
	for (int i = 0; i < regs; i++) {
		CHECK(fi_xpu_close(&mrs[i]->fid));
		CHECK(fi_xpu_free(r->x.ctx, bufs[i]));
	}
	return 0;
}

/* ---- lookups ----------------------------------------------------------- */
__attribute__((noinline)) int lookup_one(struct rank *r, fi_addr_t fa, uint64_t *raw)
{
	size_t len = sizeof(uint64_t) * 8;
	return fi_xpu_av_lookup(r->x.av, fa, raw, &len, 0, r->x.ctx);
}

/* The first lookup of an entry, which also takes a slot in the context's
 * table of raw addresses. */
__attribute__((noinline)) int lookup_first(struct rank *r, fi_addr_t fa, uint64_t *raw)
{
	size_t len = sizeof(uint64_t) * 8;
	return fi_xpu_av_lookup(r->x.av, fa, raw, &len, 0, r->x.ctx);
}

static int lookup(struct rank *r, int m, int k, int posts)
{
	static struct fid_xpu_mr *mrs[MAXK];
	/* The target: m registrations of 64-byte slices of its heap, the
	 * first being the heap's own; fewer if its tables fill up first. */
	if (r->me == 1) {
		int got = 1;
		r->board->keys[0] = r->board->cards[1].key;
		for (; got < m; got++) {
			int rc = fi_xpu_mr_reg(r->x.dom, r->x.ctx, r->x.heap + 4096 + 64 * (size_t)got, 64,
					       FI_REMOTE_WRITE, 0, 0, 0, &mrs[got], NULL);
			if (rc == -FI_ENOSPC)
				break;
			CHECK(rc);
			CHECK(fi_xpu_mr_key(mrs[got], &r->board->keys[got]));
		}
		r->board->secs[1] = got;
	}
	barrier(r);
	m = (int)r->board->secs[1];
	if (r->me == 0) {
		uint64_t raw[8];
		int64_t out = 0;
		/* k entries of the same peer in the AV, each looked up once. */
		for (int i = 0; i < k; i++)
			CHECK(fi_xpu_av_insert(r->x.av, r->board->cards[1].name, 1, &r->fa[i], 0, NULL));
		for (int i = 0; i < k - 1; i++) {
			size_t len = sizeof(raw);
			CHECK(fi_xpu_av_lookup(r->x.av, r->fa[i], raw, &len, 0, r->x.ctx));
		}
		CHECK(lookup_first(r, r->fa[k - 1], r->raw[1]));
		uint64_t dst = r->board->cards[1].base + (m > 1 ? 4096 + 64 * (uint64_t)(m - 1) : 64);
		for (int i = 0; i < posts; i++) {
			int rc;
			while ((rc = post_one(r, 1, 8, dst, r->board->keys[m - 1])) == -FI_EAGAIN)
				reap(r, &out, 0);
			CHECK(rc);
			out++;
			reap(r, &out, 0);
		}
		for (int i = 0; i < posts; i++)
			CHECK(lookup_one(r, r->fa[k - 1], raw));
		printf("lookup_registrations %d registrations\n", m);
		printf("lookup_av_entries %d entries\n", k);
	}
	barrier(r);
	if (r->me == 1)
		for (int i = 1; i < m; i++)
			CHECK(fi_xpu_close(&mrs[i]->fid));
	return 0;
}

/* ---- large copies ------------------------------------------------------ */
static double copy_rate(struct rank *r, uint8_t *dst, const uint8_t *src, size_t len, int reps,
			int device)
{
	int64_t out = 0;
	double t0 = now();
	for (int i = 0; i < reps; i++) {
		if (device) {
			int rc;
			while ((rc = fi_xpu_write(&r->x.ep, (void *)src, len, r->x.desc, 0, r->raw[1],
						  (uint64_t)(uintptr_t)dst, r->board->cards[1].key,
						  NULL, 0, FI_XPU_WORK_ITEM)) == -FI_EAGAIN)
				reap(r, &out, 0);
			CHECK(rc);
			out++;
			reap(r, &out, 4);
		} else {
			memcpy(dst, src, len);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
	}
	reap(r, &out, 0);
	return (double)len * reps / (now() - t0) / 1e6;
}

static int copy(struct rank *r, int rounds)
{
	if (r->me == 0) {
		struct rusage u0, u1;
		uint8_t *peer = (uint8_t *)(uintptr_t)r->board->cards[1].base;
		uint8_t *a = malloc(BIG), *b = malloc(BIG);
		memset(a, 1, BIG);
		memset(b, 2, BIG);
		/* The first write through the fresh mapping of the peer's heap. */
		getrusage(RUSAGE_SELF, &u0);
		double t0 = now();
		copy_rate(r, peer, r->x.heap + BIG, BIG, 1, 1);
		double t = now() - t0;
		getrusage(RUSAGE_SELF, &u1);
		printf("first_write_16MiB_ms %.3f ms\n", t * 1e3);
		printf("first_write_16MiB_faults %ld faults\n", u1.ru_minflt - u0.ru_minflt);
		static const size_t sizes[] = { 4u << 20, 16u << 20 };
		static const char *names[] = { "4MiB", "16MiB" };
		for (int s = 0; s < 2; s++) {
			double best_w = 0, best_m = 0;
			int reps = (int)((128u << 20) / sizes[s]);
			for (int i = 0; i < rounds; i++) {
				double w = copy_rate(r, peer, r->x.heap + BIG, sizes[s], reps, 1);
				double m = copy_rate(r, b, a, sizes[s], reps, 0);
				best_w = w > best_w ? w : best_w;
				best_m = m > best_m ? m : best_m;
			}
			printf("write_%s_MBps %.1f MB/s\n", names[s], best_w);
			printf("memcpy_%s_MBps %.1f MB/s\n", names[s], best_m);
		}
		free(a);
		free(b);
	}
	barrier(r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: shm_scale rate|alltoall|mem|lookup|copy ARGS\n");
		return 2;
	}
	const char *mode = argv[1];
	int a = atoi(argv[2]), b = argc > 3 ? atoi(argv[3]) : 0, c = argc > 4 ? atoi(argv[4]) : 0;
	int np = 2;
	size_t heap = 1u << 20;
	if (strcmp(mode, "alltoall") == 0 || strcmp(mode, "mem") == 0)
		np = a;
	if (strcmp(mode, "copy") == 0)
		heap = 2 * (size_t)BIG;
	if (np < 2 || np > MAXP || a < 0 || b < 0 || (strcmp(mode, "lookup") == 0 && (a < 1 || a > MAXK || b < 1 || b > MAXK)) ||
	    (strcmp(mode, "rate") == 0 && (a < 1 || a > FI_XPU_HOST_MAX_ITEMS)) ||
	    (strcmp(mode, "mem") == 0 && b > MAXK))
		return 2;
	struct board *board = mmap(NULL, sizeof(struct board), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (board == MAP_FAILED)
		return 2;
	struct rank r;
	memset(&r, 0, sizeof(r));
	r.np = np;
	r.board = board;
	fflush(stdout);
	pid_t kids[MAXP];
	for (int p = 1; p < np; p++) {
		kids[p] = fork();
		if (kids[p] == 0) {
			/* A parent killed by a time limit must not leave its children spinning. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			r.me = p;
			break;
		}
	}
	open_rank(&r, heap);
	barrier(&r);
	if (strcmp(mode, "rate") == 0 || strcmp(mode, "alltoall") == 0 || strcmp(mode, "copy") == 0)
		connect_all(&r);
	barrier(&r);
	if (strcmp(mode, "rate") == 0)
		rate(&r, a, b);
	else if (strcmp(mode, "alltoall") == 0)
		alltoall(&r, b);
	else if (strcmp(mode, "mem") == 0)
		memory(&r, b, c);
	else if (strcmp(mode, "lookup") == 0)
		lookup(&r, a, b, c);
	else if (strcmp(mode, "copy") == 0)
		copy(&r, a);
	else
		return 2;
	barrier(&r);
	close_rank(&r);
	if (r.me != 0)
		return 0;
	int bad = 0;
	for (int p = 1; p < np; p++) {
		int st;
		waitpid(kids[p], &st, 0);
		bad |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	return bad;
}
