/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The shm provider's host side and failure handling: sizes and size
 * queries, registration rules, host CQs for device errors, forged addresses
 * (another node, a wrong secret), a peer of another uid (when run as root),
 * and a peer that exits mid-test: the survivor's waits end with
 * -FI_ETIMEDOUT, its operations on the peer with -FI_ECONNRESET, and the
 * streamed and rendezvous sends it had outstanding to the peer with an
 * FI_ECONNRESET error completion, instead of hanging. Prints "shm_peer: ok".
 */
#include "shm_common.h"

static struct world W;

static void host_side(void)
{
	struct fi_xpu_ctx_info ca;
	struct fid_xpu_mr *mr;
	struct fid_xpu_host_cntr *hc;
	struct fid_xpu_host_cq *hq;
	struct fid_xpu_host_ep *ep2;
	struct fi_xpu_cntr_attr na = { .flags = 0, .xpu_ctx = NULL };
	struct fi_xpu_cq_attr qa = { .size = 16, .flags = 0, .format = FI_CQ_FORMAT_MSG,
				     .timeout = 100, .xpu_ctx = NULL };
	struct fi_xpu_ep_attr ea = { 0 };
	struct fi_cq_msg_entry me;
	struct fi_cq_err_entry ee;
	static char plain[4096];
	uint8_t name[64];
	uint64_t raw;
	size_t len;

	EXPECT(fi_xpu_ctx_getinfo(W.ctx, &ca), 0);
	EXPECT(ca.av_addr_size, 8);
	EXPECT(ca.mr_desc_size, 32);
	EXPECT(ca.caps, FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR | FI_XPU_CAP_WR);
	len = 4;
	EXPECT(fi_xpu_av_lookup(W.av, W.fa[0], &raw, &len, 0, W.ctx), -FI_ETOOSMALL);
	EXPECT(len, 8);
	len = 10;
	EXPECT(fi_xpu_getname(W.hep, name, &len), -FI_ETOOSMALL);
	EXPECT(len, 64);
	EXPECT(fi_xpu_av_lookup(W.av, 99, &raw, &len, 0, W.ctx), -FI_EINVAL);
	/* Only memory the context allocated can be registered. */
	EXPECT(fi_xpu_mr_reg(W.dom, W.ctx, plain, sizeof(plain), FI_REMOTE_WRITE, 0, 0, 0, &mr,
			     NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_mr_reg(W.dom, NULL, W.heap, 4096, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL),
	       -FI_EOPNOTSUPP);
	/* A host counter cannot count what peers do; a host CQ collects the
	 * errors of device-posted operations for the host to read. */
	EXPECT(fi_xpu_cntr_open(W.dom, &na, &hc, NULL), 0);
	EXPECT(fi_xpu_cq_open(W.dom, &qa, &hq, NULL), 0);
	ea.xpu_ctx = W.ctx;
	EXPECT(fi_xpu_endpoint(W.dom, &ea, &ep2, NULL), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &hc->fid, FI_REMOTE_WRITE), -FI_EOPNOTSUPP);
	EXPECT(fi_xpu_ep_bind(ep2, &hc->fid, FI_WRITE), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &hq->fid, FI_TRANSMIT), 0);
	EXPECT(fi_xpu_ep_bind(ep2, &W.av->fid, 0), 0);
	EXPECT(fi_xpu_enable(ep2), 0);
	{
		struct fid_xpu_ep dev;
		uint64_t v = 0, key = W.cards[0].ro_key;
		EXPECT(fi_xpu_export(&ep2->fid, 0, &dev.fid), 0);
		EXPECT(fi_xpu_write(&dev, plain, 8, NULL, 0, &W.raw[0], W.cards[0].ro_base, key,
				    plain, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(fi_xpu_write(&dev, plain, 8, NULL, 0, &W.raw[0], W.cards[0].base, W.cards[0].key,
				    plain + 1, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(fi_xpu_cq_host_read(hq, &me, 1), -FI_EAVAIL);
		memset(&ee, 0, sizeof(ee));
		EXPECT(fi_xpu_cq_host_readerr(hq, &ee, 0), 1);
		EXPECT(ee.err, FI_EACCES);
		EXPECT(ee.op_context == plain, 1);
		EXPECT(fi_xpu_cq_host_read(hq, &me, 1), 1);
		EXPECT(me.op_context == plain + 1, 1);
		EXPECT(me.flags, FI_WRITE | FI_RMA);
		EXPECT(me.len, 8);
		EXPECT(fi_xpu_cq_host_read(hq, &me, 1), -FI_EAGAIN);
		EXPECT(fi_xpu_cntr_host_read(hc, &v), 0);
		EXPECT(v, 1);
		EXPECT(fi_xpu_cntr_host_readerr(hc, &v), 0);
		EXPECT(v, 1);
		/* 18 completions into a 16-entry host CQ: the two lost ones
		 * come back as one FI_EOVERRUN entry once there is room. */
		{
			struct fi_cq_msg_entry all[16];
			int k;
			for (k = 0; k < 18; k++)
				EXPECT(fi_xpu_write(&dev, plain, 8, NULL, 0, &W.raw[0], W.cards[0].base,
						    W.cards[0].key, plain + k, 0, FI_XPU_WORK_ITEM),
				       0);
			EXPECT(fi_xpu_cq_host_read(hq, all, 16), 16);
			EXPECT(all[15].op_context == plain + 15, 1);
			EXPECT(fi_xpu_cq_host_read(hq, all, 16), -FI_EAVAIL);
			memset(&ee, 0, sizeof(ee));
			EXPECT(fi_xpu_cq_host_readerr(hq, &ee, 0), 1);
			EXPECT(ee.err, FI_EOVERRUN);
			EXPECT(ee.olen, 2);
			EXPECT(fi_xpu_cq_host_read(hq, all, 16), -FI_EAGAIN);
		}
	}
	EXPECT(fi_xpu_close(&ep2->fid), 0);
	EXPECT(fi_xpu_close(&hq->fid), 0);
	EXPECT(fi_xpu_close(&hc->fid), 0);
}

static void forged(void)
{
	uint8_t a[64];
	fi_addr_t fa;
	memcpy(a, W.cards[0].name, 64);
	a[8] ^= 0xff; /* boot id: another node */
	EXPECT(fi_xpu_av_insert(W.av, a, 1, &fa, 0, NULL), -FI_EHOSTUNREACH);
	EXPECT(fa, FI_ADDR_UNSPEC);
	memcpy(a, W.cards[0].name, 64);
	a[40] ^= 0x01; /* secret */
	EXPECT(fi_xpu_av_insert(W.av, a, 1, &fa, 0, NULL), -FI_EACCES);
	memcpy(a, W.cards[0].name, 64);
	a[0] ^= 0x01; /* not an shm address at all */
	EXPECT(fi_xpu_av_insert(W.av, a, 1, &fa, 0, NULL), -FI_EINVAL);
}

/* A process of another uid presents a valid address: refused (root only).
 * The plugins are loaded before it drops to uid 65534, which may not be
 * able to reach the build directory. */
static void stranger(int arg, int sock)
{
	struct fi_xpu_info *info, *i;
	struct fid_xpu_domain *dom;
	struct fid_xpu_av *av;
	fi_addr_t fa;
	int rc;

	(void)arg;
	(void)sock;
	if (fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info) != 0)
		_exit(4);
	if (setgid(65534) != 0 || setuid(65534) != 0)
		_exit(3);
	for (i = info; i && strcmp(i->prov_name, "shm") != 0; i = i->next)
		;
	if (!i || fi_xpu_domain(i, NULL, &dom, NULL) != 0 ||
	    fi_xpu_av_open(dom, NULL, &av, NULL) != 0)
		_exit(5);
	rc = fi_xpu_av_insert(av, W.cards[0].name, 1, &fa, 0, NULL);
	_exit(rc == -FI_EACCES ? 0 : 6);
}

static void other_uid(void)
{
	pid_t p;
	int st, sock;
	if (geteuid() != 0) {
		printf("shm_peer: not root, cross-uid refusal not tested\n");
		return;
	}
	p = spawn_fresh(&W, "stranger", 0, &sock);
	EXPECT(waitpid(p, &st, 0), p);
	EXPECT(WIFEXITED(st) ? WEXITSTATUS(st) : 100, 0);
	close(sock);
}

/* An endpoint of rank 0 with sends to rank 1 that rank 1 never takes. */
static struct fid_xpu_host_cq *dq;
static struct fid_xpu_host_ep *dep;
static struct fid_xpu_cq dcq;
static struct fid_xpu_ep dev_ep;
static unsigned char *big;
#define BIG 300000

static void outstanding_sends(void)
{
	struct fi_cq_msg_entry e;
	uint64_t desc[4];
	size_t len = sizeof(desc);

	open_send_ep(&W, 16, FI_CQ_FORMAT_MSG, &dq, &dep, &dcq);
	REQUIRE(fi_xpu_export(&dep->fid, 0, &dev_ep.fid), 0);
	REQUIRE(fi_xpu_mr_desc(W.mr, desc, &len, 0, W.ctx), 0);
	big = malloc(BIG);
	REQUIRE(big != NULL, 1);
	memset(big, 7, BIG);
	/* Streamed (plain memory: one lane staged, the rest waits for the
	 * receiver) and rendezvous (registered: the receiver would pull it). */
	EXPECT(fi_xpu_send(&dev_ep, big, BIG, NULL, 0, &W.raw[1], (void *)0x51, 0,
			   FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_send(&dev_ep, W.heap, 100000, desc, 0, &W.raw[1], (void *)0x52, 0,
			   FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cq_read(&dcq, &e, 1, FI_XPU_WORK_ITEM), -FI_EAGAIN);
}

/* Once the receiver is known gone, both sends end with FI_ECONNRESET. */
static void departed_receiver_ends_sends(void)
{
	struct fi_cq_err_entry ee;
	struct fi_cq_msg_entry e;
	int got = 0, seen = 0, i;
	for (i = 0; i < 300 && got < 2; i++) {
		int64_t n = fi_xpu_cq_read(&dcq, &e, 1, FI_XPU_WORK_ITEM);
		if (n == -FI_EAVAIL) {
			memset(&ee, 0, sizeof(ee));
			EXPECT(fi_xpu_cq_readerr(&dcq, &ee, 0, FI_XPU_WORK_ITEM), 1);
			EXPECT(ee.err, FI_ECONNRESET);
			EXPECT(ee.flags & FI_SEND, FI_SEND);
			if ((uintptr_t)ee.op_context == 0x51 || (uintptr_t)ee.op_context == 0x52)
				seen |= 1 << ((uintptr_t)ee.op_context - 0x51);
			got++;
			continue;
		}
		EXPECT(n, -FI_EAGAIN);
		usleep(10000);
	}
	EXPECT(got, 2);
	EXPECT(seen, 3);
	EXPECT(fi_xpu_close(&dep->fid), 0);
	EXPECT(fi_xpu_close(&dq->fid), 0);
	free(big);
}

int main(int argc, char **argv)
{
	static const struct fresh_role roles[] = { { "stranger", stranger }, { NULL, NULL } };
	int64_t rc;
	uint64_t v = 1;
	char c;
	int i;

	run_fresh_role(&W, argc, argv, roles);
	cq_timeout_ms = 300;
	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_DATA);
	if (W.rank == 1) {
		/* Once rank 0 has sends outstanding to us, leave without
		 * closing anything, as a crashed peer would. */
		if (read(W.sock, &c, 1) != 1)
			_exit(2);
		fflush(stdout);
		if (write(W.sock, "x", 1) != 1)
			_exit(2);
		_exit(0);
	}
	outstanding_sends();
	if (write(W.socks[1], "g", 1) != 1)
		failures++;
	host_side();
	forged();
	other_uid();
	/* Survivor: wait for the peer to be gone. */
	if (read(W.socks[1], &c, 1) != 1)
		failures++;
	{
		int st;
		EXPECT(wait(&st) > 0, 1);
	}
	EXPECT(fi_xpu_cntr_wait_status(&W.rwcntr, fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM) + 1, 200,
				FI_XPU_WORK_ITEM), -FI_ETIMEDOUT);
	{
		struct fi_cq_data_entry e;
		EXPECT(fi_xpu_cq_sread(&W.cq, &e, 1, 1, FI_XPU_WORK_ITEM), -FI_ETIMEDOUT);
	}
	/* The control thread notices the hang-up; from then on operations on
	 * that peer fail at once. */
	rc = 0;
	for (i = 0; i < 200; i++) {
		rc = fi_xpu_atomic(&W.ep, &v, 1, NULL, &W.raw[1], W.cards[1].base, W.cards[1].key,
				   FI_UINT64, FI_SUM, NULL, 0, FI_XPU_WORK_ITEM);
		if (rc != 0)
			break;
		{
			struct fi_cq_data_entry e;
			fi_xpu_cq_read(&W.cq, &e, 1, FI_XPU_WORK_ITEM);
		}
		usleep(10000);
	}
	EXPECT(rc, -FI_ECONNRESET);
	departed_receiver_ends_sends();
	EXPECT(fi_xpu_send(&W.ep, &v, 8, NULL, 0, &W.raw[1], NULL, 0, FI_XPU_WORK_ITEM),
	       -FI_ECONNRESET);
	{
		fi_addr_t fa;
		EXPECT(fi_xpu_av_insert(W.av, W.cards[1].name, 1, &fa, 0, NULL), -FI_ECONNREFUSED);
	}
	W.n = 1; /* no more barriers with the departed peer */
	close_world(&W);
	return finish(&W, "shm_peer");
}
