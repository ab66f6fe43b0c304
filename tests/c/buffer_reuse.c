/* The source-buffer contract, held against every provider: a source may be
 * changed once its operation's local completion is seen, or as soon as the
 * post returns when it was posted with FI_INJECT (up to the inject size).
 * Two processes (fork + socketpair); the provider is OFI_COMMON_PROV (the
 * ofi provider by default, over FI_XPU_OFI_PROVIDER).
 *
 *   completion  writes from a few slots, many in flight; a slot is
 *               scribbled over the moment its completion is read, then
 *               refilled for the next write. Every block arrives with the
 *               bytes the slot held when it was posted.
 *   inject      writes and tagged sends of up to 64 bytes from one stack
 *               buffer, overwritten as soon as each post returns, posted
 *               back to back; then a source one byte over the inject size
 *               is refused with -FI_EMSGSIZE (ofi: 64, shm sends: 3968).
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include "ofi_common.h"

#define BLOCK 1024
#define NBLOCK 256
#define SLOTS 8
#define INJ 64
#define NINJ 256
/* Messages per round: no more receives are posted at once (shm takes 64). */
#define ROUND 32
#define HEAP (NBLOCK * BLOCK + NINJ * INJ)

static unsigned char pat(uint64_t op, size_t i)
{
	return (unsigned char)(op * 131 + i * 7 + (i >> 8) + 1);
}

static void fill(unsigned char *p, size_t len, uint64_t op)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pat(op, i);
}

static int same(const unsigned char *p, size_t len, uint64_t op)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pat(op, i))
			return 0;
	return 1;
}

/* One completion, any error fails the run; returns its context. */
static void *reap(struct fid_xpu_cq *cq)
{
	struct fi_cq_tagged_entry e;
	ofi_no_error_entry(cq, fi_xpu_cq_sread(cq, &e, 1, 1, FI_XPU_WORK_ITEM));
	return e.op_context;
}

/* Posts one operation, reaping completions while the ring is full. */
#define POST(n, call, inflight)                                                         \
	do {                                                                            \
		int post_rc;                                                                \
		while ((post_rc = (call)) == -FI_EAGAIN) {                                  \
			(void)reap(&(n)->cq[0]);                                        \
			(inflight)--;                                                   \
		}                                                                       \
		CHECK(post_rc);                                                             \
		(inflight)++;                                                           \
	} while (0)

static void completion_sender(struct ofi_node *n)
{
	unsigned char *slot[SLOTS];
	uint64_t next = 0, done = 0;
	for (int s = 0; s < SLOTS; s++)
		slot[s] = n->local + (size_t)s * BLOCK;
	/* Every slot busy, then one new write per completion. */
	for (int s = 0; s < SLOTS; s++, next++) {
		fill(slot[s], BLOCK, next);
		CHECK(fi_xpu_write(&n->ep[0], slot[s], BLOCK, NULL, 0, &n->raw[0],
				   n->peer.base + next * BLOCK, n->peer.key, slot[s], 0,
				   FI_XPU_WORK_ITEM));
	}
	while (done < NBLOCK) {
		unsigned char *s = reap(&n->cq[0]);
		done++;
		/* Reusable now: scribble over it at once. */
		memset(s, 0xee, BLOCK);
		if (next < NBLOCK) {
			fill(s, BLOCK, next);
			CHECK(fi_xpu_write(&n->ep[0], s, BLOCK, NULL, 0, &n->raw[0],
					   n->peer.base + next * BLOCK, n->peer.key, s, 0,
					   FI_XPU_WORK_ITEM));
			next++;
		}
	}
	CHECK(fi_xpu_flush(&n->ep[0], 0, FI_XPU_WORK_ITEM));
	printf("completion: %d writes of %d bytes from %d reused slots\n", NBLOCK, BLOCK, SLOTS);
}

