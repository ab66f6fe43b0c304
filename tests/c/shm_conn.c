/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Connection ids of the shm provider are reused: one domain meets more
 * peers over its life than it can hold connections at once (70 > 64),
 * each connecting, sending and leaving in turn (half of them without
 * closing anything). A rendezvous message that a departed peer left in the
 * inbox is not resolved against the peer that took its id afterwards: its
 * receive fails with FI_ECONNRESET. Then the same the other way round:
 * this domain connects out to 70 peers in turn, each of which leaves once
 * it received its message; every new connection finds the previous peer
 * gone and takes its id, so the previous peer's raw address, and a lookup
 * of its second AV entry, fail with FI_ECONNRESET while sends to the live
 * peer succeed. No descriptor is left behind. Every peer is a fresh
 * program (spawn_fresh): this process has the library's threads.
 * Prints "shm_conn: ok".
 */
#include "shm_common.h"

#define PEERS 70
#define STALE 66
#define RDV_BYTES 8000

static struct world W;

/* A departed peer: connects to the parent, sends its index (and, for
 * STALE, a rendezvous message from registered memory), then leaves. */
static void child(int i, int sock)
{
	struct lone l;
	struct fid_xpu_mr *mr = NULL;
	struct fi_cq_msg_entry e;
	unsigned char desc[32], *mem = NULL;
	uint64_t raw, v = (uint64_t)i, off;
	size_t len = sizeof(raw), dlen = sizeof(desc);
	fi_addr_t fa;
	int fd, k;

	my_rank = i + 1;
	open_lone(&l, 1, 5000);
	REQUIRE(fi_xpu_av_insert(l.av, W.cards[0].name, 1, &fa, 0, NULL), 1);
	REQUIRE(fi_xpu_av_lookup(l.av, fa, &raw, &len, 0, l.ctx), 0);
	if (i == STALE) {
		REQUIRE(fi_xpu_alloc(l.ctx, 65536, 0, FI_XPU_ALLOC_DMABUF, (void **)&mem, &fd, &off),
			0);
		close(fd);
		for (k = 0; k < RDV_BYTES; k++)
			mem[k] = (unsigned char)(k + 1);
		REQUIRE(fi_xpu_mr_reg(l.dom, l.ctx, mem, 65536, FI_SEND, 0, 0, 0, &mr, NULL), 0);
		REQUIRE(fi_xpu_mr_desc(mr, desc, &dlen, 0, l.ctx), 0);
		EXPECT(fi_xpu_send(&l.ep, mem, RDV_BYTES, desc, 0, &raw, NULL, 0, FI_XPU_WORK_ITEM),
		       0);
	}
	EXPECT(fi_xpu_send(&l.ep, &v, 8, NULL, 0, &raw, &v, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cq_sread(&l.cq, &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == &v, 1);
	if (write(sock, "x", 1) != 1)
		_exit(2);
	if (i % 2 == 0 || mr) {
		/* Leave as a crashed process would. */
		_exit(failures ? 1 : 0);
	}
	close_lone(&l);
	_exit(failures ? 1 : 0);
}

/* A peer this domain connects to: publishes its address on `sock`,
 * receives its index, acknowledges and leaves. */
static void target_child(int i, int sock)
{
	struct lone l;
	struct fi_cq_msg_entry e;
	uint8_t name[64];
	size_t len = sizeof(name);
	uint64_t v = ~0ULL;

	my_rank = 100 + i;
	open_lone(&l, 0, 10000);
	REQUIRE(fi_xpu_getname(l.hep, name, &len), 0);
	EXPECT(fi_xpu_recv(&l.ep, &v, sizeof(v), NULL, NULL, &v, 0, FI_XPU_WORK_ITEM), 0);
	io(sock, name, sizeof(name), 1);
	EXPECT(fi_xpu_cq_sread(&l.cq, &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	EXPECT(e.op_context == &v, 1);
	EXPECT(v, (uint64_t)i);
	if (write(sock, "x", 1) != 1)
		_exit(2);
	if (i % 2 == 0)
		_exit(failures ? 1 : 0);
	close_lone(&l);
	_exit(failures ? 1 : 0);
}

/* This domain connects out to PEERS peers in turn (see the top). */
static void connect_out(void)
{
	struct fid_xpu_av *av;
	struct fi_cq_tagged_entry e;
	uint64_t raw, prev_raw = 0, v;
	fi_addr_t fa, fa2, prev_fa2 = 0;
	size_t len;
	int i, st;

	REQUIRE(fi_xpu_av_open(W.dom, NULL, &av, NULL), 0);
	for (i = 0; i < PEERS; i++) {
		uint8_t name[64];
		int sock;
		pid_t p = spawn_fresh(&W, "target", i, &sock);
		char c;
		io(sock, name, sizeof(name), 0);
		REQUIRE(fi_xpu_av_insert(av, name, 1, &fa, 0, NULL), 1);
		/* A second entry for the same peer shares its connection. */
		REQUIRE(fi_xpu_av_insert(av, name, 1, &fa2, 0, NULL), 1);
		len = sizeof(raw);
		REQUIRE(fi_xpu_av_lookup(av, fa, &raw, &len, 0, W.ctx), 0);
		if (i > 0) {
			/* The previous peer is gone and this one holds its id. */
			v = 0;
			EXPECT(fi_xpu_send(&W.ep, &v, 8, NULL, 0, &prev_raw, &v, 0,
					   FI_XPU_WORK_ITEM), -FI_ECONNRESET);
			len = sizeof(v);
			EXPECT(fi_xpu_av_lookup(av, prev_fa2, &v, &len, 0, W.ctx), -FI_ECONNRESET);
		}
		v = (uint64_t)i;
		EXPECT(fi_xpu_send(&W.ep, &v, 8, NULL, 0, &raw, &v, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
		EXPECT(e.op_context == &v, 1);
		EXPECT(read(sock, &c, 1), 1);
		close(sock);
		EXPECT(waitpid(p, &st, 0), p);
		EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, 1);
		prev_raw = raw;
		prev_fa2 = fa2;
	}
	/* Closing the AV frees the raw addresses looked up through it. */
	EXPECT(fi_xpu_close(&av->fid), 0);
}

/* Receives one message into buf; returns its err (0 or positive). */
static int recv_one(void *buf, size_t len)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ee;
	int64_t rc;
	EXPECT(fi_xpu_recv(&W.ep, buf, len, NULL, NULL, buf, 0, FI_XPU_WORK_ITEM), 0);
	rc = next(&W, &e, NULL);
	if (rc == -FI_EAVAIL) {
		memset(&ee, 0, sizeof(ee));
		EXPECT(fi_xpu_cq_readerr(&W.cq, &ee, 0, FI_XPU_WORK_ITEM), 1);
		EXPECT(ee.op_context == buf, 1);
		return ee.err;
	}
	EXPECT(rc, 1);
	EXPECT(e.op_context == buf, 1);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct fresh_role roles[] = {
		{ "child", child },
		{ "target", target_child },
		{ NULL, NULL },
	};
	int i, fds0, st;
	static unsigned char big[RDV_BYTES];
	uint64_t v;

	run_fresh_role(&W, argc, argv, roles);
	setenv("FI_XPU_SHM_HEAP_SIZE", "1048576", 1);
	spawn(&W, 1);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	fds0 = count_fds();
	for (i = 0; i < PEERS; i++) {
		int sock;
		pid_t p = spawn_fresh(&W, "child", i, &sock);
		char c;
		EXPECT(read(sock, &c, 1), 1);
		close(sock);
		EXPECT(waitpid(p, &st, 0), p);
		EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, 1);
		if (i == STALE)
			continue; /* its messages wait for the next peer */
		if (i == STALE + 1) {
			/* The stale rendezvous comes first; its sender's id
			 * belongs to this peer now, so nothing is read. */
			memset(big, 0, sizeof(big));
			EXPECT(recv_one(big, sizeof(big)), FI_ECONNRESET);
			EXPECT(big[0], 0);
			v = ~0ULL;
			EXPECT(recv_one(&v, sizeof(v)), 0);
			EXPECT(v, (uint64_t)STALE);
		}
		v = ~0ULL;
		EXPECT(recv_one(&v, sizeof(v)), 0);
		EXPECT(v, (uint64_t)i);
	}
	/* Every departed peer's socket and region descriptors are closed;
	 * what stays is the one map (one allocation) of the reused id. */
	for (i = 0; i < 200 && count_fds() != fds0 + 1; i++)
		usleep(10000);
	EXPECT(count_fds(), fds0 + 1);
	connect_out();
	for (i = 0; i < 200 && count_fds() != fds0 + 1; i++)
		usleep(10000);
	EXPECT(count_fds(), fds0 + 1);
	close_world(&W);
	return finish(&W, "shm_conn");
}
