/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Host side shared by the CUDA examples: one process's fi_xpu objects, a
 * registered heap, and the exported device handles in mapped host memory
 * so that kernels can use them. Two processes (parent and forked child)
 * swap addresses over a socketpair.
 *
 * The heap is device memory: an FI_HMEM_CUDA context (FI_HMEM_ROCR under
 * hipcc) with no callbacks, served by the library's backend. Where the provider does not serve
 * device memory (it refuses the context, the allocation or the
 * registration), or FI_XPU_EXAMPLE_MEMORY=pinned asks for it, the
 * examples fall back to an FI_HMEM_SYSTEM context over cuda_mem.h (host
 * memory pinned and mapped into the GPU) and say so on stderr; p->mem
 * names what they got. The host touches the heap only with cudaMemcpy and
 * cudaMemset (peer_get, peer_put), which serve both.
 */
#ifndef FI_XPU_EXAMPLE_CUDA_PEER_H
#define FI_XPU_EXAMPLE_CUDA_PEER_H

#include "../example.h"
#include "cuda_mem.h"

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

/* The device-memory iface of the GPU the examples are built for. */
#if defined(__HIPCC__) || defined(__HIP__)
#define PEER_DEVICE_IFACE FI_HMEM_ROCR
#else
#define PEER_DEVICE_IFACE FI_HMEM_CUDA
#endif

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
	struct example_objs o;
	char *heap;
	size_t heap_len;
	const char *mem; /* "device" or "pinned_host" */
	struct dev_handles *h; /* mapped host memory, device address equal */
	const char *prov;
	int sock;
};

struct card {
	uint8_t name[64];
	uint64_t base;
	uint64_t key;
};

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

/* Closes what peer_open opened, newest first. */
static void peer_close_open(struct peer *p)
{
	if (p->o.mr)
		(void)fi_xpu_close(&p->o.mr->fid);
	if (p->heap)
		(void)fi_xpu_free(p->o.ctx, p->heap);
	if (p->o.hep)
		(void)fi_xpu_close(&p->o.hep->fid);
	if (p->o.hcq)
		(void)fi_xpu_close(&p->o.hcq->fid);
	if (p->o.av)
		(void)fi_xpu_close(&p->o.av->fid);
	if (p->o.ctx)
		(void)fi_xpu_close(&p->o.ctx->fid);
	if (p->o.dom)
		(void)fi_xpu_close(&p->o.dom->fid);
	p->o.mr = NULL;
	p->heap = NULL;
	p->o.hep = NULL;
	p->o.hcq = NULL;
	p->o.av = NULL;
	p->o.ctx = NULL;
	p->o.dom = NULL;
}

#define OPEN_TRY(expr)                                                                   \
	do {                                                                             \
		rc = (int)(expr);                                                        \
		if (rc < 0) {                                                            \
			what = #expr;                                                    \
			goto fail;                                                       \
		}                                                                        \
	} while (0)

/* Opens the domain, a context of `iface` (callbacks only for host
 * memory), AV, CQ, endpoint and a registered heap; 0, or the first
 * failure with everything closed again. */
