/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A hostile peer process against a victim, over the shm provider. Rank 1
 * is admitted like any peer (same uid, the victim's address), then for
 * ROUNDS rounds does one of: writes garbage over a random stretch of the
 * victim's heap as it maps it; rewinds or advances the victim's inbox
 * positions; forges inbox entries (rendezvous and streamed messages naming
 * regions, offsets and lengths near 2^64, positions rewound); corrupts its
 * own heap, which the victim reads when it targets the peer; tries to
 * truncate memory it shared. Between its steps the victim runs sends,
 * receives, RMA and atomics to and from it, each bounded by a CQ timeout.
 * Last, the peer starts a streamed send of 600 KiB to the victim and is
 * killed in the middle of it.
 *
 * The victim must survive every round; each call returns 0 or a negative
 * code and each completion is a success or an error entry; its private
 * memory (a canary buffer and the guards around its receive buffers) keeps
 * every byte; and the receive of the interrupted stream ends (success or
 * error) in bounded time, writing nothing outside its buffer.
 * Prints "shm_hostile: ok".
 */
#include "shm_common.h"
#include "hostile.h"

#include <errno.h>
#include <signal.h>

#define ROUNDS 300
#define CANARY (1u << 20)
#define GUARD 4096
#define RBUF 8192
#define STREAM (600u * 1024)

static struct world W;
/* ---- the hostile peer ---------------------------------------------------- */
static void hostile_round(unsigned char *vheap, uint64_t vsize, struct fi_xpu_shm_ep_block *vblk,
			  unsigned char *own, uint64_t own_size, int shared_fd)
{
	uint64_t i, off, n;
	switch (rnd() % 5) {
	case 0: /* garbage over a stretch of the victim's heap */
		off = rnd() % vsize;
		n = 1 + rnd() % 8192;
		if (n > vsize - off)
			n = vsize - off;
		for (i = 0; i < n; i++)
			vheap[off + i] = (unsigned char)rnd();
		break;
	case 1: /* positions rewound or advanced */
		vblk->head = evil(vblk->head);
		if (rnd() & 1)
			vblk->tail = evil(vblk->tail);
		break;
	case 2: { /* forged entries */
		uint64_t h = vblk->head;
		for (i = 0; i < 1 + rnd() % 8; i++) {
			struct fi_xpu_shm_msg *m =
				(struct fi_xpu_shm_msg *)(void *)((unsigned char *)(vblk + 1) +
								  ((h + i) % FI_XPU_SHM_INBOX_SLOTS) *
									  FI_XPU_SHM_SLOT_SIZE);
			m->len = evil(8);
			m->flags = (rnd() & 1 ? FI_XPU_SHM_MSG_RDV : 0) |
				   (rnd() & 1 ? FI_XPU_SHM_MSG_STREAM : 0) | (rnd() & FI_TAGGED);
			m->tag = 0;
			m->src_region = evil(1);
			m->src_off = evil(0);
			m->src_conn = evil(0);
			m->src_gen = evil(1);
			m->produced = evil(m->len);
			m->consumed = evil(0);
			m->state = rnd() % 6;
			__atomic_store_n(&m->seq, h + i + 1, __ATOMIC_RELEASE);
		}
		vblk->head = h + i;
		break;
	}
	case 3: /* its own heap, which the victim reads when it targets us */
		for (i = 0; i < 64; i++)
			((uint64_t *)(void *)own)[rnd() % (own_size / 8)] = evil(rnd());
		break;
	default: /* memory it shared cannot shrink under the victim */
		EXPECT(ftruncate(shared_fd, 0), -1);
		EXPECT(errno, EPERM);
		break;
	}
}

static void hostile(void)
{
	const struct fi_xpu_shm_peer_addr *pa =
		FI_XPU_SHM_P(const struct fi_xpu_shm_peer_addr, W.raw[0]);
	const struct fi_xpu_shm_peer_map *pm = FI_XPU_SHM_P(const struct fi_xpu_shm_peer_map, pa->map);
	const struct fi_xpu_shm_ep_dev *me = (const struct fi_xpu_shm_ep_dev *)W.ep.fid.prov_ctx;
	const struct fi_xpu_shm_ctx_dev *cx = FI_XPU_SHM_P(const struct fi_xpu_shm_ctx_dev, me->ctx);
	const struct fi_xpu_shm_ep_info *vi = FI_XPU_SHM_P(const struct fi_xpu_shm_ep_info,
							  pm->base[pa->info_region] + pa->info_off);
	unsigned char *vheap = FI_XPU_SHM_P(unsigned char, pm->base[vi->heap_region]);
	uint64_t vsize = pm->size[vi->heap_region];
	struct fi_xpu_shm_ep_block *vblk =
		(struct fi_xpu_shm_ep_block *)(void *)(vheap + vi->block_off);
	unsigned char *own = FI_XPU_SHM_P(unsigned char, cx->heap_base), *big, *shared;
	uint64_t own_size = ((struct fi_xpu_shm_heap_hdr *)(void *)own)->size, off;
	struct fid_xpu_mr *mr;
	int r, fd;

	REQUIRE(vheap != NULL && vsize != 0, 1);
	REQUIRE(fi_xpu_alloc(W.ctx, 65536, 0, FI_XPU_ALLOC_DMABUF, (void **)&shared, &fd, &off), 0);
	REQUIRE(fi_xpu_mr_reg(W.dom, W.ctx, shared, 65536, FI_REMOTE_READ, 0, 0, 0, &mr, NULL), 0);
	for (r = 0; r < ROUNDS; r++) {
		hostile_round(vheap, vsize, vblk, own, own_size, fd);
		barrier(&W); /* corrupted */
		barrier(&W); /* the victim ran its operations */
	}
	/* Death in the middle of a streamed send, to a fresh endpoint of the
	 * victim (the inbox of the first one may be wedged for good by now,
	 * which a peer that can write it is able to do). */
	{
		uint8_t name[64];
		uint64_t raw2;
		size_t len = sizeof(raw2);
		fi_addr_t fa;
		io(W.sock, name, sizeof(name), 0);
		REQUIRE(fi_xpu_av_insert(W.av, name, 1, &fa, 0, NULL), 1);
		REQUIRE(fi_xpu_av_lookup(W.av, fa, &raw2, &len, 0, W.ctx), 0);
		big = malloc(STREAM);
		REQUIRE(big != NULL, 1);
		memset(big, 0x3c, STREAM);
		io(W.sock, name, 1, 0); /* the victim posted its receive */
		(void)fi_xpu_tsend(&W.ep, big, STREAM, NULL, 0, &raw2, 0x5eed, big, 0,
				   FI_XPU_WORK_ITEM);
		kill(getpid(), SIGKILL);
	}
}

/* ---- the victim ---------------------------------------------------------- */
static unsigned char *canary, *rbuf;
/* What the victim saw: calls refused with a code, completions, error
 * completions. */
static long refused, completed, errored;

static void check_private(int r)
{
	if (!intact(canary, CANARY, 0xc5) || !intact(rbuf, GUARD, 0xe7) ||
	    !intact(rbuf + GUARD + RBUF, GUARD, 0xe7)) {
		fprintf(stderr, "round %d: the victim's private memory changed\n", r);
		failures++;
	}
}

/* Drains what completed, success or error; each must be one or the other. */
static void drain(int r)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ee;
	int64_t n;
	int k;
	for (k = 0; k < 8; k++) {
		memset(&e, 0, sizeof(e));
		n = fi_xpu_cq_read(&W.cq, &e, 1, FI_XPU_WORK_ITEM);
		if (n == 1)
			completed++;
		if (n == -FI_EAVAIL) {
			errored++;
			memset(&ee, 0, sizeof(ee));
			if (fi_xpu_cq_readerr(&W.cq, &ee, 0, FI_XPU_WORK_ITEM) != 1 || ee.err <= 0) {
				fprintf(stderr, "round %d: an error entry without an error\n", r);
				failures++;
			}
		} else if (n != 1 && n != -FI_EAGAIN) {
			fprintf(stderr, "round %d: fi_xpu_cq_read = %lld\n", r, (long long)n);
			failures++;
			return;
		} else if (n == -FI_EAGAIN) {
			return;
		}
	}
}

