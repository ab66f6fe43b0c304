/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu_fence on the ofi provider orders operations per peer (two
 * processes, fork + socketpair; rank 1's two endpoints are rank 0's two
 * peers). Run under the testing-only FI_XPU_OFI_TEST_DELAY_MS, which hands
 * RMA write data to libfabric that many milliseconds late. Rank 0 posts:
 *
 *   1  a write of A to peer 0          (late by the delay)
 *      fi_xpu_fence
 *   2  an atomic setting flag 2, to peer 1
 *   3  an atomic setting flag 1, to peer 0
 *
 * Operation 2's peer had nothing in flight before the fence: it is not
 * held back, so rank 1 sees flag 2 while A is not yet there, and rank 0
 * reads operation 2's completion first. Operation 3 is held back until A
 * completed: rank 1 sees A whenever it sees flag 1. A fence that holds
 * back the whole endpoint fails the first two checks; one that holds back
 * nothing fails the last.
 *
 * Prints "ofi_fence: ok".
 */
#include "ofi_common.h"

#include <sys/socket.h>
#include <sys/wait.h>

#define LEN 256
#define A_AT 0
#define FLAG1 (A_AT + LEN)
#define FLAG2 (FLAG1 + 8)
#define HEAP 4096
#define SRC 0
#define ONE (SRC + LEN)
#define WAIT_MS 30000

static unsigned char pat(size_t k)
{
	return (unsigned char)(0x80 | ((k * 7) & 0x7f)); /* never 0 */
}

static uint64_t load(const unsigned char *p)
{
	return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_ACQUIRE);
}

static void wait_word(const unsigned char *p, const char *what)
{
	uint64_t start = ofi_now_ms();
	while (load(p) == 0) {
		if (ofi_now_ms() - start > WAIT_MS) {
			fprintf(stderr, "[1] %s never arrived\n", what);
			exit(1);
		}
		usleep(100);
	}
}

/* How many bytes of A have arrived. */
static size_t arrived(const unsigned char *heap)
{
	size_t k, n = 0;
	for (k = 0; k < LEN; k++)
		n += __atomic_load_n(&heap[A_AT + k], __ATOMIC_ACQUIRE) == pat(k);
	return n;
}

static void initiator(struct ofi_node *n)
{
	uint64_t base = n->peer.base, key = n->peer.key;
	struct fi_cq_tagged_entry e;
	uintptr_t order[3];
	size_t k;

	for (k = 0; k < LEN; k++)
		n->local[SRC + k] = pat(k);
	*(uint64_t *)(void *)(n->local + ONE) = 1;
	CHECK(fi_xpu_write(&n->ep[0], n->local + SRC, LEN, NULL, 0, &n->raw[0], base + A_AT, key,
			   (void *)1, 0, FI_XPU_WORK_ITEM));
	CHECK(fi_xpu_fence(&n->ep[0], 0, FI_XPU_WORK_ITEM));
	CHECK(fi_xpu_atomic(&n->ep[0], n->local + ONE, 1, NULL, &n->raw[1], base + FLAG2, key,
			    FI_UINT64, FI_ATOMIC_WRITE, (void *)2, 0, FI_XPU_WORK_ITEM));
	CHECK(fi_xpu_atomic(&n->ep[0], n->local + ONE, 1, NULL, &n->raw[0], base + FLAG1, key,
			    FI_UINT64, FI_ATOMIC_WRITE, (void *)3, 0, FI_XPU_WORK_ITEM));
	for (k = 0; k < 3; k++) {
		EXPECT_EQ(fi_xpu_cq_sread(&n->cq[0], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
		order[k] = (uintptr_t)e.op_context;
	}
	printf("ofi_fence: completions in the order %u %u %u\n", (unsigned)order[0],
	       (unsigned)order[1], (unsigned)order[2]);
	/* The atomic to the other peer was not held back behind the fence. */
	EXPECT_EQ(order[0], 2);
	/* The one to the fenced peer waited for the write before the fence. */
	EXPECT_EQ(order[1], 1);
	EXPECT_EQ(order[2], 3);
}

static void target(struct ofi_node *n)
{
	size_t got;

	wait_word(n->heap + FLAG2, "flag 2 (the other peer's atomic)");
	got = arrived(n->heap);
	printf("ofi_fence: flag 2 seen with %zu of %d bytes of A placed, flag 1 %" PRIu64 "\n",
	       got, LEN, load(n->heap + FLAG1));
	/* Not held back behind the late write to the first peer. */
	EXPECT_EQ(got, 0);
	EXPECT_EQ(load(n->heap + FLAG1), 0);
	wait_word(n->heap + FLAG1, "flag 1 (the fenced peer's atomic)");
	/* Ordered behind the write before the fence, to the same peer. */
	EXPECT_EQ(arrived(n->heap), LEN);
}

static int run(int sock, int rank)
{
	struct ofi_opts o = { .nep = 2, .ring = 64, .cq_size = 64, .cq_timeout_ms = WAIT_MS,
			      .heap = HEAP };
	struct ofi_node n;

	ofi_setup(&n, sock, rank, &o);
	ofi_roles(&n, initiator, target);
	ofi_teardown(&n);
	return 0;
}

int main(void)
{
	alarm(120);
	return ofi_pair_main("ofi_fence", NULL, run);
}
