/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Helpers of the shm provider's multi-process C tests: fork N processes,
 * set up one endpoint each on the host XPU, exchange addresses and keys
 * through the parent over socketpairs, and barriers the same way.
 */
#ifndef SHM_COMMON_H
#define SHM_COMMON_H

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
static int my_rank;
/* CQ timeout (ms) of the worlds opened from now on. */
static int cq_timeout_ms = 10000;

/* How many times slower than on its own this program runs: the harness
 * sets FI_XPU_TEST_SLOWDOWN under memcheck. Time limits scale by it. */
static inline int time_scale(void)
{
	const char *s = getenv("FI_XPU_TEST_SLOWDOWN");
	int n = s ? atoi(s) : 1;
	return n > 0 ? n : 1;
}

struct world;
/* When set, called by open_world once the world's own objects are bound to
 * the endpoint and before it is enabled: a test binds more objects there. */
static void (*before_enable)(struct world *w);

#define EXPECT(expr, want)                                                                  \
	do {                                                                                \
		long long got_ = (long long)(expr);                                         \
		long long want_ = (long long)(want);                                        \
		if (got_ != want_) {                                                        \
			fprintf(stderr, "[rank %d] %s:%d: %s = %lld (%s), expected %lld\n", \
				my_rank, __FILE__, __LINE__, #expr, got_,                   \
				got_ < 0 && got_ > -1000 ? fi_xpu_strerror((int)got_) : "", \
				want_);                                                     \
			failures++;                                                         \
		}                                                                           \
	} while (0)

#include "expect.h"

#define MAXP 8
#define HEAP_SIZE (1u << 20)

/* The world's XPU context and where its own buffers live: a host XPU by
 * default; device_on_cuda.h makes it an FI_HMEM_CUDA context with the
 * buffers in pinned host memory. */
#ifndef SHM_WORLD_IFACE
#define SHM_WORLD_IFACE FI_HMEM_SYSTEM
#endif
#ifndef SHM_WORLD_ALLOC_FLAGS
#define SHM_WORLD_ALLOC_FLAGS 0
#endif

/* What every rank publishes. */
struct card {
	uint8_t name[64];
	uint64_t base;
	uint64_t key;
	uint64_t ro_base;
	uint64_t ro_key;
};

struct world {
	int rank, n;
	int sock; /* to the parent; the parent's own rank 0 uses socks[] */
	int socks[MAXP];
	struct card cards[MAXP];
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_cntr *hwc, *hrwc, *hrc;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr, *ro_mr;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	struct fid_xpu_cntr wcntr, rwcntr, rcntr;
	uint64_t raw[MAXP];
	fi_addr_t fa[MAXP];
	unsigned char *heap, *ro;
	int format;
};

static void io(int fd, void *buf, size_t len, int out)
{
	unsigned char *p = (unsigned char *)buf;
	while (len) {
		ssize_t r = out ? write(fd, p, len) : read(fd, p, len);
		if (r <= 0) {
			fprintf(stderr, "[rank %d] control channel closed\n", my_rank);
			exit(1);
		}
		p += r;
		len -= (size_t)r;
	}
}

/* Everyone sends `len` bytes, everyone gets all n pieces in rank order. */
static void allgather(struct world *w, const void *mine, void *all, size_t len)
{
	int i;
	if (w->rank == 0) {
		memcpy(all, mine, len);
		for (i = 1; i < w->n; i++)
			io(w->socks[i], (unsigned char *)all + (size_t)i * len, len, 0);
		for (i = 1; i < w->n; i++)
			io(w->socks[i], all, len * (size_t)w->n, 1);
	} else {
		io(w->sock, (void *)(uintptr_t)mine, len, 1);
		io(w->sock, all, len * (size_t)w->n, 0);
	}
}

static void barrier(struct world *w)
{
	char b[MAXP] = { 0 }, m = 1;
	allgather(w, &m, b, 1);
}