static void code(int r, const char *what, int64_t rc)
{
	refused += rc < 0;
	if (rc > 0) {
		fprintf(stderr, "round %d: %s returned %lld\n", r, what, (long long)rc);
		failures++;
	}
}

static void victim_ops(int r)
{
	uint64_t v = (uint64_t)r, res = 0;
	int64_t rc;
	/* A receive into a private buffer with guards, a send, RMA and an
	 * atomic against the peer's heap registration. */
	code(r, "recv", fi_xpu_recv(&W.ep, rbuf + GUARD, RBUF, NULL, NULL, rbuf, 0,
				    FI_XPU_WORK_ITEM));
	code(r, "send", fi_xpu_send(&W.ep, &v, 8, NULL, 0, &W.raw[1], &v, 0, FI_XPU_WORK_ITEM));
	code(r, "write", fi_xpu_write(&W.ep, &v, 8, NULL, 0, &W.raw[1], W.cards[1].base + 8 * (rnd() % 64),
				      W.cards[1].key, &v, 0, FI_XPU_WORK_ITEM));
	code(r, "read", fi_xpu_read(&W.ep, &res, 8, NULL, &W.raw[1], W.cards[1].base, W.cards[1].key,
				    &res, 0, FI_XPU_WORK_ITEM));
	rc = fi_xpu_fetch_atomic(&W.ep, &v, 1, NULL, &res, NULL, &W.raw[1], W.cards[1].base + 512,
				 W.cards[1].key, FI_UINT64, FI_SUM, &res, 0, FI_XPU_WORK_ITEM);
	code(r, "fetch_atomic", rc);
	drain(r);
}

