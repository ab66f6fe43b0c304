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
#include <fi_xpu.h>
#include <fi_xpu/device.h>

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

#define CHECK(expr)                                                             \
	do {                                                                    \
		long long rc_ = (long long)(expr);                              \
		if (rc_ < 0) {                                                  \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__,  \
				#expr, fi_xpu_strerror((int)rc_));              \
			exit(2);                                                \
		}                                                               \
	} while (0)

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
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	uint8_t *heap;
	uint8_t desc[64];
	uint64_t raw[8];
	struct card peer;
	int sock;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void xfer(int sock, const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) {
		perror("socketpair");
		exit(2);
	}
}

static void setup(struct bench *b)
{
	struct fi_xpu_info *info, *i;
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_cq_attr cattr = { .size = 1024, .format = FI_CQ_FORMAT_CONTEXT, .timeout = 10000 };
	struct fi_xpu_ep_attr eattr = { 0 };
	struct card mine;
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	int fd;
	uint64_t off;

	const char *want = getenv("FI_XPU_PROVIDER");
	if (!want || !*want || strchr(want, ',') || want[0] == '^')
		want = "shm";
	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	for (i = info; i && strcmp(i->prov_name, want) != 0; i = i->next)
		;
	if (!i) {
		fprintf(stderr, "the %s provider is not available\n", want);
		exit(2);
	}
	CHECK(fi_xpu_domain(i, NULL, &b->dom, NULL));
	fi_xpu_freeinfo(info);
	CHECK(fi_xpu_ctx_open(b->dom, &xattr, &b->ctx, NULL));
	CHECK(fi_xpu_av_open(b->dom, NULL, &b->av, NULL));
	cattr.xpu_ctx = b->ctx;
	CHECK(fi_xpu_cq_open(b->dom, &cattr, &b->hcq, NULL));
	eattr.xpu_ctx = b->ctx;
	CHECK(fi_xpu_endpoint(b->dom, &eattr, &b->hep, NULL));
	CHECK(fi_xpu_ep_bind(b->hep, &b->av->fid, 0));
	CHECK(fi_xpu_ep_bind(b->hep, &b->hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(b->hep));
	memset(&mine, 0, sizeof(mine));
	CHECK(fi_xpu_getname(b->hep, mine.name, &len));
	CHECK(fi_xpu_alloc(b->ctx, HEAP, 4096, FI_XPU_ALLOC_DMABUF, (void **)&b->heap, &fd, &off));
	close(fd);
	memset(b->heap, 0, HEAP);
	CHECK(fi_xpu_mr_reg(b->dom, b->ctx, b->heap, HEAP,
			    FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &b->mr, NULL));
	CHECK(fi_xpu_mr_key(b->mr, &mine.key));
	len = sizeof(b->desc);
	CHECK(fi_xpu_mr_desc(b->mr, b->desc, &len, 0, b->ctx));
	mine.base = (uint64_t)(uintptr_t)b->heap;
	xfer(b->sock, &mine, &b->peer, sizeof(mine));
	CHECK(fi_xpu_av_insert(b->av, b->peer.name, 1, &fa, 0, NULL));
	len = sizeof(b->raw);
	CHECK(fi_xpu_av_lookup(b->av, fa, b->raw, &len, 0, b->ctx));
	CHECK(fi_xpu_export(&b->hep->fid, 0, &b->ep.fid));
	CHECK(fi_xpu_export(&b->hcq->fid, 0, &b->cq.fid));
}

static void teardown(struct bench *b)
{
	CHECK(fi_xpu_close(&b->mr->fid));
	CHECK(fi_xpu_free(b->ctx, b->heap));
	CHECK(fi_xpu_close(&b->hep->fid));
	CHECK(fi_xpu_close(&b->hcq->fid));
	CHECK(fi_xpu_close(&b->av->fid));
	CHECK(fi_xpu_close(&b->ctx->fid));
	CHECK(fi_xpu_close(&b->dom->fid));
}

/* Reaps completions until at most `target` operations are outstanding. */
static void reap(struct bench *b, int *outstanding, int target)
{
	struct fi_cq_entry e[16];
	while (*outstanding > target) {
		int64_t n = fi_xpu_cq_read(&b->cq, e, 16, FI_XPU_WORK_ITEM);
		if (n > 0)
			*outstanding -= (int)n;
		else
			CHECK(n == -FI_EAGAIN ? 0 : n);
	}
}

/* One 8-byte write: the post whose instruction count is reported. */
__attribute__((noinline)) int post_one(struct bench *b, size_t src, size_t dst, size_t len)
{
	return fi_xpu_write(&b->ep, b->heap + src, len, b->desc, 0, b->raw, b->peer.base + dst,
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
	while (__atomic_load_n((uint64_t *)(b->heap + off), __ATOMIC_ACQUIRE) != want) {
		struct fi_cq_entry e[16];
		int64_t n = fi_xpu_cq_read(&b->cq, e, 16, FI_XPU_WORK_ITEM);
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
		*(uint64_t *)(b->heap + VALUES + 8 * (size_t)i) = (uint64_t)i;
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
