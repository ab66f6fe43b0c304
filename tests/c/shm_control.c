/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The shm provider's control socket against connections that do not play
 * by the rules:
 *
 * - silent: SILENT connections that never send a byte stay open while a
 *   real peer connects; its fi_xpu_av_insert must not wait behind them
 *   (it did: each stalled the accept loop for up to 10 s). The insert's
 *   time is printed and must stay under a generous 5 s.
 * - forged regions: a peer that authenticates properly (it has the
 *   address, so it knows the secret) but shares memfds that can shrink, or
 *   that are shorter than it claims: none of them is mapped, so its later
 *   ftruncate cannot raise SIGBUS here; a properly sealed one is mapped,
 *   and released once that peer is gone.
 *
 * The peer side of the control protocol is spoken raw here, from the wire
 * format of providers/shm/src/wire.rs (48-byte SOCK_SEQPACKET records:
 * magic, kind, a, b, c, secret).
 * Prints "shm_control: ok".
 */
#include "shm_common.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <time.h>

#define SILENT 300
#define WIRE_MAGIC 0x46585348u
enum { HELLO = 1, WELCOME = 2, REGION = 4, DONE = 6 };

static struct world W;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The control socket of the endpoint whose address is `name`. */
static int ctl_connect(const uint8_t *name, int nonblock)
{
	struct sockaddr_un a;
	uint32_t pid;
	uint64_t nonce;
	socklen_t len;
	int s, n;

	memcpy(&pid, name + 24, 4);
	memcpy(&nonce, name + 32, 8);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "fi_xpu_shm.%u.%016llx", pid,
		     (unsigned long long)nonce);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	REQUIRE(s >= 0, 1);
	if (connect(s, (struct sockaddr *)&a, len) != 0) {
		int e = errno;
		close(s);
		errno = e;
		return -1;
	}
	return s;
}

static void wire_send(int s, uint32_t kind, uint64_t a, uint64_t b, uint64_t c,
		      const uint8_t *secret, int fd)
{
	unsigned char rec[48];
	char ctrl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = rec, .iov_len = sizeof(rec) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	uint32_t magic = WIRE_MAGIC;

	memset(rec, 0, sizeof(rec));
	memcpy(rec, &magic, 4);
	memcpy(rec + 4, &kind, 4);
	memcpy(rec + 8, &a, 8);
	memcpy(rec + 16, &b, 8);
	memcpy(rec + 24, &c, 8);
	if (secret)
		memcpy(rec + 32, secret, 16);
	if (fd >= 0) {
		struct cmsghdr *cm;
		memset(ctrl, 0, sizeof(ctrl));
		m.msg_control = ctrl;
		m.msg_controllen = sizeof(ctrl);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	REQUIRE(sendmsg(s, &m, MSG_NOSIGNAL), (long)sizeof(rec));
}

/* Kind of the next record; descriptors that come with it are closed. */
static uint32_t wire_recv(int s)
{
	unsigned char rec[64];
	char ctrl[CMSG_SPACE(sizeof(int) * 4)] = { 0 };
	struct iovec iov = { .iov_base = rec, .iov_len = sizeof(rec) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl,
			    .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *cm;
	uint32_t kind;
	ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);

	REQUIRE(n, 48);
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
			close(fd);
		}
	}
	memcpy(&kind, rec + 4, 4);
	return kind;
}

static int sealed_memfd(const char *name, off_t size, int seals)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	REQUIRE(fd >= 0, 1);
	REQUIRE(ftruncate(fd, size), 0);
	if (seals)
		REQUIRE(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* Mappings in this process of memfds whose name starts with `prefix`. */
static int maps_of(const char *prefix)
{
	char line[512], pat[64];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	snprintf(pat, sizeof(pat), "/memfd:%s", prefix);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, pat) != NULL;
	fclose(f);
	return n;
}

/* A real peer: connects while the silent connections are open, times its
 * insert, sends one message and reports the time (in microseconds). */
static void real_peer(int arg, int sock)
{
	struct lone l;
	struct fi_cq_msg_entry e;
	uint64_t raw, v = 0x5eed, us;
	size_t len = sizeof(raw);
	fi_addr_t fa;
	double t0;

	(void)arg;
	my_rank = 1;
	alarm(30); /* on a control thread that serializes, fail rather than hang */
	open_lone(&l, 1, 10000);
	t0 = now_s();
	REQUIRE(fi_xpu_av_insert(l.av, W.cards[0].name, 1, &fa, 0, NULL), 1);
	us = (uint64_t)((now_s() - t0) * 1e6);
	REQUIRE(fi_xpu_av_lookup(l.av, fa, &raw, &len, 0, l.ctx), 0);
	EXPECT(fi_xpu_send(&l.ep, &v, 8, NULL, 0, &raw, &v, 0, FI_XPU_WORK_ITEM), 0);
	EXPECT(fi_xpu_cq_sread(&l.cq, &e, 1, 1, FI_XPU_WORK_ITEM), 1);
	io(sock, &us, sizeof(us), 1);
	close_lone(&l);
	_exit(failures ? 1 : 0);
}