/* Opens a domain of the shm provider. */
static void open_shm_domain(struct fid_xpu_domain **dom)
{
	struct fi_xpu_info *info, *i;

	REQUIRE(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info), 0);
	for (i = info; i && strcmp(i->prov_name, "shm") != 0; i = i->next)
		;
	REQUIRE(i != NULL, 1);
	REQUIRE(fi_xpu_domain(i, NULL, dom, NULL), 0);
	fi_xpu_freeinfo(info);
}

static void open_world(struct world *w, int format)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = SHM_WORLD_IFACE, .device = 0, .ops = NULL };
	struct fi_xpu_cq_attr cattr = { .size = 1024, .flags = 0, .format = format,
					.timeout = 0, .xpu_ctx = NULL };
	struct fi_xpu_cntr_attr nattr = { .flags = 0, .xpu_ctx = NULL };
	struct fi_xpu_ep_attr eattr = { 0 };
	struct card mine;
	size_t len = sizeof(mine.name);
	int fd, r;
	uint64_t off;

	w->format = format;
	cattr.timeout = cq_timeout_ms * time_scale();
	memset(&mine, 0, sizeof(mine));
	open_shm_domain(&w->dom);
	REQUIRE(fi_xpu_ctx_open(w->dom, &xattr, &w->ctx, NULL), 0);
	REQUIRE(fi_xpu_av_open(w->dom, NULL, &w->av, NULL), 0);
	cattr.xpu_ctx = w->ctx;
	nattr.xpu_ctx = w->ctx;
	REQUIRE(fi_xpu_cq_open(w->dom, &cattr, &w->hcq, NULL), 0);
	REQUIRE(fi_xpu_cntr_open(w->dom, &nattr, &w->hwc, NULL), 0);
	REQUIRE(fi_xpu_cntr_open(w->dom, &nattr, &w->hrwc, NULL), 0);
	REQUIRE(fi_xpu_cntr_open(w->dom, &nattr, &w->hrc, NULL), 0);
	eattr.xpu_ctx = w->ctx;
	REQUIRE(fi_xpu_endpoint(w->dom, &eattr, &w->hep, NULL), 0);
	REQUIRE(fi_xpu_ep_bind(w->hep, &w->av->fid, 0), 0);
	REQUIRE(fi_xpu_ep_bind(w->hep, &w->hcq->fid, FI_TRANSMIT | FI_RECV), 0);
	REQUIRE(fi_xpu_ep_bind(w->hep, &w->hwc->fid, FI_WRITE), 0);
	REQUIRE(fi_xpu_ep_bind(w->hep, &w->hrc->fid, FI_READ), 0);
	REQUIRE(fi_xpu_ep_bind(w->hep, &w->hrwc->fid, FI_REMOTE_WRITE), 0);
	if (before_enable)
		before_enable(w);
	REQUIRE(fi_xpu_enable(w->hep), 0);
	REQUIRE(fi_xpu_getname(w->hep, mine.name, &len), 0);

	REQUIRE(fi_xpu_alloc(w->ctx, HEAP_SIZE, 0, FI_XPU_ALLOC_DMABUF | SHM_WORLD_ALLOC_FLAGS,
			     (void **)&w->heap, &fd, &off), 0);
	close(fd);
	REQUIRE(fi_xpu_alloc(w->ctx, 4096, 0, FI_XPU_ALLOC_DMABUF | SHM_WORLD_ALLOC_FLAGS,
			     (void **)&w->ro, &fd, &off), 0);
	close(fd);
	memset(w->heap, 0, HEAP_SIZE);
	memset(w->ro, 0x5a, 4096);
	REQUIRE(fi_xpu_mr_reg(w->dom, w->ctx, w->heap, HEAP_SIZE,
			      FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV, 0, 0, 0, &w->mr,
			      NULL), 0);
	REQUIRE(fi_xpu_mr_reg(w->dom, w->ctx, w->ro, 4096, FI_REMOTE_READ, 0, 0, 0, &w->ro_mr, NULL),
		0);
	REQUIRE(fi_xpu_mr_key(w->mr, &mine.key), 0);
	REQUIRE(fi_xpu_mr_key(w->ro_mr, &mine.ro_key), 0);
	mine.base = (uint64_t)(uintptr_t)w->heap;
	mine.ro_base = (uint64_t)(uintptr_t)w->ro;

	allgather(w, &mine, w->cards, sizeof(mine));
	for (r = 0; r < w->n; r++) {
		len = sizeof(w->raw[r]);
		REQUIRE(fi_xpu_av_insert(w->av, w->cards[r].name, 1, &w->fa[r], 0, NULL), 1);
		REQUIRE(w->fa[r], (fi_addr_t)r);
		REQUIRE(fi_xpu_av_lookup(w->av, w->fa[r], &w->raw[r], &len, 0, w->ctx), 0);
	}
	REQUIRE(fi_xpu_export(&w->hep->fid, 0, &w->ep.fid), 0);
	REQUIRE(fi_xpu_export(&w->hcq->fid, 0, &w->cq.fid), 0);
	REQUIRE(fi_xpu_export(&w->hwc->fid, 0, &w->wcntr.fid), 0);
	REQUIRE(fi_xpu_export(&w->hrwc->fid, 0, &w->rwcntr.fid), 0);
	REQUIRE(fi_xpu_export(&w->hrc->fid, 0, &w->rcntr.fid), 0);
	barrier(w);
}