static void inject_sender(struct ofi_node *n, const char *prov)
{
	unsigned char src[4096];
	int inflight = 0;
	for (uint64_t i = 0; i < NINJ; i++) {
		size_t len = 1 + i % INJ;
		if (i % ROUND == 0)
			ofi_barrier(n); /* the round's receives are posted */
		fill(src, len, 1000 + i);
		POST(n,
		     fi_xpu_write(&n->ep[0], src, len, NULL, 0, &n->raw[0],
				  n->peer.base + NBLOCK * BLOCK + i * INJ, n->peer.key, NULL,
				  FI_INJECT, FI_XPU_WORK_ITEM),
		     inflight);
		memset(src, 0xee, len);
		fill(src, INJ, 5000 + i);
		POST(n,
		     fi_xpu_tsend(&n->ep[0], src, INJ, NULL, 0, &n->raw[0], 0x100 + i, NULL,
				  FI_INJECT, FI_XPU_WORK_ITEM),
		     inflight);
		memset(src, 0xee, INJ);
	}
	while (inflight > 0) {
		(void)reap(&n->cq[0]);
		inflight--;
	}
	/* One byte over the inject size. */
	if (!strcmp(prov, "ofi")) {
		EXPECT_EQ(fi_xpu_write(&n->ep[0], src, INJ + 1, NULL, 0, &n->raw[0], n->peer.base,
				       n->peer.key, NULL, FI_INJECT, FI_XPU_WORK_ITEM),
			  -FI_EMSGSIZE);
		EXPECT_EQ(fi_xpu_tsend(&n->ep[0], src, INJ + 1, NULL, 0, &n->raw[0], 1, NULL,
				       FI_INJECT, FI_XPU_WORK_ITEM),
			  -FI_EMSGSIZE);
	} else {
		EXPECT_EQ(fi_xpu_tsend(&n->ep[0], src, 4096 - 128 + 1, NULL, 0, &n->raw[0], 1,
				       NULL, FI_INJECT, FI_XPU_WORK_ITEM),
			  -FI_EMSGSIZE);
	}
	CHECK(fi_xpu_flush(&n->ep[0], 0, FI_XPU_WORK_ITEM));
	printf("inject: %d writes and %d sends from a buffer overwritten at once\n", NINJ, NINJ);
}

/* Waits (bounded) until the heap holds what every write carried: without
 * FI_DELIVERY_COMPLETE, the sender's completion says nothing of arrival. */
static void check_target(struct ofi_node *n, int inject)
{
	uint64_t t0 = ofi_now_ms();
	for (uint64_t i = 0; i < (inject ? NINJ : NBLOCK); i++) {
		const unsigned char *p = inject ? n->heap + NBLOCK * BLOCK + i * INJ
						: n->heap + i * BLOCK;
		size_t len = inject ? 1 + i % INJ : BLOCK;
		uint64_t op = inject ? 1000 + i : i;
		while (!same(p, len, op)) {
			if (ofi_now_ms() - t0 > 10000) {
				fprintf(stderr, "%s: block %" PRIu64 " holds %02x %02x %02x..., "
					"expected %02x %02x %02x...\n",
					inject ? "inject" : "completion", i, p[0], p[1], p[2],
					pat(op, 0), pat(op, 1), pat(op, 2));
				exit(1);
			}
			usleep(100);
		}
	}
}

static void inject_receiver(struct ofi_node *n)
{
	/* The receive buffers: in local memory the context allocated. */
	unsigned char *box = n->local;
	for (uint64_t r = 0; r < NINJ; r += ROUND) {
		for (uint64_t i = r; i < r + ROUND; i++)
			CHECK(fi_xpu_trecv(&n->ep[0], box + i * INJ, INJ, NULL, NULL, 0x100 + i, 0,
					   box + i * INJ, 0, FI_XPU_WORK_ITEM));
		ofi_barrier(n);
		for (uint64_t i = r; i < r + ROUND; i++)
			(void)reap(&n->cq[0]);
	}
	for (uint64_t i = 0; i < NINJ; i++)
		if (!same(box + i * INJ, INJ, 5000 + i)) {
			fprintf(stderr, "inject: message %" PRIu64 " holds %02x..., expected %02x...\n",
				i, box[i * INJ], pat(5000 + i, 0));
			exit(1);
		}
}

/* The mode the program was started with. */
static const char *mode;

static int run(int sock, int rank)
{
	struct ofi_node n;
	struct ofi_opts o = { .nep = 1, .heap = HEAP, .ring = 64, .cq_size = 1024 };
	const char *prov = getenv("OFI_COMMON_PROV") ? getenv("OFI_COMMON_PROV") : "ofi";
	int inject = !strcmp(mode, "inject");
	if (!inject && strcmp(mode, "completion") != 0)
		return 2;
	ofi_setup(&n, sock, rank, &o);
	ofi_barrier(&n);
	if (rank == 0) {
		if (inject) {
			inject_sender(&n, prov);
		} else {
			completion_sender(&n);
		}
	} else if (inject) {
		inject_receiver(&n);
	}
	ofi_barrier(&n);
	if (rank == 1)
		check_target(&n, inject);
	ofi_barrier(&n);
	ofi_teardown(&n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	mode = argv[1];
	return ofi_pair_main("buffer_reuse", mode, run);
}
