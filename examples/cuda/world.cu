/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A world on a GPU: NRANKS processes (the parent forks the others; they meet
 * through the TCP bootstrap on 127.0.0.1), FI_HMEM_CUDA contexts, one
 * symmetric window of device memory that the host reads only by copying
 * it out (cudaMemcpy). Where the provider does not serve device memory,
 * or FI_XPU_EXAMPLE_MEMORY=pinned asks for it, the contexts are
 * FI_HMEM_SYSTEM over the callbacks of cuda_mem.h (pinned host memory)
 * and the program says so on stderr. A CUDA block of one
 * thread per peer writes a row into every peer's window, adds to every
 * peer's counter word, and the block barriers with all ranks
 * (fi_xpu_world_barrier at work-group scope); then one warp per peer reads
 * its row back and barriers at subgroup scope. Every rank checks every
 * byte. The last line is
 *   RESULT world <provider> ok <microseconds per round> -
 * or the process exits non-zero.
 *
 *   nvcc -std=c++17 -I . -I include -I examples/cuda examples/cuda/world.cu \
 *        -L target/release -lfi_xpu -o world_cuda && FI_XPU_PROVIDER=shm ./world_cuda
 */
#include "../example.h"
#include "cuda_mem.h"

#include <fi_xpu.h>
#include <fi_xpu/device_world.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define NRANKS 4
#define ROW 256
#define W_COUNT 0
#define W_ROWS 4096                      /* row from rank r at W_ROWS + r * ROW */
#define W_SRC (W_ROWS + NRANKS * ROW)    /* this rank's outgoing rows */
#define W_BACK (W_SRC + NRANKS * ROW)    /* rows read back */
#define W_SIZE (W_BACK + NRANKS * ROW)
#define ROUNDS 20
#define WAIT_MS 20000

__host__ __device__ static unsigned char pattern(int src, int dst, int i, int round)
{
	return (unsigned char)(src * 31 + dst * 7 + i + round);
}

/* Records a kernel's first failure. */
__device__ static void note(int *err, int rc)
{
	if (rc)
		atomicCAS(err, 0, rc);
}

/* One thread per peer. */
__global__ void exchange(const struct fi_xpu_window_dev *w, const struct fi_xpu_world_dev *wd,
			 int round, int *err)
{
	int p = (int)threadIdx.x;
	unsigned char *mine = (unsigned char *)(uintptr_t)w->addr;
	unsigned char *src = mine + W_SRC + p * ROW;
	uint64_t add = (uint64_t)w->rank + 1;
	for (int i = 0; i < ROW; i++)
		src[i] = pattern((int)w->rank, p, i, round);
	note(err, fi_xpu_world_put(w, p, W_ROWS + (uint64_t)w->rank * ROW, src, ROW, 0,
				   FI_XPU_WORK_GROUP));
	note(err, fi_xpu_world_atomic(w, p, W_COUNT, &add, 1, FI_UINT64, FI_SUM, FI_INJECT,
				      FI_XPU_WORK_GROUP));
	note(err, fi_xpu_world_barrier(wd, WAIT_MS, FI_XPU_WORK_GROUP));
}

