/* Shared set-up of the two-process ofi tests: one domain, XPU context, AV,
 * registered heap and up to two endpoints (each with its own CQ; one
 * counter for all), addresses swapped over a socket. */
#ifndef OFI_COMMON_H
#define OFI_COMMON_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#define CHECK(expr)                                                                     \
	do {                                                                            \
		int64_t rc_ = (int64_t)(expr);                                          \
		if (rc_ < 0) {                                                          \
			fprintf(stderr, "[%d] %s:%d: %s = %" PRId64 " (%s)\n", (int)getpid(), \
				__FILE__, __LINE__, #expr, rc_, fi_xpu_strerror((int)rc_)); \
			exit(1);                                                        \
		}                                                                       \
	} while (0)
#define EXPECT(cond)                                                                    \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "[%d] %s:%d: expected %s\n", (int)getpid(), __FILE__, \
				__LINE__, #cond);                                       \
			exit(1);                                                        \
		}                                                                       \
	} while (0)
#define EXPECT_EQ(a, b)                                                                 \
	do {                                                                            \
		int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                           \
		if (a_ != b_) {                                                         \
			fprintf(stderr, "[%d] %s:%d: %s = %" PRId64 ", expected %" PRId64 "\n", \
				(int)getpid(), __FILE__, __LINE__, #a, a_, b_);         \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

#define OFI_MAX_EP 2

struct ofi_card {
	uint8_t name[OFI_MAX_EP][64];
	uint64_t base, key;
	uint64_t base2, key2; /* the second registration, when there is one */
};

struct ofi_opts {
	int nep;               /* endpoints, 1 or 2 */
	size_t ring;           /* ring entries (0: default) */
	size_t cq_size;        /* XPU CQ entries */
	int cq_timeout_ms;     /* fi_xpu_cq_sread limit */
	uint32_t threads;      /* progress threads (0: default) */
	size_t heap;           /* registered bytes */
	size_t heap2;          /* bytes of a second registration (0: none) */
	size_t local;          /* bytes of unregistered local memory (0: 64 KiB) */
	uint64_t dflags;       /* fi_xpu_domain_attr.flags */
};

struct ofi_node {
	int sock, rank, nep;
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq[OFI_MAX_EP];
	struct fid_xpu_host_cntr *hcntr;
	struct fid_xpu_host_ep *hep[OFI_MAX_EP];
	struct fid_xpu_mr *mr, *mr2;
	struct fid_xpu_cq cq[OFI_MAX_EP];
	struct fid_xpu_cntr cntr;
	struct fid_xpu_ep ep[OFI_MAX_EP];
	uint64_t raw[OFI_MAX_EP]; /* the peer's endpoints, as fi_xpu_av_lookup gives them */
	uint8_t desc[32];
	unsigned char *heap, *heap2;
	/* Allocated through the context, not registered: where the tests'
	 * local buffers live (the provider refuses private host memory). */
	unsigned char *local;
	size_t heap_len;
	struct ofi_card me, peer;
};

/* With sock -1 the node is its own peer (loopback). */
static inline void ofi_xfer(int sock, const void *out, void *in, size_t len)
{
	if (sock < 0) {
		memcpy(in, out, len);
		return;
	}
	if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) {
		fprintf(stderr, "[%d] the peer is gone\n", (int)getpid());
		exit(1);
	}
}

/* Both sides reach this point (the socket carries one byte each way). */
static inline void ofi_barrier(struct ofi_node *n)
{
	char c = 'b', d;
	ofi_xfer(n->sock, &c, &d, 1);
}

/*
 * Forks the peer, rank 1, which runs `run` on its end of a socket pair and
 * exits 0 when that returns 0 and 1 otherwise; returns this process's end
 * (rank 0), with the peer's pid in *child. With a label, prints
 * "LABEL pids PARENT CHILD" first: the harness removes what the processes
 * it names leave behind.
 */
static inline int ofi_fork_peer(const char *label, int (*run)(int sock, int rank), pid_t *child)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		exit(1);
	fflush(stdout);
	*child = fork();
	if (*child < 0)
		exit(1);
	if (*child == 0) {
		close(sv[0]);
		exit(run(sv[1], 1) ? 1 : 0);
	}
	close(sv[1]);
	if (label) {
		printf("%s pids %d %d\n", label, (int)getpid(), (int)*child);
		fflush(stdout);
	}
	return sv[0];
}

/* Waits for the peer ofi_fork_peer started; whether it exited 0. */
static inline int ofi_peer_ok(pid_t child)
{
	int st = 0;
	return waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The main of a two-process test: runs `run` as rank 0 here and rank 1 in
 * a forked peer (ofi_fork_peer, which prints "LABEL pids ..."); prints
 * "LABEL: ok" ("LABEL MODE: ok" with a mode) and returns 0 when both
 * succeed, else says which rank failed on stderr and returns 1. */
static inline int ofi_pair_main(const char *label, const char *mode,
				int (*run)(int sock, int rank))
{
	pid_t child;
	int sock = ofi_fork_peer(label, run, &child);
	if (run(sock, 0) != 0) {
		fprintf(stderr, "%s: rank 0 FAILED\n", label);
		return 1;
	}
	if (!ofi_peer_ok(child)) {
		fprintf(stderr, "%s: rank 1 FAILED\n", label);
		return 1;
	}
	if (mode)
		printf("%s %s: ok\n", label, mode);
	else
		printf("%s: ok\n", label);
	return 0;
}

/* A read of `cq` that returned `n`: an error entry waiting (-FI_EAVAIL)
 * is read, said and ends the run; any other failure ends it too. */
static inline void ofi_no_error_entry(struct fid_xpu_cq *cq, int64_t n)
{
	struct fi_cq_err_entry err;
	if (n == -FI_EAVAIL) {
		CHECK(fi_xpu_cq_readerr(cq, &err, 0, FI_XPU_WORK_ITEM));
		fprintf(stderr, "[%d] error completion %d (%s)\n", (int)getpid(), err.err,
			fi_xpu_strerror(-err.err));
		exit(1);
	}
	CHECK(n);
}

/* The sides meet, rank 0 runs `initiator` and rank 1 `target`, and they
 * meet again. */
static inline void ofi_roles(struct ofi_node *n, void (*initiator)(struct ofi_node *),
			     void (*target)(struct ofi_node *))
{
	ofi_barrier(n);
	if (n->rank == 0)
		initiator(n);
	else
		target(n);
	ofi_barrier(n);
}

static inline uint64_t ofi_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Opens a domain of the provider named `prov` with `attr` (NULL: the
 * defaults); returns the provider's address length. */
static inline size_t ofi_open_domain(const char *prov, struct fi_xpu_domain_attr *attr,
				     struct fid_xpu_domain **dom)
{
	struct fi_xpu_info *info, *i;
	size_t addrlen;

	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	for (i = info; i && strcmp(i->prov_name, prov) != 0; i = i->next)
		;
	EXPECT(i != NULL);
	addrlen = i->addrlen;
	CHECK(fi_xpu_domain(i, attr, dom, NULL));
	fi_xpu_freeinfo(info);
	return addrlen;
}

/*
 * The objects of a test that makes its own endpoints: a domain of the ofi
 * provider, a context on the host XPU, an AV, a CQ of `cq_size` entries
 * (FI_CQ_FORMAT_TAGGED; reads time out after 10 s) and, when asked, a
 * counter.
 */
struct ofi_objs {
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_cntr *hcntr; /* NULL unless asked for */
};

/* Opens them; returns the provider's address length. */
static inline size_t ofi_open_objs(struct ofi_objs *o, size_t cq_size, int with_cntr)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	size_t addrlen;

	memset(o, 0, sizeof(*o));
	addrlen = ofi_open_domain("ofi", NULL, &o->dom);
	CHECK(fi_xpu_ctx_open(o->dom, &xattr, &o->ctx, NULL));
	CHECK(fi_xpu_av_open(o->dom, NULL, &o->av, NULL));
	{
		struct fi_xpu_cq_attr cattr = { .size = cq_size, .format = FI_CQ_FORMAT_TAGGED,
						.timeout = 10000, .xpu_ctx = o->ctx };
		struct fi_xpu_cntr_attr nattr = { .xpu_ctx = o->ctx };

		CHECK(fi_xpu_cq_open(o->dom, &cattr, &o->hcq, NULL));
		if (with_cntr)
			CHECK(fi_xpu_cntr_open(o->dom, &nattr, &o->hcntr, NULL));
	}
	return addrlen;
}

static inline void ofi_close_objs(struct ofi_objs *o)
{
	CHECK(fi_xpu_close(&o->hcq->fid));
	if (o->hcntr)
		CHECK(fi_xpu_close(&o->hcntr->fid));
	CHECK(fi_xpu_close(&o->av->fid));
	CHECK(fi_xpu_close(&o->ctx->fid));
	CHECK(fi_xpu_close(&o->dom->fid));
}

static inline void ofi_setup(struct ofi_node *n, int sock, int rank, const struct ofi_opts *o)
{
	struct fi_xpu_ctx_open_attr xattr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
	struct fi_xpu_domain_attr dattr;
	struct fi_xpu_cq_attr cattr;
	struct fi_xpu_cntr_attr nattr;
	struct fi_xpu_ep_attr eattr;
	size_t len;
	uint64_t off;
	int fd, e;

	memset(n, 0, sizeof(*n));
	n->sock = sock;
	n->rank = rank;
	n->nep = o->nep ? o->nep : 1;
	/* The ofi provider, unless OFI_COMMON_PROV names another (the tests
	 * that hold every provider to one contract). */
	const char *want = getenv("OFI_COMMON_PROV") ? getenv("OFI_COMMON_PROV") : "ofi";
	memset(&dattr, 0, sizeof(dattr));
	dattr.size = sizeof(dattr);
	dattr.progress_threads = o->threads;
	dattr.flags = o->dflags;
	ofi_open_domain(want, &dattr, &n->dom);
	CHECK(fi_xpu_ctx_open(n->dom, &xattr, &n->ctx, NULL));
	CHECK(fi_xpu_av_open(n->dom, NULL, &n->av, NULL));
	memset(&nattr, 0, sizeof(nattr));
	nattr.xpu_ctx = n->ctx;
	CHECK(fi_xpu_cntr_open(n->dom, &nattr, &n->hcntr, NULL));
	for (e = 0; e < n->nep; e++) {
		memset(&cattr, 0, sizeof(cattr));
		cattr.size = o->cq_size ? o->cq_size : 64;
		cattr.format = FI_CQ_FORMAT_TAGGED;
		cattr.timeout = o->cq_timeout_ms ? o->cq_timeout_ms : 10000;
		cattr.xpu_ctx = n->ctx;
		CHECK(fi_xpu_cq_open(n->dom, &cattr, &n->hcq[e], NULL));
		memset(&eattr, 0, sizeof(eattr));
		eattr.xpu_ctx = n->ctx;
		eattr.tx_size = o->ring;
		CHECK(fi_xpu_endpoint(n->dom, &eattr, &n->hep[e], NULL));
		CHECK(fi_xpu_ep_bind(n->hep[e], &n->av->fid, 0));
		CHECK(fi_xpu_ep_bind(n->hep[e], &n->hcq[e]->fid, FI_TRANSMIT | FI_RECV));
		CHECK(fi_xpu_ep_bind(n->hep[e], &n->hcntr->fid, FI_SEND | FI_WRITE | FI_READ));
		CHECK(fi_xpu_enable(n->hep[e]));
		len = sizeof(n->me.name[e]);
		CHECK(fi_xpu_getname(n->hep[e], n->me.name[e], &len));
		CHECK(fi_xpu_export(&n->hep[e]->fid, 0, &n->ep[e].fid));
		CHECK(fi_xpu_export(&n->hcq[e]->fid, 0, &n->cq[e].fid));
	}
	CHECK(fi_xpu_export(&n->hcntr->fid, 0, &n->cntr.fid));
	CHECK(fi_xpu_alloc(n->ctx, o->local ? o->local : 65536, 0, 0, (void **)&n->local, &fd,
			   &off));
	memset(n->local, 0, o->local ? o->local : 65536);
	n->heap_len = o->heap ? o->heap : 4096;
	CHECK(fi_xpu_alloc(n->ctx, n->heap_len, 0, 0, (void **)&n->heap, &fd, &off));
	memset(n->heap, 0, n->heap_len);
	CHECK(fi_xpu_mr_reg(n->dom, n->ctx, n->heap, n->heap_len,
			    FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &n->mr, NULL));
	CHECK(fi_xpu_mr_key(n->mr, &n->me.key));
	len = sizeof(n->desc);
	CHECK(fi_xpu_mr_desc(n->mr, n->desc, &len, 0, n->ctx));
	n->me.base = (uint64_t)(uintptr_t)n->heap;
	if (o->heap2) {
		CHECK(fi_xpu_alloc(n->ctx, o->heap2, 0, 0, (void **)&n->heap2, &fd, &off));
		memset(n->heap2, 0, o->heap2);
		CHECK(fi_xpu_mr_reg(n->dom, n->ctx, n->heap2, o->heap2,
				    FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &n->mr2, NULL));
		CHECK(fi_xpu_mr_key(n->mr2, &n->me.key2));
		n->me.base2 = (uint64_t)(uintptr_t)n->heap2;
	}
	ofi_xfer(sock, &n->me, &n->peer, sizeof(n->me));
	for (e = 0; e < n->nep; e++) {
		fi_addr_t fa;
		EXPECT(fi_xpu_av_insert(n->av, n->peer.name[e], 1, &fa, 0, NULL) == 1);
		len = sizeof(n->raw[e]);
		CHECK(fi_xpu_av_lookup(n->av, fa, &n->raw[e], &len, 0, n->ctx));
	}
}

static inline void ofi_teardown(struct ofi_node *n)
{
	int e;
	for (e = 0; e < n->nep; e++)
		CHECK(fi_xpu_close(&n->hep[e]->fid));
	CHECK(fi_xpu_close(&n->mr->fid));
	CHECK(fi_xpu_free(n->ctx, n->heap));
	CHECK(fi_xpu_free(n->ctx, n->local));
	if (n->mr2) {
		CHECK(fi_xpu_close(&n->mr2->fid));
		CHECK(fi_xpu_free(n->ctx, n->heap2));
	}
	for (e = 0; e < n->nep; e++)
		CHECK(fi_xpu_close(&n->hcq[e]->fid));
	CHECK(fi_xpu_close(&n->hcntr->fid));
	CHECK(fi_xpu_close(&n->av->fid));
	CHECK(fi_xpu_close(&n->ctx->fid));
	CHECK(fi_xpu_close(&n->dom->fid));
}

#endif