static void silent_connections(void)
{
	struct fi_cq_tagged_entry e;
	int silent[SILENT], n = 0, tries, i, sock, st;
	uint64_t v = 0, us = ~0ULL;
	pid_t p;

	/* Open them all; a control thread that stalls on each leaves the
	 * backlog full, and the bounded retries run out. */
	for (tries = 0; n < SILENT && tries < 3000; tries++) {
		int s = ctl_connect(W.cards[0].name, 1);
		if (s >= 0)
			silent[n++] = s;
		else if (errno == EAGAIN)
			usleep(1000);
		else
			REQUIRE(errno, EAGAIN);
	}
	EXPECT(n, SILENT);
	EXPECT(fi_xpu_recv(&W.ep, &v, sizeof(v), NULL, NULL, &v, 0, FI_XPU_WORK_ITEM), 0);
	p = spawn_fresh(&W, "real_peer", 0, &sock);
	io(sock, &us, sizeof(us), 0);
	printf("shm_control: fi_xpu_av_insert with %d silent connections open: %.1f ms\n", n,
	       (double)us / 1000.0);
	EXPECT(us < 5000000, 1);
	EXPECT(next(&W, &e, NULL), 1);
	EXPECT(v, 0x5eed);
	close(sock);
	EXPECT(waitpid(p, &st, 0), p);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, 1);
	for (i = 0; i < n; i++)
		close(silent[i]);
}

/* The forging peer: authenticates, shares three memfds, finishes the
 * handshake, then truncates what it can once the parent looked. */
static void forger(int arg, int sock)
{
	int s, unsealed, shortfd, good;
	uint8_t secret[16];
	char c;

	(void)arg;
	my_rank = 2;
	alarm(30);
	memcpy(secret, W.cards[0].name + 40, 16);
	s = ctl_connect(W.cards[0].name, 0);
	REQUIRE(s >= 0, 1);
	wire_send(s, HELLO, 0x1234, 0, 0, secret, -1);
	REQUIRE(wire_recv(s), WELCOME);
	unsealed = sealed_memfd("forged_unsealed", 1 << 20, 0);
	shortfd = sealed_memfd("forged_short", 4096, F_SEAL_SHRINK | F_SEAL_GROW);
	good = sealed_memfd("forged_sealed", 1 << 20, F_SEAL_SHRINK | F_SEAL_GROW);
	/* REGION: a = region id, b = size, c = offset. */
	wire_send(s, REGION, 1, 1 << 20, 0, NULL, unsealed);
	wire_send(s, REGION, 2, 1 << 20, 0, NULL, shortfd);
	wire_send(s, REGION, 3, 1 << 20, 0, NULL, good);
	wire_send(s, REGION, 4, 4096, UINT64_MAX - 100, NULL, good);
	wire_send(s, DONE, 0, 0, 0, NULL, -1);
	while (wire_recv(s) != DONE)
		;
	io(sock, "h", 1, 1); /* handshake done */
	io(sock, &c, 1, 0); /* the parent looked */
	EXPECT(ftruncate(unsealed, 0), 0);
	EXPECT(ftruncate(good, 0), -1);
	io(sock, "t", 1, 1);
	io(sock, &c, 1, 0);
	_exit(failures ? 1 : 0);
}

static void forged_regions(void)
{
	int sock, st, i;
	pid_t p;
	char c;

	p = spawn_fresh(&W, "forger", 0, &sock);
	io(sock, &c, 1, 0);
	/* The handshake is done when the forger hears DONE: every region it
	 * sent before its own DONE has been handled. */
	EXPECT(maps_of("forged_unsealed"), 0);
	EXPECT(maps_of("forged_short"), 0);
	EXPECT(maps_of("forged_sealed"), 1);
	io(sock, "l", 1, 1);
	io(sock, &c, 1, 0);
	/* Still alive after the truncation; let the forger go, and its one
	 * mapped region goes with it. */
	io(sock, "x", 1, 1);
	EXPECT(waitpid(p, &st, 0), p);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, 1);
	close(sock);
	for (i = 0; i < 500 && maps_of("forged_sealed") != 0; i++)
		usleep(10000);
	EXPECT(maps_of("forged_sealed"), 0);
}

int main(int argc, char **argv)
{
	static const struct fresh_role roles[] = {
		{ "real_peer", real_peer },
		{ "forger", forger },
		{ NULL, NULL },
	};

	run_fresh_role(&W, argc, argv, roles);
	spawn(&W, 1);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	silent_connections();
	forged_regions();
	close_world(&W);
	return finish(&W, "shm_control");
}