static int peer_open(struct peer *p, struct fi_xpu_info *i, uint64_t device, enum fi_hmem_iface iface,
		     uint8_t *name, size_t *name_len)
{
	struct fi_xpu_ctx_open_attr xattr = { iface, device,
					      iface == FI_HMEM_SYSTEM ? &cuda_mem_ops : NULL };
	struct fi_xpu_av_attr aattr = { 2, 0 };
	struct fi_xpu_cq_attr cattr;
	struct fi_xpu_ep_attr eattr;
	const char *what = NULL;
	uint64_t off;
	int fd = -1, rc;

	memset(&cattr, 0, sizeof(cattr));
	memset(&eattr, 0, sizeof(eattr));
	OPEN_TRY(fi_xpu_domain(i, NULL, &p->o.dom, NULL));
	OPEN_TRY(fi_xpu_ctx_open(p->o.dom, &xattr, &p->o.ctx, NULL));
	OPEN_TRY(fi_xpu_av_open(p->o.dom, &aattr, &p->o.av, NULL));
	/* Room for one completion per block of the bandwidth kernels. */
	cattr.size = 1024;
	cattr.format = FI_CQ_FORMAT_DATA;
	cattr.timeout = 10000;
	cattr.xpu_ctx = p->o.ctx;
	OPEN_TRY(fi_xpu_cq_open(p->o.dom, &cattr, &p->o.hcq, NULL));
	eattr.xpu_ctx = p->o.ctx;
	OPEN_TRY(fi_xpu_endpoint(p->o.dom, &eattr, &p->o.hep, NULL));
	OPEN_TRY(fi_xpu_ep_bind(p->o.hep, &p->o.av->fid, 0));
	OPEN_TRY(fi_xpu_ep_bind(p->o.hep, &p->o.hcq->fid, FI_TRANSMIT | FI_RECV));
	OPEN_TRY(fi_xpu_enable(p->o.hep));
	OPEN_TRY(fi_xpu_getname(p->o.hep, name, name_len));
	OPEN_TRY(fi_xpu_alloc(p->o.ctx, p->heap_len, 0, FI_XPU_ALLOC_DMABUF, (void **)&p->heap, &fd,
			      &off));
	if (fd >= 0)
		close(fd);
	if (cudaMemset(p->heap, 0, p->heap_len) != cudaSuccess) {
		(void)cudaGetLastError();
		rc = -FI_EIO;
		what = "cudaMemset(heap)";
		goto fail;
	}
	OPEN_TRY(fi_xpu_mr_reg(p->o.dom, p->o.ctx, p->heap, p->heap_len,
			       FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0,
			       &p->o.mr, NULL));
	p->mem = iface == FI_HMEM_SYSTEM ? "pinned_host" : "device";
	return 0;
fail:
	fprintf(stderr, "[%d] %s memory: %s: %s\n", (int)getpid(),
		iface == FI_HMEM_SYSTEM ? "pinned host" : "device", what, fi_xpu_strerror(rc));
	peer_close_open(p);
	return rc;
}
#undef OPEN_TRY

static void peer_setup(struct peer *p, int sock, size_t heap_len)
{
	struct fi_xpu_info *info, *i;
	struct card mine, other;
	size_t len = sizeof(mine.name);
	fi_addr_t fa;
	uint64_t device;
	const char *dev = getenv("FI_XPU_CUDA_DEVICE"), *mem = getenv("FI_XPU_EXAMPLE_MEMORY");

	memset(p, 0, sizeof(*p));
	memset(&mine, 0, sizeof(mine));
	p->sock = sock;
	device = dev ? strtoull(dev, NULL, 0) : 0;
	CUDA_CHECK(cudaSetDevice((int)device));

	CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info));
	p->prov = example_provider_name();
	i = example_provider(info);
	p->heap_len = heap_len;
	if (!(mem && !strcmp(mem, "pinned")) &&
	    peer_open(p, i, device, PEER_DEVICE_IFACE, mine.name, &len) == 0) {
		;
	} else {
		len = sizeof(mine.name);
		if (!(mem && !strcmp(mem, "pinned")))
			fprintf(stderr, "[%d] %s: falling back to pinned host memory\n",
				(int)getpid(), p->prov);
		CHECK(peer_open(p, i, device, FI_HMEM_SYSTEM, mine.name, &len));
	}
	fi_xpu_freeinfo(info);
	CHECK(fi_xpu_mr_key(p->o.mr, &mine.key));
	mine.base = (uint64_t)(uintptr_t)p->heap;
	xfer(sock, &mine, &other, sizeof(mine));

	CUDA_CHECK(cudaHostAlloc((void **)&p->h, sizeof(*p->h), cudaHostAllocMapped));
	memset(p->h, 0, sizeof(*p->h));
	CHECK(fi_xpu_av_insert(p->o.av, other.name, 1, &fa, 0, NULL));
	len = sizeof(p->h->raw);
	CHECK(fi_xpu_av_lookup(p->o.av, fa, &p->h->raw, &len, 0, p->o.ctx));
	CHECK(fi_xpu_export(&p->o.hep->fid, 0, &p->h->ep.fid));
	CHECK(fi_xpu_export(&p->o.hcq->fid, 0, &p->h->cq.fid));
	p->h->peer_base = other.base;
	p->h->peer_key = other.key;
}

/* The host's only ways into the heap (device memory or pinned host
 * memory alike). */
static inline void peer_get(const struct peer *p, size_t off, void *dst, size_t len)
{
	CUDA_CHECK(cudaMemcpy(dst, p->heap + off, len, cudaMemcpyDefault));
}

static inline void peer_put(struct peer *p, size_t off, const void *src, size_t len)
{
	CUDA_CHECK(cudaMemcpy(p->heap + off, src, len, cudaMemcpyDefault));
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
	example_close(&p->o, p->heap);
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
