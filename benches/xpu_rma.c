/*
 * fi_xpu side of the RMA benchmarks: the measurements of
 * benches/libfabric_rma.c, issued by device code (CPU threads standing in
 * for the device, iface FI_HMEM_SYSTEM) through fi_xpu/device.h on the
 * provider FI_XPU_PROVIDER names (default shm), between a parent and a
 * forked child. Also measures single-thread memcpy bandwidth as a baseline.
 *
 * usage: xpu_rma [iterations]            prints "name value unit" lines
 *        xpu_rma --post N                posts N 8-byte writes through
 *                                        post_one() (for callgrind)
 */
#include "xpu_bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAP (40u << 20)
#define BIG (16u << 20)
#define WINDOW 64
/* Ping-pong sources: round i writes the word at VALUES + 8 * i, which holds
 * i and never changes, since a source may be read until its write
 * completes (the ofi provider issues it later, from its proxy). */
#define VALUES (2 * BIG + 8192)
#define MAX_ITERS ((HEAP - VALUES) / 8 - 1)

struct card {
	uint8_t name[64];
	uint64_t base;
	uint64_t key;
};

struct bench {
	struct xpu_ep x;
	uint64_t raw[8];
	struct card peer;
	int sock;
};

static void xfer(int sock, const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) {
		perror("socketpair");
		exit(2);
	}
}

static void setup(struct bench *b)
{
	struct card mine;
	size_t len;
	fi_addr_t fa;

	const char *want = getenv("FI_XPU_PROVIDER");
	if (!want || !*want || strchr(want, ',') || want[0] == '^')
		want = "shm";
	memset(&mine, 0, sizeof(mine));
	xpu_ep_open(&b->x, want, 1024, HEAP, mine.name, &mine.key);
	mine.base = (uint64_t)(uintptr_t)b->x.heap;
	xfer(b->sock, &mine, &b->peer, sizeof(mine));
	CHECK(fi_xpu_av_insert(b->x.av, b->peer.name, 1, &fa, 0, NULL));
	len = sizeof(b->raw);
	CHECK(fi_xpu_av_lookup(b->x.av, fa, b->raw, &len, 0, b->x.ctx));
}

static void teardown(struct bench *b)
{
	xpu_ep_close(&b->x);
}

/* Reaps completions until at most `target` operations are outstanding. */
static void reap(struct bench *b, int *outstanding, int target)
{
	struct fi_cq_entry e[16];
	while (*outstanding > target) {
		int64_t n = fi_xpu_cq_read(&b->x.cq, e, 16, FI_XPU_WORK_ITEM);
		if (n > 0)
			*outstanding -= (int)n;
		else
			CHECK(n == -FI_EAGAIN ? 0 : n);
	}
}

/* One 8-byte write: the post whose instruction count is reported. */
__attribute__((noinline)) int post_one(struct bench *b, size_t src, size_t dst, size_t len)
{
	return fi_xpu_write(&b->x.ep, b->x.heap + src, len, b->x.desc, 0, b->raw, b->peer.base + dst,
			    b->peer.key, NULL, 0, FI_XPU_WORK_ITEM);
}

static void write_at(struct bench *b, size_t src, size_t dst, size_t len, int *outstanding)
{
	int rc;
	while ((rc = post_one(b, src, dst, len)) == -FI_EAGAIN)
		reap(b, outstanding, *outstanding > 0 ? *outstanding - 1 : 0);
	CHECK(rc);
	(*outstanding)++;
}

static void wait_word(struct bench *b, size_t off, uint64_t want, int *outstanding)
{
	while (__atomic_load_n((uint64_t *)(b->x.heap + off), __ATOMIC_ACQUIRE) != want) {
		struct fi_cq_entry e[16];
		int64_t n = fi_xpu_cq_read(&b->x.cq, e, 16, FI_XPU_WORK_ITEM);
		if (n > 0)
			*outstanding -= (int)n;
	}
}

static void barrier(struct bench *b)
{
	char a = 'b', c;
	xfer(b->sock, &a, &c, 1);
}

