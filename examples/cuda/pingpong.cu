/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * pingpong on a GPU: two processes on one node (the parent forks its peer),
 * each with a heap of device memory (peer.h; pinned host memory where the
 * provider does not serve device memory).
 *
 * Latency. For each size, one CUDA kernel per side runs the whole loop:
 * rank 0 writes `size` bytes into rank 1's heap with remote CQ data (the
 * iteration number), rank 1 answers with a write of the same size when that
 * data arrives, and so on. Then the same at 8 bytes with put-with-signal
 * (fi_xpu_put_signal, the peer waiting on its signal word with
 * fi_xpu_signal_wait_until). Rank 0 stamps every round trip with the GPU's
 * %globaltimer. Afterwards both sides compare the received bytes with the
 * peer's pattern.
 *
 * Bandwidth. Rank 0 writes 16 MiB, then 256 MiB (up to -B), into rank 1's
 * heap as one write split across a grid of one block per SM
 * (fi_xpu_coop_write_part at work-group scope: each block its share as one
 * cooperative write); a one-thread kernel then reads every block's
 * completion. Rank 1 checks every byte on the GPU.
 *
 * Rank 0 prints:
 *   RESULT write/<size>B <provider> ok|FAIL <usec per one-way write> <MB/s>
 *   LAT <op>/<size>B <provider> <memory> <p50 ns> <p99 ns>     (one-way)
 *   BW put/<MiB>MiB <provider> <memory> <GB/s> <blocks>        (median of 5)
 *
 *   ./pingpong_cuda [-n iterations] [-S max_size] [-B max_bandwidth_size]
 */
#include "peer.h"

#include <algorithm>
#include <inttypes.h>
#include <vector>

struct counts {
	uint64_t remote; /* writes that arrived (remote CQ data) */
	uint64_t local;  /* own writes completed */
	uint64_t bad;    /* arrivals whose data was not the expected iteration */
};

/* The GPU's clock in ns: %globaltimer; on AMD GPUs the 100 MHz wall
 * clock. */
__device__ static uint64_t gtime(void)
{
#if defined(__HIP_DEVICE_COMPILE__)
	return (uint64_t)__builtin_amdgcn_s_memrealtime() * 10;
#elif defined(__HIPCC__) || defined(__HIP__)
	return 0; /* the host pass of hipcc */
#else
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
#endif
}

/* Reads one completion and counts it. */
__device__ static int64_t dev_poll(struct dev_handles *h, struct counts *c)
{
	struct fi_cq_data_entry e;
	int64_t n = dev_wait_one(h, &e);
	if (n < 0)
		return n;
	if (e.flags & FI_REMOTE_CQ_DATA) {
		if (e.data != c->remote)
			c->bad++;
		c->remote++;
	} else {
		c->local++;
	}
	return 0;
}

__global__ void pingpong(struct dev_handles *h, const char *tx, uint64_t rx_off, size_t size,
			 int iters, int rank, uint64_t *stamps, struct counts *out)
{
	struct counts c = { 0, 0, 0 };
	int i;
	for (i = 0; i < iters; i++) {
		if (rank == 0)
			stamps[i] = gtime();
		if (rank == 1)
			while (c.remote <= (uint64_t)i)
				DCHECK(h, dev_poll(h, &c));
		int rc;
		do
			rc = fi_xpu_write(&h->ep, tx, size, NULL, (uint64_t)i, &h->raw,
					  h->peer_base + rx_off, h->peer_key, NULL,
					  FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM);
		while (rc == -FI_EAGAIN);
		DCHECK(h, rc);
		if (rank == 0)
			while (c.remote <= (uint64_t)i)
				DCHECK(h, dev_poll(h, &c));
	}
	if (rank == 0)
		stamps[iters] = gtime();
	while (c.local < (uint64_t)iters)
		DCHECK(h, dev_poll(h, &c));
	*out = c;
}

/* 8 bytes with put-with-signal: the signal word at sig_off of each heap
 * counts the peer's puts. Local completions are read in batches. */
__global__ void pingpong_signal(struct dev_handles *h, char *heap, uint64_t rx_off,
				uint64_t sig_off, int iters, int rank, uint64_t *stamps,
				struct counts *out)
{
	struct counts c = { 0, 0, 0 };
	const uint64_t *sig = (const uint64_t *)(heap + sig_off);
	int i;
	for (i = 0; i < iters; i++) {
		if (rank == 0)
			stamps[i] = gtime();
		if (rank == 1)
			DCHECK(h, fi_xpu_signal_wait_until(&h->ep, sig, FI_XPU_CMP_GE, (uint64_t)i + 1,
							   10000, FI_XPU_WORK_ITEM));
		int rc;
		do
			rc = fi_xpu_put_signal(&h->ep, heap, 8, NULL, &h->raw, h->peer_base + rx_off,
					       h->peer_key, h->peer_base + sig_off, h->peer_key,
					       (uint64_t)i + 1, FI_XPU_SIGNAL_SET, NULL, 0,
					       FI_XPU_WORK_ITEM);
		while (rc == -FI_EAGAIN);
		DCHECK(h, rc);
		if (rank == 0)
			DCHECK(h, fi_xpu_signal_wait_until(&h->ep, sig, FI_XPU_CMP_GE, (uint64_t)i + 1,
							   10000, FI_XPU_WORK_ITEM));
		if ((uint64_t)i + 1 - c.local >= 512)
			while (c.local < (uint64_t)i + 1)
				DCHECK(h, dev_poll(h, &c));
	}
	if (rank == 0)
		stamps[iters] = gtime();
	while (c.local < (uint64_t)iters)
		DCHECK(h, dev_poll(h, &c));
	c.remote = (uint64_t)iters;
	*out = c;
}

