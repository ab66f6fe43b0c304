/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Messages of the shm provider beyond the basics, between N processes:
 * 1 MiB and 5 MiB sends from plain malloc'd (unregistered) buffers, tagged
 * and untagged, streamed through the sender's staging lanes (-FI_EAGAIN
 * when every lane is busy, FI_ETRUNC into a short buffer); directed
 * receives (src_addr) that skip earlier messages of other sources; and a
 * receive CQ overrun by remote completions, reported as an FI_EOVERRUN
 * error entry. Usage: shm_msg NPROCS. Prints "shm_msg n=N: ok".
 */
#include "shm_common.h"

_Static_assert(sizeof(struct fi_xpu_shm_posted) == 144, "posted receive");
_Static_assert(sizeof(struct fi_xpu_shm_rdv) == 136, "outstanding send");

static struct world W;
static char marks[64];
#define CTX(i) ((void *)&marks[i])
#define MiB (1024 * 1024)

static unsigned char pat(size_t i, int who, int salt)
{
	return (unsigned char)((i * 131) ^ (i >> 9) ^ ((size_t)who * 29) ^ ((size_t)salt * 71));
}

static void fill(unsigned char *b, size_t len, int who, int salt)
{
	size_t i;
	for (i = 0; i < len; i++)
		b[i] = pat(i, who, salt);
}

static void check(const unsigned char *b, size_t len, int who, int salt, int line)
{
	size_t i;
	for (i = 0; i < len; i++)
		if (b[i] != pat(i, who, salt)) {
			fprintf(stderr, "[rank %d] line %d: byte %zu of %zu is %u, expected %u\n",
				my_rank, line, i, len, b[i], pat(i, who, salt));
			failures++;
			return;
		}
}

/* Reads completions until every context in want[0..n) was seen once, in
 * any order; error entries are recorded in errs[] (positive err) and
 * olens[]. Source addresses go to srcs[]. */
static void collect(struct fid_xpu_cq *cq, void **want, int n, int *errs, size_t *olens,
		    fi_addr_t *srcs, size_t *lens)
{
	int seen = 0, i, idle = 0;
	while (seen < n) {
		struct fi_cq_tagged_entry e;
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		void *ctx;
		int err = 0;
		size_t olen = 0, len;
		int64_t rc;
		memset(&e, 0, sizeof(e));
		rc = fi_xpu_cq_readfrom(cq, &e, 1, &src, FI_XPU_WORK_ITEM);
		if (rc == -FI_EAGAIN) {
			if (++idle > 20000000) {
				fprintf(stderr, "[rank %d] %d of %d completions seen\n", my_rank, seen, n);
				failures++;
				return;
			}
			continue;
		}
		if (rc == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;
			memset(&ee, 0, sizeof(ee));
			REQUIRE(fi_xpu_cq_readerr(cq, &ee, 0, FI_XPU_WORK_ITEM), 1);
			ctx = ee.op_context;
			err = ee.err;
			olen = ee.olen;
			len = ee.len;
		} else {
			REQUIRE(rc, 1);
			ctx = e.op_context;
			len = e.len;
		}
		for (i = 0; i < n; i++)
			if (want[i] == ctx)
				break;
		if (i == n) {
			fprintf(stderr, "[rank %d] unexpected completion %p (err %d)\n", my_rank, ctx,
				err);
			failures++;
			continue;
		}
		want[i] = NULL;
		if (errs)
			errs[i] = err;
		if (olens)
			olens[i] = olen;
		if (srcs)
			srcs[i] = src;
		if (lens)
			lens[i] = len;
		seen++;
	}
}