static inline void close_world(struct world *w)
{
	barrier(w);
	EXPECT(fi_xpu_close(&w->mr->fid), 0);
	EXPECT(fi_xpu_close(&w->ro_mr->fid), 0);
	EXPECT(fi_xpu_free(w->ctx, w->heap), 0);
	EXPECT(fi_xpu_free(w->ctx, w->ro), 0);
	EXPECT(fi_xpu_close(&w->hep->fid), 0);
	EXPECT(fi_xpu_close(&w->hcq->fid), 0);
	EXPECT(fi_xpu_close(&w->hwc->fid), 0);
	EXPECT(fi_xpu_close(&w->hrwc->fid), 0);
	EXPECT(fi_xpu_close(&w->hrc->fid), 0);
	EXPECT(fi_xpu_close(&w->av->fid), 0);
	EXPECT(fi_xpu_close(&w->ctx->fid), 0);
	EXPECT(fi_xpu_close(&w->dom->fid), 0);
}

/*
 * An endpoint standing alone in a domain of its own, on a host XPU, with
 * its CQ (FI_CQ_FORMAT_MSG, 64 entries) and, when `with_av`, an AV: the
 * short-lived peers of the connection tests.
 */
struct lone {
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
};

/* Opens, binds, enables and exports it; reads time out after `timeout_ms`. */
static inline void open_lone(struct lone *l, int with_av, int timeout_ms)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_cq_attr cattr = { .size = 64, .flags = 0, .format = FI_CQ_FORMAT_MSG,
					.timeout = timeout_ms, .xpu_ctx = NULL };
	struct fi_xpu_ep_attr eattr = { 0 };

	memset(l, 0, sizeof(*l));
	open_shm_domain(&l->dom);
	REQUIRE(fi_xpu_ctx_open(l->dom, &xattr, &l->ctx, NULL), 0);
	if (with_av)
		REQUIRE(fi_xpu_av_open(l->dom, NULL, &l->av, NULL), 0);
	cattr.xpu_ctx = l->ctx;
	eattr.xpu_ctx = l->ctx;
	REQUIRE(fi_xpu_cq_open(l->dom, &cattr, &l->hcq, NULL), 0);
	REQUIRE(fi_xpu_endpoint(l->dom, &eattr, &l->hep, NULL), 0);
	if (with_av)
		REQUIRE(fi_xpu_ep_bind(l->hep, &l->av->fid, 0), 0);
	REQUIRE(fi_xpu_ep_bind(l->hep, &l->hcq->fid, FI_TRANSMIT | FI_RECV), 0);
	REQUIRE(fi_xpu_enable(l->hep), 0);
	REQUIRE(fi_xpu_export(&l->hep->fid, 0, &l->ep.fid), 0);
	REQUIRE(fi_xpu_export(&l->hcq->fid, 0, &l->cq.fid), 0);
}

