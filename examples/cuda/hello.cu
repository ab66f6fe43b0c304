/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * hello on a GPU: examples/hello.c with the device code in CUDA kernels.
 * Two processes on one node (the parent forks its peer), each with a heap
 * of device memory (peer.h; pinned host memory where the provider does not
 * serve device memory).
 * Rank 0's kernel writes a string into rank 1's heap with remote CQ data,
 * adds 1 to a counter word there atomically, then sends a message that
 * rank 1's kernel receives. Both sides check the bytes; the last line is
 *   RESULT hello <provider> ok <microseconds> -
 * or the process exits non-zero.
 *
 *   nvcc -std=c++17 -I . -I include examples/cuda/hello.cu \
 *        -L target/release -lfi_xpu -o hello_cuda && FI_XPU_PROVIDER=shm ./hello_cuda
 */
#include "peer.h"

#include <inttypes.h>

#define MSG_OFF 512   /* outgoing bytes (the source must be device- and host-readable) */
#define BOX_OFF 1024  /* receive buffer */
#define CNT_OFF 256   /* the atomic counter word */
#define TEXT "hello from a CUDA kernel"
#define SENT "a message from a CUDA kernel"

__device__ static void dev_copy(char *dst, const char *src)
{
	while ((*dst++ = *src++) != 0)
		;
}

/* Rank 0, first phase: RMA write with CQ data, then an atomic add. */
__global__ void write_and_add(struct dev_handles *h, char *heap)
{
	struct fi_cq_data_entry e;
	uint64_t *one = (uint64_t *)(heap + MSG_OFF + 128);
	dev_copy(heap + MSG_OFF, TEXT);
	*one = 1;
	DCHECK(h, fi_xpu_write(&h->ep, heap + MSG_OFF, sizeof(TEXT), NULL, 0x2a, &h->raw,
			       h->peer_base, h->peer_key, NULL, FI_REMOTE_CQ_DATA,
			       FI_XPU_WORK_ITEM));
	DCHECK(h, dev_wait_one(h, &e));
	DCHECK(h, fi_xpu_atomic(&h->ep, one, 1, NULL, &h->raw, h->peer_base + CNT_OFF,
				h->peer_key, FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM));
	DCHECK(h, dev_wait_one(h, &e));
}

/* Rank 0, second phase: a message to the peer's posted receive. */
__global__ void send_one(struct dev_handles *h, char *heap)
{
	struct fi_cq_data_entry e;
	dev_copy(heap + MSG_OFF, SENT);
	DCHECK(h, fi_xpu_send(&h->ep, heap + MSG_OFF, sizeof(SENT), NULL, 0, &h->raw, NULL, 0,
			      FI_XPU_WORK_ITEM));
	DCHECK(h, dev_wait_one(h, &e));
}

/* Rank 1, first phase: post the receive, wait for the write's CQ data. */
__global__ void recv_and_wait_write(struct dev_handles *h, char *heap, uint64_t *data)
{
	struct fi_cq_data_entry e;
	DCHECK(h, fi_xpu_recv(&h->ep, heap + BOX_OFF, 64, NULL, NULL, heap + BOX_OFF, 0,
			      FI_XPU_WORK_ITEM));
	DCHECK(h, dev_wait_one(h, &e));
	*data = e.data;
}

/* Rank 1, second phase: the message. */
__global__ void wait_message(struct dev_handles *h, uint64_t *len)
{
	struct fi_cq_data_entry e;
	DCHECK(h, dev_wait_one(h, &e));
	*len = e.len;
}

static int expect(int ok, const char *what)
{
	if (!ok)
		fprintf(stderr, "[%d] hello: %s: wrong bytes\n", (int)getpid(), what);
	return ok;
}

int main(void)
{
	struct peer p;
	pid_t child;
	int sock, rank = fork_pair(&sock, &child), ok = 1;
	uint64_t *out, cnt;
	char heap[4096];
	double t0;

	/* CUDA is first touched after fork: a context does not survive it. */
	peer_setup(&p, sock, 4096);
	CUDA_CHECK(cudaHostAlloc((void **)&out, 2 * sizeof(uint64_t), cudaHostAllocMapped));
	out[0] = out[1] = 0;
	t0 = now_us();
	if (rank == 0) {
		write_and_add<<<1, 1>>>(p.h, p.heap);
		peer_join(&p, "write_and_add");
		sync_peer(sock); /* rank 1 saw the write and posted its receive */
		send_one<<<1, 1>>>(p.h, p.heap);
		peer_join(&p, "send_one");
		sync_peer(sock);
	} else {
		recv_and_wait_write<<<1, 1>>>(p.h, p.heap, &out[0]);
		peer_join(&p, "recv_and_wait_write");
		peer_get(&p, 0, heap, sizeof(heap));
		heap[sizeof(heap) - 1] = 0;
		ok &= expect(out[0] == 0x2a, "remote CQ data");
		ok &= expect(strcmp(heap, TEXT) == 0, "RMA write");
		printf("[%d] remote write arrived (cq data 0x%" PRIx64 "): \"%s\"\n", (int)getpid(),
		       out[0], heap);
		sync_peer(sock);
		wait_message<<<1, 1>>>(p.h, &out[1]);
		peer_join(&p, "wait_message");
		/* The atomic completed at rank 0 before its send was posted. */
		peer_get(&p, 0, heap, sizeof(heap));
		heap[sizeof(heap) - 1] = 0;
		memcpy(&cnt, heap + CNT_OFF, sizeof(cnt));
		ok &= expect(cnt == 1, "atomic add");
		ok &= expect(out[1] == sizeof(SENT) && strcmp(heap + BOX_OFF, SENT) == 0,
			     "message");
		printf("[%d] atomic counter: %" PRIu64 ", received (%" PRIu64 " bytes): \"%s\" (%s memory)\n",
		       (int)getpid(), cnt, out[1], heap + BOX_OFF, p.mem);
		sync_peer(sock);
	}
	t0 = now_us() - t0;
	(void)cudaFreeHost(out);
	peer_teardown(&p);
	if (rank == 1)
		return ok ? 0 : 1;
	if (join_child(child) != 0) {
		fprintf(stderr, "hello: peer failed\n");
		return 1;
	}
	printf("RESULT hello %s ok %.1f -\n", p.prov, t0);
	return 0;
}