static void victim(pid_t peer)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry ee;
	int r, st, tries;
	int64_t n = -FI_EAGAIN;

	canary = malloc(CANARY);
	rbuf = malloc(2 * GUARD + RBUF);
	REQUIRE(canary && rbuf, 1);
	memset(canary, 0xc5, CANARY);
	memset(rbuf, 0xe7, 2 * GUARD + RBUF);
	for (r = 0; r < ROUNDS; r++) {
		barrier(&W);
		victim_ops(r);
		check_private(r);
		barrier(&W);
	}
	/* The interrupted stream, into a fresh endpoint: its receive ends in
	 * bounded time, with success or an error, writing only its buffer. */
	{
		struct fi_xpu_cq_attr cattr = { .size = 64, .flags = 0,
						.format = FI_CQ_FORMAT_TAGGED,
						.timeout = 100, .xpu_ctx = W.ctx };
		struct fi_xpu_ep_attr eattr = { 0 };
		struct fid_xpu_host_cq *hcq2;
		struct fid_xpu_host_ep *hep2;
		struct fid_xpu_ep ep2;
		struct fid_xpu_cq cq2;
		uint8_t name[64];
		size_t len = sizeof(name);
		unsigned char *big = malloc(STREAM + 2 * GUARD);

		REQUIRE(big != NULL, 1);
		memset(big, 0xe7, STREAM + 2 * GUARD);
		eattr.xpu_ctx = W.ctx;
		REQUIRE(fi_xpu_cq_open(W.dom, &cattr, &hcq2, NULL), 0);
		REQUIRE(fi_xpu_endpoint(W.dom, &eattr, &hep2, NULL), 0);
		REQUIRE(fi_xpu_ep_bind(hep2, &W.av->fid, 0), 0);
		REQUIRE(fi_xpu_ep_bind(hep2, &hcq2->fid, FI_TRANSMIT | FI_RECV), 0);
		REQUIRE(fi_xpu_enable(hep2), 0);
		REQUIRE(fi_xpu_getname(hep2, name, &len), 0);
		REQUIRE(fi_xpu_export(&hep2->fid, 0, &ep2.fid), 0);
		REQUIRE(fi_xpu_export(&hcq2->fid, 0, &cq2.fid), 0);
		EXPECT(fi_xpu_trecv(&ep2, big + GUARD, STREAM, NULL, NULL, 0x5eed, 0, big, 0,
				    FI_XPU_WORK_ITEM), 0);
		io(W.socks[1], name, sizeof(name), 1);
		io(W.socks[1], name, 1, 1);
		EXPECT(waitpid(peer, &st, 0), peer);
		EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, 1);
		for (tries = 0; tries < 100; tries++) {
			memset(&e, 0, sizeof(e));
			n = fi_xpu_cq_sread(&cq2, &e, 1, 1, FI_XPU_WORK_ITEM);
			if (n == -FI_EAVAIL) {
				memset(&ee, 0, sizeof(ee));
				EXPECT(fi_xpu_cq_readerr(&cq2, &ee, 0, FI_XPU_WORK_ITEM), 1);
				EXPECT(ee.err > 0, 1);
				EXPECT(ee.op_context == big, 1);
				break;
			}
			if (n == 1) {
				EXPECT(e.op_context == big, 1);
				break;
			}
			if (n != -FI_EAGAIN && n != -FI_ETIMEDOUT) {
				EXPECT(n, 1);
				break;
			}
		}
		EXPECT(tries < 100, 1);
		EXPECT(intact(big, GUARD, 0xe7) && intact(big + GUARD + STREAM, GUARD, 0xe7), 1);
		printf("shm_hostile: the interrupted stream ended after %d waits of 100 ms (%s)\n",
		       tries + 1, n == 1 ? "success" : fi_xpu_strerror((int)ee.err));
	}
	check_private(ROUNDS);
}

int main(void)
{
	pid_t peer;
	cq_timeout_ms = 100;
	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	if (W.rank == 1) {
		peer = getpid();
		io(W.sock, &peer, sizeof(peer), 1);
		hostile();
		_exit(3);
	}
	io(W.socks[1], &peer, sizeof(peer), 0);
	victim(peer);
	printf("shm_hostile: %d rounds: %ld calls refused with a code, %ld completions, %ld error "
	       "completions\n", ROUNDS, refused, completed, errored);
	if (failures) {
		fprintf(stderr, "shm_hostile: FAILED (%d)\n", failures);
		return 1;
	}
	printf("shm_hostile: ok\n");
	return 0;
}