/* One write split across the grid: every block writes its share of
 * [0, size) as one cooperative write (one completion per block). */
__global__ void put_shares(struct dev_handles *h, const char *src, uint64_t dst_off, size_t size)
{
	int rc;
	do
		rc = fi_xpu_coop_write_part(&h->ep, src, size, NULL, 0, &h->raw,
					    h->peer_base + dst_off, h->peer_key, NULL, 0, blockIdx.x,
					    gridDim.x, FI_XPU_WORK_GROUP);
	while (rc == -FI_EAGAIN);
	if (threadIdx.x == 0)
		DCHECK(h, rc);
}

/* Reads `n` completions (one per share). */
__global__ void drain(struct dev_handles *h, uint64_t n)
{
	struct counts c = { 0, 0, 0 };
	while (c.local + c.remote < n)
		DCHECK(h, dev_poll(h, &c));
}

__device__ static unsigned char bw_byte(size_t i)
{
	return (unsigned char)(i * 31 + (i >> 12) * 7 + 1);
}

__global__ void bw_fill(unsigned char *p, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = bw_byte(i);
}

__global__ void bw_check(const unsigned char *p, size_t n, unsigned long long *bad)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		if (p[i] != bw_byte(i))
			atomicAdd(bad, 1ull);
}

static unsigned char pattern(size_t size, int rank, size_t i)
{
	return (unsigned char)(size * 7 + (size_t)rank * 101 + i * 13);
}