/* One warp per peer: lane 0 reads the row back, the warp barriers. */
__global__ void read_back(const struct fi_xpu_window_dev *w, const struct fi_xpu_world_dev *wd,
			  int *err)
{
	int p = (int)blockIdx.x;
	unsigned char *mine = (unsigned char *)(uintptr_t)w->addr;
	if (threadIdx.x == 0) {
		note(err, fi_xpu_world_get(w, p, W_ROWS + (uint64_t)w->rank * ROW,
					   mine + W_BACK + p * ROW, ROW, 0, FI_XPU_WORK_ITEM));
		note(err, fi_xpu_world_quiet(wd, WAIT_MS, FI_XPU_WORK_ITEM));
	}
	if (p == 0) {
		__syncwarp(); /* the whole warp is the subgroup */
		note(err, fi_xpu_world_barrier(wd, WAIT_MS, FI_XPU_SUBGROUP));
	}
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int run(int rank)
{
	/* Device memory first (the provider's own CUDA backend, no
	 * callbacks); else the memory of cuda_mem.h, host memory (memfd pages
	 * pinned and mapped into the GPU at the same address) that the
	 * contexts declare FI_HMEM_SYSTEM, which every provider serves. */
	struct fi_xpu_ctx_open_attr xa = { FI_HMEM_CUDA, 0, NULL };
	const char *mem = getenv("FI_XPU_EXAMPLE_MEMORY");
	unsigned char host[W_SIZE];
	int rc;
	struct fi_xpu_world_attr wa;
	struct fid_xpu_world *world;
	struct fi_xpu_world_info info;
	struct fid_xpu_window *win;
	const char *dev = getenv("FI_XPU_CUDA_DEVICE");
	void *addr, *wdev;
	unsigned char *mine;
	int *err, ok = 1;
	double t0;

	xa.device = dev ? strtoull(dev, NULL, 10) : 0;
	CUDA_CHECK(cudaSetDevice((int)xa.device));
	memset(&wa, 0, sizeof(wa));
	wa.size = sizeof(wa);
	wa.rank = rank;
	wa.nranks = NRANKS;
	wa.xpu = &xa;
	if (mem && !strcmp(mem, "pinned"))
		xa.iface = FI_HMEM_SYSTEM, xa.ops = &cuda_mem_ops;
	rc = fi_xpu_world_open(&wa, &world, NULL);
	if (rc && xa.iface == FI_HMEM_CUDA) {
		fprintf(stderr, "[rank %d] device memory refused (%s); pinned host memory instead\n",
			rank, fi_xpu_strerror(rc));
		xa.iface = FI_HMEM_SYSTEM;
		xa.ops = &cuda_mem_ops;
		rc = fi_xpu_world_open(&wa, &world, NULL);
	}
	CHECK(rc);
	CHECK(fi_xpu_world_query(world, &info));
	CHECK(fi_xpu_world_alloc(world, W_SIZE, 0, &addr, &wdev, &win));
	mine = (unsigned char *)addr;
	CUDA_CHECK(cudaHostAlloc((void **)&err, sizeof(int), cudaHostAllocMapped));
	*err = 0;
	t0 = now_us();
	for (int round = 0; round < ROUNDS && ok; round++) {
		uint64_t want = (uint64_t)(round + 1) * NRANKS * (NRANKS + 1) / 2;
		exchange<<<1, NRANKS>>>((const struct fi_xpu_window_dev *)wdev,
					(const struct fi_xpu_world_dev *)info.dev, round, err);
		CUDA_CHECK(cudaDeviceSynchronize());
		if (*err) {
			fprintf(stderr, "[rank %d] round %d: %s\n", rank, round, fi_xpu_strerror(*err));
			ok = 0;
			break;
		}
		CUDA_CHECK(cudaMemcpy(host, mine, W_SIZE, cudaMemcpyDefault));
		for (int p = 0; p < NRANKS && ok; p++)
			for (int i = 0; i < ROW; i++)
				if (host[W_ROWS + p * ROW + i] != pattern(p, rank, i, round)) {
					fprintf(stderr, "[rank %d] round %d: byte %d from %d wrong\n",
						rank, round, i, p);
					ok = 0;
					break;
				}
		uint64_t count;
		memcpy(&count, host + W_COUNT, sizeof(count));
		if (ok && count != want) {
			fprintf(stderr, "[rank %d] round %d: counter %llu, want %llu\n", rank, round,
				(unsigned long long)count, (unsigned long long)want);
			ok = 0;
		}
		/* Nobody writes the next round before everyone checked this one. */
		CHECK(fi_xpu_world_host_barrier(world));
	}
	t0 = (now_us() - t0) / ROUNDS;
	if (ok) {
		read_back<<<NRANKS, 32>>>((const struct fi_xpu_window_dev *)wdev,
					  (const struct fi_xpu_world_dev *)info.dev, err);
		CUDA_CHECK(cudaDeviceSynchronize());
		if (*err) {
			fprintf(stderr, "[rank %d] read back: %s\n", rank, fi_xpu_strerror(*err));
			ok = 0;
		}
		if (ok)
			CUDA_CHECK(cudaMemcpy(host, mine, W_SIZE, cudaMemcpyDefault));
		for (int p = 0; p < NRANKS && ok; p++)
			for (int i = 0; i < ROW; i++)
				if (host[W_BACK + p * ROW + i] != pattern(rank, p, i, ROUNDS - 1)) {
					fprintf(stderr, "[rank %d] read back from %d: byte %d wrong\n",
						rank, p, i);
					ok = 0;
					break;
				}
	}
	(void)cudaFreeHost(err);
	CHECK(fi_xpu_world_free(win));
	CHECK(fi_xpu_world_close(world));
	if (rank == 0 && ok) {
		const char *prov = getenv("FI_XPU_PROVIDER");
		printf("world memory %s\n", xa.iface == FI_HMEM_CUDA ? "device" : "pinned_host");
		printf("RESULT world %s ok %.1f -\n", prov && *prov ? prov : "shm", t0);
	}
	return ok ? 0 : 1;
}

int main(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	char addr[64];
	pid_t kids[NRANKS];
	int s = socket(AF_INET, SOCK_STREAM, 0), rc = 0;

	/* A free port for rank 0's rendezvous, chosen before CUDA is touched
	 * (a CUDA context does not survive fork). */
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &len) != 0) {
		perror("choosing a port");
		return 1;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(a.sin_port));
	close(s);
	setenv("FI_XPU_BOOTSTRAP_ADDR", addr, 1);
	fflush(stdout);
	for (int r = 1; r < NRANKS; r++) {
		kids[r] = fork();
		if (kids[r] == 0)
			return run(r);
	}
	rc = run(0);
	for (int r = 1; r < NRANKS; r++) {
		int st = 0;
		waitpid(kids[r], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "world: rank %d failed\n", r);
			rc = 1;
		}
	}
	return rc;
}
