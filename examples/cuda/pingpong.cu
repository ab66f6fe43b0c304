/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * pingpong on a GPU: two processes on one node (the parent forks its peer),
 * an FI_HMEM_SYSTEM context each (pinned memory through cuda_mem.h). For each size,
 * one CUDA kernel per side runs the whole loop: rank 0 writes `size` bytes
 * into rank 1's heap with remote CQ data (the iteration number), rank 1
 * answers with a write of the same size when that data arrives, and so on.
 * Afterwards both sides compare the received bytes with the peer's pattern.
 * Rank 0 prints one line per size:
 *   RESULT write/<size>B <provider> ok|FAIL <usec per one-way write> <MB/s>
 *
 *   ./pingpong_cuda [-n iterations] [-S max_size]
 */
#include "peer.h"

#include <inttypes.h>

struct counts {
	uint64_t remote; /* writes that arrived (remote CQ data) */
	uint64_t local;  /* own writes completed */
	uint64_t bad;    /* arrivals whose data was not the expected iteration */
};

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
			 int iters, int rank, struct counts *out)
{
	struct counts c = { 0, 0, 0 };
	int i;
	for (i = 0; i < iters; i++) {
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
	while (c.local < (uint64_t)iters)
		DCHECK(h, dev_poll(h, &c));
	*out = c;
}

static unsigned char pattern(size_t size, int rank, size_t i)
{
	return (unsigned char)(size * 7 + (size_t)rank * 101 + i * 13);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 8, 4096, 65536, 1 << 20 };
	size_t max = 1 << 20, k, j;
	int iters = 1000, opt, sock, rank, failed = 0, peer_ok;
	struct counts *c;
	struct peer p;
	pid_t child;

	while ((opt = getopt(argc, argv, "n:S:")) != -1) {
		if (opt == 'n')
			iters = atoi(optarg);
		else if (opt == 'S')
			max = (size_t)strtoull(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: %s [-n iterations] [-S max_size]\n", argv[0]);
			return 2;
		}
	}
	if (iters < 1 || max < 8)
		return 2;
	rank = fork_pair(&sock, &child);
	/* Heap: [0, max) what this side sends, [max, 2 max) what the peer writes. */
	peer_setup(&p, sock, 2 * max);
	CUDA_CHECK(cudaHostAlloc((void **)&c, sizeof(*c), cudaHostAllocMapped));
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && sizes[k] <= max; k++) {
		size_t size = sizes[k];
		int n = size >= 65536 ? (iters / 10 > 0 ? iters / 10 : 1) : iters, ok = 1;
		double us;
		for (j = 0; j < size; j++)
			p.heap[j] = (char)pattern(size, rank, j);
		memset(p.heap + max, 0, size);
		memset(c, 0, sizeof(*c));
		sync_peer(sock);
		us = now_us();
		pingpong<<<1, 1>>>(p.h, p.heap, max, size, n, rank, c);
		peer_join(&p, "pingpong");
		us = now_us() - us;
		sync_peer(sock); /* both loops ended: every write has landed */
		for (j = 0; j < size && ok; j++)
			ok = (unsigned char)p.heap[max + j] == pattern(size, !rank, j);
		if (c->bad || c->remote != (uint64_t)n)
			ok = 0;
		if (!ok)
			fprintf(stderr, "[%d] pingpong %zu bytes: wrong bytes or order\n",
				(int)getpid(), size);
		/* Rank 0 reports both sides' verdicts. */
		xfer(sock, &ok, &peer_ok, sizeof(ok));
		ok = ok && peer_ok;
		failed |= !ok;
		if (rank == 0) {
			printf("RESULT write/%zuB %s %s %.2f %.1f\n", size, p.prov, ok ? "ok" : "FAIL",
			       us / n / 2, 2.0 * (double)n * (double)size / us);
			fflush(stdout);
		}
	}
	(void)cudaFreeHost(c);
	peer_teardown(&p);
	if (rank == 1)
		return failed;
	return join_child(child) || failed;
}
