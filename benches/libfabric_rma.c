/*
 * Baseline for the fi_xpu benchmarks: the same RMA measurements issued from
 * the host directly on a libfabric provider (e.g. shm or tcp), between a
 * parent and a forked child on this machine, with writes ordered where the
 * transport grants it (as fi_xpu's ofi provider asks).
 *
 * usage: libfabric_rma <libfabric-provider> [iterations]
 * Prints one "name value unit" line per figure:
 *   latency_8B_us     one-way latency of an 8-byte fi_write, from a ping-pong
 *   rate_8B_mps       8-byte fi_write message rate from one posting thread
 *   bw_<size>_MBps    fi_write bandwidth at 64 KiB, 1 MiB and 16 MiB
 */
#include "lf_bench.h"

#include <rdma/fi_rma.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (16u << 20)
#define WINDOW 64

struct res {
	struct lf_ep l;
	fi_addr_t peer;
	uint64_t peer_addr, peer_key;
	int sock;
};

struct hello {
	char name[256];
	size_t namelen;
	uint64_t addr, key;
};

static void xfer(int sock, void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len)
		DIE("socket write");
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(sock, (char *)in + got, len - got);
		if (n <= 0)
			DIE("socket read");
		got += (size_t)n;
	}
}

static void setup(struct res *r, const char *prov)
{
	lf_ep_open(&r->l, prov, 1024, BUF_SIZE, LF_ORDERED | LF_ZERO);

	struct hello mine = { .namelen = sizeof(mine.name) }, theirs;
	TRY(fi_getname(&r->l.ep->fid, mine.name, &mine.namelen));
	mine.addr = lf_ep_base(&r->l);
	mine.key = fi_mr_key(r->l.mr);
	xfer(r->sock, &mine, &theirs, sizeof(mine));
	if (fi_av_insert(r->l.av, theirs.name, 1, &r->peer, 0, NULL) != 1)
		DIE("fi_av_insert");
	r->peer_addr = theirs.addr;
	r->peer_key = theirs.key;
}

/* Reaps completions until `outstanding` drops to `target`. */
static void reap(struct res *r, int *outstanding, int target)
{
	struct fi_cq_entry e[16];
	while (*outstanding > target) {
		ssize_t n = fi_cq_read(r->l.cq, e, 16);
		if (n > 0)
			*outstanding -= (int)n;
		else if (n != -FI_EAGAIN)
			DIE("fi_cq_read: %s", fi_strerror((int)-n));
	}
}

/* Writes `len` bytes from local offset `src` to the peer's offset `dst`. */
static void write_at(struct res *r, size_t src, size_t dst, size_t len, int *outstanding)
{
	for (;;) {
		ssize_t ret = fi_write(r->l.ep, r->l.buf + src, len, r->l.desc, r->peer,
				       r->peer_addr + dst, r->peer_key, NULL);
		if (ret == 0)
			break;
		if (ret != -FI_EAGAIN)
			DIE("fi_write: %s", fi_strerror((int)-ret));
		reap(r, outstanding, *outstanding - 1 > 0 ? *outstanding - 1 : 0);
	}
	(*outstanding)++;
}

/* Waits until the 8-byte word at `off` equals `want`, progressing the
 * provider and counting the completions that arrive meanwhile. */
static void wait_word(struct res *r, size_t off, uint64_t want, int *outstanding)
{
	struct fi_cq_entry e[16];
	while (__atomic_load_n((uint64_t *)(r->l.buf + off), __ATOMIC_ACQUIRE) != want) {
		ssize_t n = fi_cq_read(r->l.cq, e, 16);
		if (n > 0)
			*outstanding -= (int)n;
	}
}

static void barrier(struct res *r)
{
	char a = 'b', b;
	xfer(r->sock, &a, &b, 1);
}

static void run(struct res *r, int initiator, int iters)
{
	int out = 0;
	/* Ping-pong: each side writes the round number into the peer's word 0. */
	barrier(r);
	double t0 = now();
	for (int i = 1; i <= iters; i++) {
		uint64_t *word = (uint64_t *)r->l.buf + 1;
		if (initiator) {
			*word = (uint64_t)i;
			write_at(r, 8, 0, 8, &out);
			wait_word(r, 0, (uint64_t)i, &out);
		} else {
			wait_word(r, 0, (uint64_t)i, &out);
			*word = (uint64_t)i;
			write_at(r, 8, 0, 8, &out);
		}
		reap(r, &out, 0);
	}
	double lat = (now() - t0) / iters / 2 * 1e6;
	barrier(r);

	if (initiator) {
		printf("latency_8B_us %.3f us\n", lat);
		int n = iters * 10;
		t0 = now();
		for (int i = 0; i < n; i++) {
			write_at(r, 64, 64 + (size_t)(i % 64) * 8, 8, &out);
			if (out >= WINDOW)
				reap(r, &out, WINDOW / 2);
		}
		reap(r, &out, 0);
		printf("rate_8B_mps %.3f Mmsg/s\n", n / (now() - t0) / 1e6);

		size_t sizes[] = { 64u << 10, 1u << 20, 16u << 20 };
		const char *names[] = { "64KiB", "1MiB", "16MiB" };
		for (int s = 0; s < 3; s++) {
			size_t len = sizes[s];
			int reps = (int)((256u << 20) / len);
			if (reps < 8)
				reps = 8;
			t0 = now();
			for (int i = 0; i < reps; i++) {
				write_at(r, 0, 0, len, &out);
				if (out >= 8)
					reap(r, &out, 4);
			}
			reap(r, &out, 0);
			printf("bw_%s_MBps %.1f MB/s\n", names[s], (double)len * reps / (now() - t0) / 1e6);
		}
		char done = 'd';
		if (write(r->sock, &done, 1) != 1)
			DIE("socket write");
	} else {
		/* The target only progresses until the initiator says it is done. */
		struct fi_cq_entry e[16];
		char done;
		for (;;) {
			(void)fi_cq_read(r->l.cq, e, 16);
			ssize_t n = recv(r->sock, &done, 1, MSG_DONTWAIT);
			if (n == 1)
				break;
		}
	}
}

static void teardown(struct res *r)
{
	lf_ep_close(&r->l);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		DIE("usage: %s <libfabric-provider> [iterations]", argv[0]);
	int iters = argc > 2 ? atoi(argv[2]) : 10000;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		DIE("socketpair");
	pid_t pid = fork();
	/* A parent killed by a time limit must not leave its child spinning. */
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	struct res r = { .sock = pid == 0 ? sv[1] : sv[0] };
	close(pid == 0 ? sv[0] : sv[1]);
	setup(&r, argv[1]);
	run(&r, pid != 0, iters);
	barrier(&r);
	teardown(&r);
	if (pid == 0)
		return 0;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