static void memcpy_baseline(void)
{
	static const size_t sizes[] = { 64u << 10, 1u << 20, 16u << 20 };
	static const char *names[] = { "64KiB", "1MiB", "16MiB" };
	uint8_t *src = malloc(BIG), *dst = malloc(BIG);
	memset(src, 1, BIG);
	memset(dst, 2, BIG);
	for (int s = 0; s < 3; s++) {
		size_t len = sizes[s];
		int reps = (int)((256u << 20) / len);
		double t0 = now();
		for (int i = 0; i < reps; i++) {
			memcpy(dst, src, len);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		printf("memcpy_%s_MBps %.1f MB/s\n", names[s], (double)len * reps / (now() - t0) / 1e6);
	}
	free(src);
	free(dst);
}

static void run(struct bench *b, int initiator, int iters)
{
	int out = 0;
	for (int i = 1; i <= iters; i++)
		*(uint64_t *)(b->x.heap + VALUES + 8 * (size_t)i) = (uint64_t)i;
	barrier(b);
	double t0 = now();
	for (int i = 1; i <= iters; i++) {
		size_t src = VALUES + 8 * (size_t)i;
		if (initiator) {
			write_at(b, src, 0, 8, &out);
			wait_word(b, 0, (uint64_t)i, &out);
		} else {
			wait_word(b, 0, (uint64_t)i, &out);
			write_at(b, src, 0, 8, &out);
		}
	}
	reap(b, &out, 0);
	double lat = (now() - t0) / iters / 2 * 1e6;
	barrier(b);
	if (initiator) {
		printf("latency_8B_us %.3f us\n", lat);
		int n = iters * 10;
		t0 = now();
		for (int i = 0; i < n; i++) {
			write_at(b, 64, 64 + (size_t)(i % 64) * 8, 8, &out);
			if (out >= WINDOW)
				reap(b, &out, WINDOW / 2);
		}
		reap(b, &out, 0);
		printf("rate_8B_mps %.3f Mmsg/s\n", n / (now() - t0) / 1e6);

		static const size_t sizes[] = { 64u << 10, 1u << 20, 16u << 20 };
		static const char *names[] = { "64KiB", "1MiB", "16MiB" };
		for (int s = 0; s < 3; s++) {
			size_t len = sizes[s];
			int reps = (int)((256u << 20) / len);
			/* Untimed first pass: the first touch of the peer's pages
			 * through this process's fresh mapping page-faults (4 KiB
			 * pages: 4096 faults for 16 MiB; cargo xtask bench-shm
			 * measures it), while memcpy's buffers are touched before
			 * its timing starts. */
			write_at(b, BIG + 4096, 4096, len, &out);
			reap(b, &out, 0);
			t0 = now();
			for (int i = 0; i < reps; i++) {
				write_at(b, BIG + 4096, 4096, len, &out);
				if (out >= 8)
					reap(b, &out, 4);
			}
			reap(b, &out, 0);
			printf("bw_%s_MBps %.1f MB/s\n", names[s], (double)len * reps / (now() - t0) / 1e6);
		}
	}
	barrier(b);
}

int main(int argc, char **argv)
{
	int post = argc > 2 && strcmp(argv[1], "--post") == 0;
	int iters = post ? atoi(argv[2]) : (argc > 1 ? atoi(argv[1]) : 10000);
	int sv[2];
	if (iters < 1 || iters > (int)MAX_ITERS || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 2;
	fflush(stdout);
	pid_t pid = fork();
	struct bench b;
	memset(&b, 0, sizeof(b));
	/* A parent killed by a time limit must not leave its child spinning. */
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	b.sock = pid == 0 ? sv[1] : sv[0];
	close(pid == 0 ? sv[0] : sv[1]);
	setup(&b);
	if (post) {
		int out = 0;
		if (pid != 0)
			for (int i = 0; i < iters; i++) {
				write_at(&b, 64, 64, 8, &out);
				reap(&b, &out, 0);
			}
		barrier(&b);
	} else {
		run(&b, pid != 0, iters);
		if (pid != 0)
			memcpy_baseline();
	}
	barrier(&b);
	teardown(&b);
	if (pid == 0)
		return 0;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
