/* Remote accesses the target must refuse, on the ofi provider, two
 * processes (fork + socketpair), the libfabric provider from
 * FI_XPU_OFI_PROVIDER, the per-operation limit FI_XPU_OFI_OP_TIMEOUT_MS
 * set by the harness:
 *
 *   1. a write with a wrong key and one past the end of the peer's
 *      registration, both with FI_DELIVERY_COMPLETE: each ends in an error
 *      completion, in bounded time, with its context and an error count;
 *   2. a valid write on the same endpoint afterwards: printed, the
 *      harness knows what each transport does with it;
 *   3. a valid write on a second endpoint: succeeds and lands;
 *   4. fi_xpu_flush of the first endpoint returns 0 in bounded time.
 *
 * Prints one line per operation ("bad_remote: <what>: <outcome>") for the
 * harness to compare with what fi_xpu_ofi(7) says of the transport. */
#include <sys/socket.h>
#include <sys/wait.h>

#include "ofi_common.h"

/* Generous: the operation limit plus scheduling on a loaded machine. */
#define BOUND_MS 8000

static unsigned char ctx_key, ctx_end, ctx_after, ctx_other;

static const char *name_of(void *c)
{
	return c == &ctx_key ? "wrong key" : c == &ctx_end ? "past the end" : "valid after";
}

/* Reads `n` completions of ep 0, printing each; returns the error count. */
static int outcomes(struct ofi_node *n, int want, uint64_t t0)
{
	int errors = 0;
	for (int got = 0; got < want;) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		int64_t r = fi_xpu_cq_read(&n->cq[0], &e, 1, FI_XPU_WORK_ITEM);
		if (r == -FI_EAGAIN) {
			if (ofi_now_ms() - t0 > BOUND_MS) {
				fprintf(stderr, "bad_remote: no completion after %d ms\n", BOUND_MS);
				exit(1);
			}
			usleep(1000);
			continue;
		}
		if (r == -FI_EAVAIL) {
			CHECK(fi_xpu_cq_readerr(&n->cq[0], &err, 0, FI_XPU_WORK_ITEM));
			EXPECT(err.err > 0);
			printf("bad_remote: %s: error %s\n", name_of(err.op_context),
			       fi_xpu_strerror(-err.err));
			errors++;
		} else {
			CHECK(r);
			printf("bad_remote: %s: success\n", name_of(e.op_context));
		}
		got++;
	}
	fflush(stdout);
	return errors;
}

static void initiator(struct ofi_node *n)
{
	uint64_t *v = (uint64_t *)n->local, t0, errs0, errors;
	struct fi_cq_tagged_entry e;
	int rc;
	v[0] = 0xbadbad;
	v[1] = 0x600d;
	v[2] = 0x07e2;
	errs0 = fi_xpu_cntr_readerr(&n->cntr, FI_XPU_WORK_ITEM);
	t0 = ofi_now_ms();
	CHECK(fi_xpu_write(&n->ep[0], &v[0], 8, NULL, 0, &n->raw[0], n->peer.base,
			   n->peer.key ^ 0x5a5a5a, &ctx_key, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	CHECK(fi_xpu_write(&n->ep[0], &v[0], 8, NULL, 0, &n->raw[0],
			   n->peer.base + n->heap_len - 4, n->peer.key, &ctx_end,
			   FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	errors = (uint64_t)outcomes(n, 2, t0);
	EXPECT_EQ(errors, 2);
	printf("bad_remote: both failed within %" PRIu64 " ms\n", ofi_now_ms() - t0);
	EXPECT_EQ(fi_xpu_cntr_readerr(&n->cntr, FI_XPU_WORK_ITEM), errs0 + 2);

	/* A valid write on the same endpoint. */
	t0 = ofi_now_ms();
	CHECK(fi_xpu_write(&n->ep[0], &v[1], 8, NULL, 0, &n->raw[0], n->peer.base + 8,
			   n->peer.key, &ctx_after, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	(void)outcomes(n, 1, t0);

	/* A valid write on another endpoint. */
	t0 = ofi_now_ms();
	CHECK(fi_xpu_write(&n->ep[1], &v[2], 8, NULL, 0, &n->raw[1], n->peer.base + 16,
			   n->peer.key, &ctx_other, FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM));
	EXPECT_EQ(fi_xpu_cq_sread(&n->cq[1], &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == &ctx_other);
	printf("bad_remote: other endpoint: success in %" PRIu64 " ms\n", ofi_now_ms() - t0);

	t0 = ofi_now_ms();
	rc = fi_xpu_flush(&n->ep[0], 0, FI_XPU_WORK_ITEM);
	EXPECT_EQ(rc, 0);
	EXPECT(ofi_now_ms() - t0 < BOUND_MS);
	printf("bad_remote: flush: done\n");
	fflush(stdout);
}

static int run(int sock, int rank)
{
	struct ofi_node n;
	struct ofi_opts o = { .nep = 2, .heap = 4096, .cq_timeout_ms = BOUND_MS };
	ofi_setup(&n, sock, rank, &o);
	ofi_barrier(&n);
	if (rank == 0)
		initiator(&n);
	ofi_barrier(&n);
	if (rank == 1) {
		uint64_t v;
		memcpy(&v, n.heap, 8);
		EXPECT_EQ(v, 0); /* nothing landed where the wrong key pointed */
		memcpy(&v, n.heap + 16, 8);
		EXPECT_EQ(v, 0x07e2);
		memcpy(&v, n.heap + 8, 8);
		printf("bad_remote: target: valid write after %s\n", v == 0x600d ? "landed" : "lost");
		fflush(stdout);
	}
	ofi_barrier(&n);
	ofi_teardown(&n);
	return 0;
}

int main(void)
{
	return ofi_pair_main("bad_remote", NULL, run);
}