static inline void close_lone(struct lone *l)
{
	EXPECT(fi_xpu_close(&l->hep->fid), 0);
	EXPECT(fi_xpu_close(&l->hcq->fid), 0);
	if (l->av)
		EXPECT(fi_xpu_close(&l->av->fid), 0);
	EXPECT(fi_xpu_close(&l->ctx->fid), 0);
	EXPECT(fi_xpu_close(&l->dom->fid), 0);
}

/*
 * Another endpoint in the world's domain, bound to its AV and to a CQ of its
 * own (`size` entries of `format`) that takes its sends only; enabled, with
 * the CQ exported to `cq`.
 */
static inline void open_send_ep(struct world *w, size_t size, int format,
				struct fid_xpu_host_cq **hcq, struct fid_xpu_host_ep **hep,
				struct fid_xpu_cq *cq)
{
	struct fi_xpu_cq_attr qa = { .size = size, .flags = 0, .format = format, .timeout = 0,
				     .xpu_ctx = w->ctx };
	struct fi_xpu_ep_attr ea = { .xpu_ctx = w->ctx };

	REQUIRE(fi_xpu_cq_open(w->dom, &qa, hcq, NULL), 0);
	REQUIRE(fi_xpu_endpoint(w->dom, &ea, hep, NULL), 0);
	REQUIRE(fi_xpu_ep_bind(*hep, &w->av->fid, 0), 0);
	REQUIRE(fi_xpu_ep_bind(*hep, &(*hcq)->fid, FI_TRANSMIT), 0);
	REQUIRE(fi_xpu_enable(*hep), 0);
	REQUIRE(fi_xpu_export(&(*hcq)->fid, 0, &cq->fid), 0);
}