static void test_large(void)
{
	int me = W.rank, to = (me + 1) % W.n, from = (me + W.n - 1) % W.n, i;
	size_t sizes[4] = { 1 * MiB, 5 * MiB, 1 * MiB, 5 * MiB };
	int tagged[4] = { 0, 1, 1, 0 };
	uint64_t tags[4] = { 0, 0xabc, 0x1, 0 };
	unsigned char *src[4], *dst[4], *extra = malloc(4 * MiB);
	void *want[8];
	int errs[8];
	size_t olens[8], lens[8];
	fi_addr_t srcs[8];

	for (i = 0; i < 4; i++) {
		src[i] = malloc(sizes[i]);
		dst[i] = malloc(sizes[i]);
		REQUIRE(src[i] != NULL && dst[i] != NULL, 1);
		fill(src[i], sizes[i], me, i);
		memset(dst[i], 0, sizes[i]);
	}
	REQUIRE(extra != NULL, 1);
	/* Sends first: each takes a staging lane and stays unfinished until
	 * the receiver drains it, so a fifth finds no lane. */
	for (i = 0; i < 4; i++) {
		if (tagged[i])
			EXPECT(fi_xpu_tsend(&W.ep, src[i], sizes[i], NULL, 0, &W.raw[to], tags[i],
					    CTX(i), 0, FI_XPU_WORK_ITEM), 0);
		else
			EXPECT(fi_xpu_send(&W.ep, src[i], sizes[i], NULL, 0, &W.raw[to], CTX(i), 0,
					   FI_XPU_WORK_ITEM), 0);
	}
	EXPECT(fi_xpu_send(&W.ep, extra, 4 * MiB, NULL, 0, &W.raw[to], CTX(9), 0, FI_XPU_WORK_ITEM),
	       -FI_EAGAIN);
	barrier(&W);
	/* Untagged receives take the untagged messages in order (1 MiB, then
	 * 5 MiB); tagged ones go by tag, posted in the other order. */
	EXPECT(fi_xpu_recv(&W.ep, dst[0], sizes[0], NULL, NULL, CTX(4), 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_trecv(&W.ep, dst[2], sizes[2], NULL, NULL, 0x1, 0, CTX(6), 0,
			    FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_trecv(&W.ep, dst[1], sizes[1], NULL, NULL, 0xabc, 0, CTX(5), 0,
			    FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_recv(&W.ep, dst[3], sizes[3], NULL, NULL, CTX(7), 0, FI_XPU_WORK_ITEM), 0);
	for (i = 0; i < 8; i++)
		want[i] = CTX(i);
	collect(&W.cq, want, 8, errs, olens, srcs, lens);
	for (i = 0; i < 8; i++) {
		EXPECT(errs[i], 0);
		if (W.format >= FI_CQ_FORMAT_MSG)
			EXPECT(lens[i], sizes[i % 4]);
	}
	for (i = 0; i < 4; i++) {
		check(dst[i], sizes[i], from, i, __LINE__);
		EXPECT(srcs[4 + i], W.fa[from]);
	}
	barrier(&W);

	/* A streamed message into a shorter buffer: the receiver takes and
	 * drops the rest, the sender finishes, the receive is truncated. */
	fill(extra, 3 * MiB, me, 9);
	memset(dst[0], 0, MiB);
	EXPECT(fi_xpu_send(&W.ep, extra, 3 * MiB, NULL, 0, &W.raw[to], CTX(10), 0,
			   FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_recv(&W.ep, dst[0], MiB, NULL, NULL, CTX(11), 0, FI_XPU_WORK_ITEM), 0);
	want[0] = CTX(10);
	want[1] = CTX(11);
	collect(&W.cq, want, 2, errs, olens, NULL, NULL);
	EXPECT(errs[0], 0);
	EXPECT(errs[1], FI_ETRUNC);
	EXPECT(olens[1], 2 * MiB);
	check(dst[0], MiB, from, 9, __LINE__);
	barrier(&W);
	for (i = 0; i < 4; i++) {
		free(src[i]);
		free(dst[i]);
	}
	free(extra);
}

/* Directed receives: a message from ourselves arrives first, yet a
 * receive directed at our neighbour skips it; one directed at ourselves
 * stays posted while a neighbour's message passes it by. */
static void test_directed(void)
{
	int me = W.rank, to = (me + 1) % W.n, from = (me + W.n - 1) % W.n;
	unsigned char self_msg[256], peer_msg[256], a[256], b[256], c[256];
	void *want[3];
	fi_addr_t srcs[3];
	int errs[3];

	fill(self_msg, sizeof(self_msg), me, 20);
	fill(peer_msg, sizeof(peer_msg), me, 21);
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	memset(c, 0, sizeof(c));
	/* Posted before anything arrives, directed at ourselves. */
	EXPECT(fi_xpu_trecv(&W.ep, c, sizeof(c), NULL, &W.raw[me], 7, 0, CTX(22), 0,
			    FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_tsend(&W.ep, peer_msg, sizeof(peer_msg), NULL, 0, &W.raw[to], 7, CTX(20), 0,
			    FI_XPU_WORK_ITEM), 0);
	want[0] = CTX(20);
	collect(&W.cq, want, 1, errs, NULL, NULL, NULL);
	EXPECT(errs[0], 0);
	barrier(&W);
	/* The neighbour's tag-7 message is here; the directed receive did
	 * not take it. An undirected one does. */
	EXPECT(fi_xpu_trecv(&W.ep, b, sizeof(b), NULL, NULL, 7, 0, CTX(23), 0, FI_XPU_WORK_ITEM),
	       0);
	want[0] = CTX(23);
	collect(&W.cq, want, 1, errs, NULL, srcs, NULL);
	EXPECT(errs[0], 0);
	EXPECT(srcs[0], W.fa[from]);
	check(b, sizeof(b), from, 21, __LINE__);
	barrier(&W);
	/* Now ours, then the neighbour's, both untagged; a receive directed
	 * at the neighbour takes the second. */
	EXPECT(fi_xpu_send(&W.ep, self_msg, sizeof(self_msg), NULL, 0, &W.raw[me], CTX(24), 0,
			   FI_XPU_WORK_ITEM), 0);
	barrier(&W);
	EXPECT(fi_xpu_send(&W.ep, peer_msg, sizeof(peer_msg), NULL, 0, &W.raw[to], CTX(25), 0,
			   FI_XPU_WORK_ITEM), 0);
	barrier(&W);
	EXPECT(fi_xpu_recv(&W.ep, a, sizeof(a), NULL, &W.raw[from], CTX(26), 0, FI_XPU_WORK_ITEM),
	       0);
	want[0] = CTX(24);
	want[1] = CTX(25);
	want[2] = CTX(26);
	collect(&W.cq, want, 3, errs, NULL, srcs, NULL);
	EXPECT(errs[2], 0);
	EXPECT(srcs[2], W.fa[from]);
	check(a, sizeof(a), from, 21, __LINE__);
	/* The tag-7 message to ourselves meets the receive directed at us. */
	EXPECT(fi_xpu_tsend(&W.ep, self_msg, sizeof(self_msg), NULL, 0, &W.raw[me], 7, CTX(27), 0,
			    FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_recv(&W.ep, b, sizeof(b), NULL, &W.raw[me], CTX(28), 0, FI_XPU_WORK_ITEM), 0);
	want[0] = CTX(27);
	want[1] = CTX(22);
	want[2] = CTX(28);
	collect(&W.cq, want, 3, errs, NULL, srcs, NULL);
	EXPECT(errs[1], 0);
	EXPECT(errs[2], 0);
	EXPECT(srcs[1], W.fa[me]);
	check(c, sizeof(c), me, 20, __LINE__);
	check(b, sizeof(b), me, 20, __LINE__);
	barrier(&W);
}

/* A second endpoint with a 4-entry receive CQ takes six writes with
 * remote CQ data: four entries, then an FI_EOVERRUN entry counting two. */
static void test_overrun(void)
{
	int me = W.rank, to = (me + 1) % W.n, i;
	struct fi_xpu_cq_attr qa = { .size = 4, .flags = 0, .format = FI_CQ_FORMAT_DATA,
				     .timeout = 0, .xpu_ctx = W.ctx };
	struct fi_xpu_ep_attr ea = { 0 };
	struct fid_xpu_host_cq *hq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_cq q;
	uint8_t names[MAXP][64], mine[64];
	size_t len = sizeof(mine);
	fi_addr_t fa;
	uint64_t raw, v = 5;
	struct fi_cq_data_entry e[8];
	struct fi_cq_err_entry ee;
	void *want[6];
	int errs[6];

	ea.xpu_ctx = W.ctx;
	REQUIRE(fi_xpu_cq_open(W.dom, &qa, &hq, NULL), 0);
	REQUIRE(fi_xpu_endpoint(W.dom, &ea, &hep, NULL), 0);
	REQUIRE(fi_xpu_ep_bind(hep, &hq->fid, FI_TRANSMIT | FI_RECV), 0);
	REQUIRE(fi_xpu_enable(hep), 0);
	REQUIRE(fi_xpu_getname(hep, mine, &len), 0);
	REQUIRE(fi_xpu_export(&hq->fid, 0, &q.fid), 0);
	allgather(&W, mine, names, sizeof(mine));
	REQUIRE(fi_xpu_av_insert(W.av, names[to], 1, &fa, 0, NULL), 1);
	len = sizeof(raw);
	REQUIRE(fi_xpu_av_lookup(W.av, fa, &raw, &len, 0, W.ctx), 0);
	barrier(&W);
	for (i = 0; i < 6; i++) {
		EXPECT(fi_xpu_write(&W.ep, &v, 8, NULL, 100 + (uint64_t)i, &raw,
				    W.cards[to].base + 8 * (uint64_t)i, W.cards[to].key, CTX(30 + i),
				    FI_REMOTE_CQ_DATA, FI_XPU_WORK_ITEM), 0);
		want[i] = CTX(30 + i);
	}
	collect(&W.cq, want, 6, errs, NULL, NULL, NULL);
	for (i = 0; i < 6; i++)
		EXPECT(errs[i], 0);
	barrier(&W);
	memset(e, 0, sizeof(e));
	EXPECT(fi_xpu_cq_read(&q, e, 8, FI_XPU_WORK_ITEM), 4);
	for (i = 0; i < 4; i++)
		EXPECT(e[i].data, 100 + i);
	/* Room again: the loss is reported, never silent. */
	EXPECT(fi_xpu_cq_read(&q, e, 8, FI_XPU_WORK_ITEM), -FI_EAVAIL);
	memset(&ee, 0, sizeof(ee));
	EXPECT(fi_xpu_cq_readerr(&q, &ee, 0, FI_XPU_WORK_ITEM), 1);
	EXPECT(ee.err, FI_EOVERRUN);
	EXPECT(ee.olen, 2);
	EXPECT(fi_xpu_cq_read(&q, e, 8, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	EXPECT(fi_xpu_cq_readerr(&q, &ee, 0, FI_XPU_WORK_ITEM), -FI_EAGAIN);
	barrier(&W);
	EXPECT(fi_xpu_av_remove(W.av, &fa, 1, 0), 0);
	EXPECT(fi_xpu_close(&hep->fid), 0);
	EXPECT(fi_xpu_close(&hq->fid), 0);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2;
	char name[64];

	if (n < 2 || n > MAXP)
		return 2;
	spawn(&W, n);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	test_large();
	test_directed();
	test_overrun();
	close_world(&W);
	snprintf(name, sizeof(name), "shm_msg n=%d", n);
	return finish(&W, name);
}