/* One-way p50 and p99 (ns) from rank 0's stamps of n round trips. */
static void one_way(const uint64_t *dstamps, int n, double *p50, double *p99)
{
	std::vector<uint64_t> s((size_t)n + 1), d;
	CUDA_CHECK(cudaMemcpy(s.data(), dstamps, s.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
	for (int i = 0; i < n; i++)
		d.push_back(s[i + 1] - s[i]);
	std::sort(d.begin(), d.end());
	*p50 = (double)d[d.size() / 2] / 2;
	*p99 = (double)d[std::min(d.size() - 1, d.size() * 99 / 100)] / 2;
}

/* Both sides' verdicts; rank 0 reports. */
static int both_ok(int sock, int ok)
{
	int peer_ok;
	xfer(sock, &ok, &peer_ok, sizeof(ok));
	return ok && peer_ok;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 8, 4096, 65536, 1 << 20 };
	size_t max = 1 << 20, bw_max = (size_t)256 << 20, k, j, heap_len;
	int iters = 1000, opt, sock, rank, failed = 0;
	struct counts *c;
	uint64_t *stamps;
	struct peer p;
	pid_t child;

	while ((opt = getopt(argc, argv, "n:S:B:")) != -1) {
		if (opt == 'n')
			iters = atoi(optarg);
		else if (opt == 'S')
			max = (size_t)strtoull(optarg, NULL, 0);
		else if (opt == 'B')
			bw_max = (size_t)strtoull(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: %s [-n iterations] [-S max_size] [-B max_bandwidth_size]\n",
				argv[0]);
			return 2;
		}
	}
	if (iters < 1 || max < 8)
		return 2;
	rank = fork_pair(&sock, &child);
	/* Heap: [0, max) what this side sends, [max, 2 max) what the peer
	 * writes, then the signal word; the bandwidth runs use [0, bw_max)
	 * and [bw_max, 2 bw_max). */
	heap_len = std::max(2 * max + 4096, 2 * bw_max);
	peer_setup(&p, sock, heap_len);
	CUDA_CHECK(cudaHostAlloc((void **)&c, sizeof(*c), cudaHostAllocMapped));
	CUDA_CHECK(cudaMalloc((void **)&stamps, ((size_t)iters + 1) * sizeof(uint64_t)));
	std::vector<unsigned char> buf(max);
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && sizes[k] <= max; k++) {
		size_t size = sizes[k];
		int n = size >= 65536 ? (iters / 10 > 0 ? iters / 10 : 1) : iters, ok = 1;
		double us, p50, p99;
		for (j = 0; j < size; j++)
			buf[j] = pattern(size, rank, j);
		peer_put(&p, 0, buf.data(), size);
		CUDA_CHECK(cudaMemset(p.heap + max, 0, size));
		memset(c, 0, sizeof(*c));
		sync_peer(sock);
		us = now_us();
		pingpong<<<1, 1>>>(p.h, p.heap, max, size, n, rank, stamps, c);
		peer_join(&p, "pingpong");
		us = now_us() - us;
		sync_peer(sock); /* both loops ended: every write has landed */
		peer_get(&p, max, buf.data(), size);
		for (j = 0; j < size && ok; j++)
			ok = buf[j] == pattern(size, !rank, j);
		if (c->bad || c->remote != (uint64_t)n)
			ok = 0;
		if (!ok)
			fprintf(stderr, "[%d] pingpong %zu bytes: wrong bytes or order\n",
				(int)getpid(), size);
		ok = both_ok(sock, ok);
		failed |= !ok;
		if (rank == 0) {
			one_way(stamps, n, &p50, &p99);
			printf("RESULT write/%zuB %s %s %.2f %.1f\n", size, p.prov, ok ? "ok" : "FAIL",
			       us / n / 2, 2.0 * (double)n * (double)size / us);
			printf("LAT write/%zuB %s %s %.0f %.0f\n", size, p.prov, p.mem, p50, p99);
			fflush(stdout);
		}
	}

	/* Put-with-signal, 8 bytes. */
	{
		uint64_t sig_off = 2 * max, v = 0x5157a11u + (uint64_t)rank;
		double p50, p99;
		int ok = 1;
		peer_put(&p, 0, &v, sizeof(v));
		CUDA_CHECK(cudaMemset(p.heap + max, 0, 8));
		CUDA_CHECK(cudaMemset(p.heap + sig_off, 0, 8));
		memset(c, 0, sizeof(*c));
		sync_peer(sock);
		pingpong_signal<<<1, 1>>>(p.h, p.heap, max, sig_off, iters, rank, stamps, c);
		peer_join(&p, "pingpong_signal");
		sync_peer(sock);
		peer_get(&p, max, &v, sizeof(v));
		ok = v == 0x5157a11u + (uint64_t)!rank;
		if (!ok)
			fprintf(stderr, "[%d] put_signal: wrong bytes\n", (int)getpid());
		ok = both_ok(sock, ok);
		failed |= !ok;
		if (rank == 0) {
			one_way(stamps, iters, &p50, &p99);
			printf("RESULT put_signal/8B %s %s - -\n", p.prov, ok ? "ok" : "FAIL");
			printf("LAT put_signal/8B %s %s %.0f %.0f\n", p.prov, p.mem, p50, p99);
			fflush(stdout);
		}
	}

	/* Bandwidth: one block per SM, rank 0 to rank 1. */
	for (size_t size = (size_t)16 << 20; size <= bw_max; size *= 16) {
		int sms = 0, ok = 1;
		unsigned long long *bad;
		cudaEvent_t e0, e1;
		std::vector<float> ms;
		CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
		uint64_t blocks = (uint64_t)sms;
		CUDA_CHECK(cudaMalloc((void **)&bad, sizeof(*bad)));
		CUDA_CHECK(cudaMemset(bad, 0, sizeof(*bad)));
		CUDA_CHECK(cudaMemset(p.heap + bw_max, 0, size));
		bw_fill<<<sms, 256>>>((unsigned char *)p.heap, size);
		CUDA_CHECK(cudaEventCreate(&e0));
		CUDA_CHECK(cudaEventCreate(&e1));
		peer_join(&p, "bw_fill");
		sync_peer(sock);
		if (rank == 0) {
			for (int rep = 0; rep < 6; rep++) {
				float t = 0;
				CUDA_CHECK(cudaEventRecord(e0));
				put_shares<<<(unsigned)blocks, 256>>>(p.h, p.heap, bw_max, size);
				drain<<<1, 1>>>(p.h, blocks);
				CUDA_CHECK(cudaEventRecord(e1));
				peer_join(&p, "put_shares");
				CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
				if (rep)
					ms.push_back(t);
			}
		}
		sync_peer(sock); /* every share's completion was read */
		if (rank == 1) {
			unsigned long long b = 0;
			bw_check<<<sms, 256>>>((const unsigned char *)p.heap + bw_max, size, bad);
			peer_join(&p, "bw_check");
			CUDA_CHECK(cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost));
			ok = b == 0;
			if (!ok)
				fprintf(stderr, "[%d] bandwidth %zu MiB: %llu wrong bytes\n", (int)getpid(),
					size >> 20, b);
		}
		ok = both_ok(sock, ok);
		failed |= !ok;
		if (rank == 0) {
			std::sort(ms.begin(), ms.end());
			double gbps = (double)size / (ms[ms.size() / 2] * 1e6);
			printf("RESULT put/%zuMiB %s %s - %.1f\n", size >> 20, p.prov, ok ? "ok" : "FAIL",
			       gbps * 1e3);
			printf("BW put/%zuMiB %s %s %.1f %llu\n", size >> 20, p.prov, p.mem, gbps,
			       (unsigned long long)blocks);
			fflush(stdout);
		}
		(void)cudaEventDestroy(e0);
		(void)cudaEventDestroy(e1);
		(void)cudaFree(bad);
	}
	(void)cudaFree(stamps);
	(void)cudaFreeHost(c);
	peer_teardown(&p);
	if (rank == 1)
		return failed;
	return join_child(child) || failed;
}