/* Whether the `n` bytes at `p` all hold `v`. */
static inline int intact(const unsigned char *p, size_t n, unsigned char v)
{
	size_t i;
	for (i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* Forks n-1 children; returns in every process with w->rank set. */
static void spawn(struct world *w, int n)
{
	int i, sv[2];
	memset(w, 0, sizeof(*w));
	w->n = n;
	fflush(stdout);
	fflush(stderr);
	for (i = 1; i < n; i++) {
		pid_t p;
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
			exit(2);
		p = fork();
		if (p < 0)
			exit(2);
		if (p == 0) {
			int j;
			for (j = 1; j < i; j++)
				close(w->socks[j]);
			close(sv[0]);
			w->rank = i;
			w->sock = sv[1];
			my_rank = i;
			return;
		}
		close(sv[1]);
		w->socks[i] = sv[0];
	}
	w->rank = 0;
}

/*
 * A child started once this process has a domain open runs in a fresh
 * program: spawn_fresh forks and the child at once execs this program
 * again as "--fresh ROLE ARG FD NAME". By then the library has threads of
 * its own (the shm control thread, which takes the core's object registry
 * lock when it maps or retires a peer's memory), and a lock one of them
 * held at the instant of the fork would stay locked in the child for good:
 * POSIX leaves the child of a multi-threaded process only
 * async-signal-safe calls until it execs. `arg` and the parent's
 * address (NAME, in hex) reach the role; FD is the child's end of a
 * socket pair whose other end spawn_fresh returns in *sock.
 */
struct fresh_role {
	const char *name;
	void (*run)(int arg, int sock);
};

static inline pid_t spawn_fresh(struct world *w, const char *role, int arg, int *sock)
{
	char sarg[24], sfd[24], hex[2 * sizeof(w->cards[0].name) + 1];
	char self[4096];
	char *argv[7];
	int sv[2];
	size_t k;
	ssize_t n;
	pid_t p;

	/*
	 * The program's own path, resolved here rather than exec'ing
	 * "/proc/self/exe": in a process running under an instrumenting
	 * loader (valgrind) that link names the loader's binary, not this
	 * program, and the child would exec the wrong thing. readlink of the
	 * link is answered with the program's path in both cases.
	 */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || (size_t)n >= sizeof(self) - 1)
		exit(2);
	self[n] = '\0';
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		exit(2);
	snprintf(sarg, sizeof(sarg), "%d", arg);
	snprintf(sfd, sizeof(sfd), "%d", sv[1]);
	for (k = 0; k < sizeof(w->cards[0].name); k++)
		snprintf(hex + 2 * k, 3, "%02x", w->cards[0].name[k]);
	argv[0] = (char *)"fresh";
	argv[1] = (char *)"--fresh";
	argv[2] = (char *)role;
	argv[3] = sarg;
	argv[4] = sfd;
	argv[5] = hex;
	argv[6] = NULL;
	fflush(stdout);
	fflush(stderr);
	p = fork();
	if (p < 0)
		exit(2);
	if (p == 0) {
		/* Only async-signal-safe calls until the exec. */
		if (fcntl(sv[1], F_SETFD, 0) == 0)
			execv(self, argv);
		_exit(127);
	}
	close(sv[1]);
	*sock = sv[0];
	return p;
}

/* Called first in main: in a process spawn_fresh started, runs its role
 * (which exits) with the parent's address in w->cards[0].name. */
static inline void run_fresh_role(struct world *w, int argc, char **argv,
				  const struct fresh_role *roles)
{
	size_t k;
	unsigned int b;

	if (argc != 6 || strcmp(argv[1], "--fresh") != 0)
		return;
	memset(w, 0, sizeof(*w));
	for (k = 0; k < sizeof(w->cards[0].name); k++) {
		if (sscanf(argv[5] + 2 * k, "%2x", &b) != 1)
			exit(2);
		w->cards[0].name[k] = (uint8_t)b;
	}
	for (; roles->name; roles++) {
		if (strcmp(roles->name, argv[2]) == 0) {
			roles->run(atoi(argv[3]), atoi(argv[4]));
			exit(3); /* roles exit themselves */
		}
	}
	exit(2);
}

/* Children exit with their failure count; the parent collects them all. */
static inline int finish(struct world *w, const char *name)
{
	int i, st, bad = failures;
	if (w->rank != 0) {
		fflush(stdout);
		_exit(failures ? 1 : 0);
	}
	for (i = 1; i < w->n; i++) {
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	if (bad) {
		fprintf(stderr, "%s: FAILED (%d)\n", name, bad);
		return 1;
	}
	printf("%s: ok\n", name);
	return 0;
}

/* Waits for one completion of the world's CQ, in the CQ's format. */
static inline int64_t next(struct world *w, struct fi_cq_tagged_entry *e, fi_addr_t *src)
{
	int64_t n;
	memset(e, 0, sizeof(*e));
	n = src ? fi_xpu_cq_sreadfrom(&w->cq, e, 1, src, 1, FI_XPU_WORK_ITEM)
		: fi_xpu_cq_sread(&w->cq, e, 1, 1, FI_XPU_WORK_ITEM);
	return n;
}

static inline int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

/*
 * Whether a line of /proc/self/maps is a shared mapping of a memfd (the
 * provider's and its peers' regions), less the core's handle shells (one
 * memfd mapped 64 times), which stay mapped for the life of the process.
 */
static inline int is_region_map(const char *line)
{
	return strstr(line, "/memfd:") != NULL && !strstr(line, "/memfd:fi_xpu-shells");
}

/* How many region mappings (`is_region_map`) this process has. */
static inline int count_memfd_maps(void)
{
	char line[512];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += is_region_map(line);
	fclose(f);
	return n;
}

#endif
