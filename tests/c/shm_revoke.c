/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A put resolves its target and key once (the context's resolve table);
 * what the peer changes afterwards still counts. Rank 1 registers a buffer
 * and hands its key over; rank 0 writes with it twice (the second write
 * resolves from the table) and the bytes arrive. Rank 1 closes the
 * registration: rank 0's next write with that key is refused with an
 * FI_EACCES error completion. Rank 1 registers the same buffer again: the
 * old key is still refused the same way, the new one works (twice). Then
 * rank 1 exits: rank 0's writes with the new key, which the table holds,
 * fail with -FI_ECONNRESET once its control thread saw the hang-up.
 * Prints "shm_revoke: ok".
 */
#include "shm_common.h"

static struct world W;

struct grant {
	uint64_t base, key;
};

/* Rank 1's buffer and registration; what every rank received. */
static unsigned char *buf;
static struct fid_xpu_mr *mr;
static struct grant got[MAXP];

static void grant_again(void)
{
	struct grant mine = { 0, 0 };
	if (W.rank == 1) {
		REQUIRE(fi_xpu_mr_reg(W.dom, W.ctx, buf, 4096, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL),
			0);
		REQUIRE(fi_xpu_mr_key(mr, &mine.key), 0);
		mine.base = (uint64_t)(uintptr_t)buf;
	}
	allgather(&W, &mine, got, sizeof(mine));
}

/* Rank 0 writes `v` at `off` of rank 1's buffer with `key`; 0 when it
 * completed, the error of its error completion otherwise. */
static int put(uint64_t key, uint64_t off, uint64_t v)
{
	static uint64_t src;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ee;
	int64_t n;
	src = v;
	EXPECT(fi_xpu_write(&W.ep, &src, 8, NULL, 0, &W.raw[1], got[1].base + off, key, &src, 0,
			    FI_XPU_WORK_ITEM), 0);
	n = next(&W, &e, NULL);
	if (n == 1) {
		EXPECT(e.op_context == &src, 1);
		EXPECT(e.flags, FI_WRITE | FI_RMA);
		return 0;
	}
	EXPECT(n, -FI_EAVAIL);
	memset(&ee, 0, sizeof(ee));
	EXPECT(fi_xpu_cq_readerr(&W.cq, &ee, 0, FI_XPU_WORK_ITEM), 1);
	EXPECT(ee.op_context == &src, 1);
	return ee.err;
}

static uint64_t word(uint64_t off)
{
	uint64_t v;
	memcpy(&v, buf + off, 8);
	return v;
}

int main(void)
{
	uint64_t old_key;
	int i, rc;

	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	if (W.rank == 1) {
		int fd;
		uint64_t off;
		REQUIRE(fi_xpu_alloc(W.ctx, 4096, 0, FI_XPU_ALLOC_DMABUF | SHM_WORLD_ALLOC_FLAGS,
				     (void **)&buf, &fd, &off), 0);
		close(fd);
		memset(buf, 0, 4096);
	}
	grant_again();
	old_key = got[1].key;
	if (W.rank == 0) {
		EXPECT(put(old_key, 0, 0x1111), 0);
		EXPECT(put(old_key, 8, 0x2222), 0); /* from the resolve table */
	}
	barrier(&W);
	if (W.rank == 1) {
		EXPECT(word(0), 0x1111);
		EXPECT(word(8), 0x2222);
		EXPECT(fi_xpu_close(&mr->fid), 0);
	}
	barrier(&W);
	/* The registration is closed: the key the table holds is refused. */
	if (W.rank == 0)
		EXPECT(put(old_key, 0, 0x3333), FI_EACCES);
	barrier(&W);
	/* The same memory registered again: a new key, the old one still
	 * refused. */
	grant_again();
	EXPECT(got[1].key != old_key, 1);
	if (W.rank == 0) {
		EXPECT(put(old_key, 0, 0x4444), FI_EACCES);
		EXPECT(put(got[1].key, 16, 0x5555), 0);
		EXPECT(put(got[1].key, 24, 0x6666), 0);
	}
	barrier(&W);
	if (W.rank == 1) {
		EXPECT(word(0), 0x1111);
		EXPECT(word(16), 0x5555);
		EXPECT(word(24), 0x6666);
		EXPECT(fi_xpu_close(&mr->fid), 0);
		EXPECT(fi_xpu_free(W.ctx, buf), 0);
		fflush(stdout);
		_exit(failures ? 1 : 0);
	}
	/* Rank 1 is gone: once the control thread noticed, a write with the
	 * key the table holds fails at once. */
	{
		int st;
		EXPECT(wait(&st) > 0, 1);
		EXPECT(WIFEXITED(st) ? WEXITSTATUS(st) : 100, 0);
	}
	rc = 0;
	for (i = 0; i < 200; i++) {
		static uint64_t src = 7;
		struct fi_cq_tagged_entry e;
		rc = fi_xpu_write(&W.ep, &src, 8, NULL, 0, &W.raw[1], got[1].base, got[1].key, &src,
				  0, FI_XPU_WORK_ITEM);
		if (rc != 0)
			break;
		(void)fi_xpu_cq_read(&W.cq, &e, 1, FI_XPU_WORK_ITEM);
		usleep(10000);
	}
	EXPECT(rc, -FI_ECONNRESET);
	W.n = 1; /* no more barriers with the departed peer */
	close_world(&W);
	return finish(&W, "shm_revoke");
}
