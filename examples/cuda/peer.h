/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Host side shared by the CUDA examples: one process's fi_xpu objects on
 * an FI_HMEM_SYSTEM context whose memory (cuda_mem.h) is host memory
 * pinned and mapped into the GPU (the shm provider shares sealed memfds
 * and serves FI_HMEM_SYSTEM only; ofi over tcp has no FI_HMEM), a registered heap,
 * and the exported device handles in mapped host memory so that kernels
 * can use them. Two processes (parent and forked child) swap addresses
 * over a socketpair.
 */
#ifndef FI_XPU_EXAMPLE_CUDA_PEER_H
#define FI_XPU_EXAMPLE_CUDA_PEER_H

#include "cuda_mem.h"

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define CHECK(expr)                                                                  \
	do {                                                                         \
		int rc_ = (int)(expr);                                               \
		if (rc_ < 0) {                                                       \
			fprintf(stderr, "[%d] %s:%d: %s failed: %s\n", (int)getpid(), \
				__FILE__, __LINE__, #expr, fi_xpu_strerror(rc_));    \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

#define CUDA_CHECK(expr)                                                             \
	do {                                                                         \
		cudaError_t e_ = (expr);                                             \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "[%d] %s:%d: %s: %s\n", (int)getpid(),        \
				__FILE__, __LINE__, #expr, cudaGetErrorString(e_));  \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

/* What kernels see: the exported handles and the peer's coordinates. */
struct dev_handles {
	struct fid_xpu_ep ep;
	struct fid_xpu_cq cq;
	uint64_t raw;       /* peer address, as fi_xpu_av_lookup gave it */
	uint64_t peer_base; /* peer heap address */
	uint64_t peer_key;  /* peer heap key */
	int rc;             /* first failure seen by a kernel, 0 if none */
	int line;           /* its source line */
};

struct peer {
	struct fid_xpu_domain *dom;
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_av *av;
	struct fid_xpu_host_cq *hcq;
	struct fid_xpu_host_ep *hep;
	struct fid_xpu_mr *mr;
	char *heap;
	size_t heap_len;
	struct dev_handles *h; /* mapped host memory, device address equal */
	const char *prov;
	int sock;
};

struct card {
	uint8_t name[64];
	uint64_t base;
	uint64_t key;
};

static void xfer(int sock, const void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len || read(sock, in, len) != (ssize_t)len) {
		perror("socketpair");
		exit(1);
	}
}

static void sync_peer(int sock)
{
	char c = 's';
	xfer(sock, &c, &c, 1);
}

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void peer_setup(struct peer *p, int sock, size_t heap_len)
{
	struct fi_xpu_info *info, *i;
	struct fi_xpu_ctx_open_attr xattr = { FI_HMEM_SYSTEM, 0, &cuda_mem_ops };
	struct fi_xpu_av_attr aattr = { 2, 0 };
	struct fi_xpu_cq_attr cattr;
	struct fi_xpu_ep_attr eattr;
	struct card mine, other;
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	uint64_t off;
	int fd;
	const char *dev = getenv("FI_XPU_CUDA_DEVICE");

	memset(p, 0, sizeof(*p));
	memset(&mine, 0, sizeof(mine));
	memset(&cattr, 0, sizeof(cattr));
	memset(&eattr, 0, sizeof(eattr));
	p->sock = sock;
	xattr.device = dev ? strtoull(dev, NULL, 0) : 0;
	CUDA_CHECK(cudaSetDevice((int)xattr.device));

	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	p->prov = getenv("FI_XPU_PROVIDER");
	if (!p->prov || !*p->prov || strchr(p->prov, ',') || p->prov[0] == '^')
		p->prov = "shm";
	for (i = info; i && strcmp(i->prov_name, p->prov) != 0; i = i->next)
		;
	if (!i) {
		fprintf(stderr, "the %s provider is not available\n", p->prov);
		exit(1);
	}
	CHECK(fi_xpu_domain(i, NULL, &p->dom, NULL));
	fi_xpu_freeinfo(info);
	CHECK(fi_xpu_ctx_open(p->dom, &xattr, &p->ctx, NULL));
	CHECK(fi_xpu_av_open(p->dom, &aattr, &p->av, NULL));
	cattr.size = 256;
	cattr.format = FI_CQ_FORMAT_DATA;
	cattr.timeout = 10000;
	cattr.xpu_ctx = p->ctx;
	CHECK(fi_xpu_cq_open(p->dom, &cattr, &p->hcq, NULL));
	eattr.xpu_ctx = p->ctx;
	CHECK(fi_xpu_endpoint(p->dom, &eattr, &p->hep, NULL));
	CHECK(fi_xpu_ep_bind(p->hep, &p->av->fid, 0));
	CHECK(fi_xpu_ep_bind(p->hep, &p->hcq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_xpu_enable(p->hep));
	CHECK(fi_xpu_getname(p->hep, mine.name, &len));

	p->heap_len = heap_len;
	CHECK(fi_xpu_alloc(p->ctx, heap_len, 0, FI_XPU_ALLOC_DMABUF, (void **)&p->heap, &fd,
			   &off));
	close(fd);
	memset(p->heap, 0, heap_len);
	CHECK(fi_xpu_mr_reg(p->dom, p->ctx, p->heap, heap_len,
			    FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &p->mr,
			    NULL));
	CHECK(fi_xpu_mr_key(p->mr, &mine.key));
	mine.base = (uint64_t)(uintptr_t)p->heap;
	xfer(sock, &mine, &other, sizeof(mine));

	CUDA_CHECK(cudaHostAlloc((void **)&p->h, sizeof(*p->h), cudaHostAllocMapped));
	memset(p->h, 0, sizeof(*p->h));
	CHECK(fi_xpu_av_insert(p->av, other.name, 1, &fa, 0, NULL));
	len = sizeof(p->h->raw);
	CHECK(fi_xpu_av_lookup(p->av, fa, &p->h->raw, &len, 0, p->ctx));
	CHECK(fi_xpu_export(&p->hep->fid, 0, &p->h->ep.fid));
	CHECK(fi_xpu_export(&p->hcq->fid, 0, &p->h->cq.fid));
	p->h->peer_base = other.base;
	p->h->peer_key = other.key;
}

/* Waits for a kernel and fails the process if it recorded an error. */
static void peer_join(struct peer *p, const char *what)
{
	CUDA_CHECK(cudaGetLastError());
	CUDA_CHECK(cudaDeviceSynchronize());
	if (p->h->rc < 0) {
		fprintf(stderr, "[%d] %s: kernel line %d failed: %s\n", (int)getpid(), what,
			p->h->line, fi_xpu_strerror(p->h->rc));
		exit(1);
	}
}

static void peer_teardown(struct peer *p)
{
	CHECK(fi_xpu_close(&p->mr->fid));
	CHECK(fi_xpu_free(p->ctx, p->heap));
	CHECK(fi_xpu_close(&p->hep->fid));
	CHECK(fi_xpu_close(&p->hcq->fid));
	CHECK(fi_xpu_close(&p->av->fid));
	CHECK(fi_xpu_close(&p->ctx->fid));
	CHECK(fi_xpu_close(&p->dom->fid));
	(void)cudaFreeHost(p->h);
}

/* Device side: records the first failure for the host to report. */
#define DCHECK(h, expr)                                    \
	do {                                               \
		int64_t r_ = (int64_t)(expr);              \
		if (r_ < 0 && (h)->rc == 0) {              \
			(h)->rc = (int)r_;                 \
			(h)->line = __LINE__;              \
		}                                          \
		if (r_ < 0)                                \
			return;                            \
	} while (0)

/* Spins on the CQ until one entry arrives (sread blocks for cattr.timeout). */
__device__ static int64_t dev_wait_one(struct dev_handles *h, struct fi_cq_data_entry *e)
{
	int64_t n;
	do
		n = fi_xpu_cq_sread(&h->cq, e, 1, 1, FI_XPU_WORK_ITEM);
	while (n == -FI_EAGAIN);
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		fi_xpu_cq_readerr(&h->cq, &err, 0, FI_XPU_WORK_ITEM);
		return -(int64_t)err.err;
	}
	return n;
}

/* Forks the peer; returns this process's rank (0 parent, 1 child). Rank 0
 * uses GPU $FI_XPU_CUDA_DEVICE (default 0), rank 1 $FI_XPU_CUDA_PEER_DEVICE
 * if set, else the same. */
static int fork_pair(int *sock, pid_t *child)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		perror("socketpair");
		exit(1);
	}
	fflush(stdout);
	*child = fork();
	if (*child < 0) {
		perror("fork");
		exit(1);
	}
	close(sv[*child == 0 ? 0 : 1]);
	*sock = sv[*child == 0 ? 1 : 0];
	/* Rank 1 on another GPU when FI_XPU_CUDA_PEER_DEVICE names one. */
	if (*child == 0 && getenv("FI_XPU_CUDA_PEER_DEVICE"))
		setenv("FI_XPU_CUDA_DEVICE", getenv("FI_XPU_CUDA_PEER_DEVICE"), 1);
	return *child == 0;
}

static int join_child(pid_t child)
{
	int status = 0;
	waitpid(child, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

#endif
