/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The built-in vendor memory backends (FI_HMEM_CUDA, FI_HMEM_ZE,
 * FI_HMEM_ROCR), driven
 * through the public API as an application would, over whatever driver
 * library the dynamic linker finds (the tests put a driver test double
 * first on LD_LIBRARY_PATH). IFACE is "cuda", "ze" or "rocr".
 *
 *   vendor_memory IFACE ops [device]
 *       Opens a context of IFACE on the "test" provider and tries each memory
 *       operation once; prints one line "open=R alloc=R dmabuf=R host=R
 *       import=R reimport=R thread=R live=N", R being each call's return value
 *       (after an open that fails, the rest is not tried) and N the
 *       double's ranges left live once the context is closed (-1 without
 *       the double); thread= is an allocation and free from another thread
 *       (the driver's current context is per thread).
 *   vendor_memory IFACE share
 *       Two processes: device memory allocated with FI_XPU_ALLOC_DMABUF in
 *       one, its fd passed over SCM_RIGHTS and imported in the other, which
 *       reads and writes it; then the same fd imported into an
 *       FI_HMEM_SYSTEM context, registered with the shm provider, and
 *       written by the peer with fi_xpu_write; on CUDA, a descriptor open for
 *       reading only (a region a peer shares read-only) imported and read.
 *       Prints "vendor_memory share: ok".
 */
#include "shm_common.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>

#define DEV_SIZE (1u << 20)

static struct fid_xpu_domain *test_domain(void)
{
	struct fi_xpu_info *info, *i;
	struct fid_xpu_domain *dom;
	REQUIRE(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info), 0);
	for (i = info; i && strcmp(i->prov_name, "test") != 0; i = i->next)
		;
	REQUIRE(i != NULL, 1);
	REQUIRE(fi_xpu_domain(i, NULL, &dom, NULL), 0);
	fi_xpu_freeinfo(info);
	return dom;
}

static enum fi_hmem_iface iface;

static int vendor_ctx(struct fid_xpu_domain *dom, uint64_t device, struct fid_xpu_host_ctx **ctx)
{
	struct fi_xpu_ctx_open_attr a = { .iface = iface, .device = device, .ops = NULL };
	return fi_xpu_ctx_open(dom, &a, ctx, NULL);
}

/* What the driver double holds (-1 with another driver): the CUDA
 * double's address ranges, the ZE double's allocations and contexts, the
 * ROCr double's allocations, locks and mappings. */
static int live(void)
{
	const char *lib = iface == FI_HMEM_ZE	  ? "libze_loader.so.1" :
			  iface == FI_HMEM_ROCR ? "libhsa-runtime64.so.1" :
						  "libcuda.so.1";
	void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	int n = 0, k;
	if (!h)
		return -1;
	if (iface != FI_HMEM_CUDA) {
		int (*f)(void) = (int (*)(void))(uintptr_t)dlsym(
			h, iface == FI_HMEM_ZE ? "fake_ze_live" : "fake_hsa_live");
		n = f ? f() : -1;
	} else {
		int (*f)(int) = (int (*)(int))(uintptr_t)dlsym(h, "fake_cuda_live");
		if (!f)
			n = -1;
		for (k = 1; f && k <= 4; k++)
			n += f(k);
	}
	dlclose(h);
	return n;
}

static void *other_thread(void *arg)
{
	struct fid_xpu_host_ctx *ctx = arg;
	void *p;
	int r = fi_xpu_alloc(ctx, 4096, 0, 0, &p, NULL, NULL);
	if (r == 0)
		r = fi_xpu_free(ctx, p);
	return (void *)(intptr_t)r;
}

static int ops(uint64_t device)
{
	pthread_t t;
	void *tr;
	struct fid_xpu_domain *dom = test_domain();
	struct fid_xpu_host_ctx *ctx;
	int r, fd = -1;
	uint64_t off = 99;
	void *a = NULL, *d = NULL, *h = NULL, *imp = NULL, *re = NULL;
	static char host[3 * 4096];

	r = vendor_ctx(dom, device, &ctx);
	printf("open=%d", r);
	if (r) {
		printf("\n");
		EXPECT(fi_xpu_close(&dom->fid), 0);
		return 0;
	}
	r = fi_xpu_alloc(ctx, 100000, 0, 0, &a, &fd, &off);
	printf(" alloc=%d", r);
	if (r == 0) {
		EXPECT(fd, -1);
		memset(a, 0x11, 100000);
	}
	r = fi_xpu_alloc(ctx, 8192, 1 << 20, FI_XPU_ALLOC_DMABUF, &d, &fd, &off);
	printf(" dmabuf=%d", r);
	if (r == 0) {
		EXPECT((uintptr_t)d % (1 << 20), 0);
		EXPECT(fd >= 0, 1);
		/* The fd and offset name this memory: imported back, they alias it. */
		memset(d, 0x33, 8192);
		EXPECT(fi_xpu_import(ctx, NULL, fd, off, 8192,
				     FI_XPU_IMPORT_DMABUF | FI_XPU_IMPORT_DEVICEMAP, &imp), 0);
		if (imp) {
			EXPECT(((unsigned char *)imp)[8191], 0x33);
			((unsigned char *)imp)[0] = 0x44;
			EXPECT(((unsigned char *)d)[0], 0x44);
			EXPECT(fi_xpu_unimport(ctx, imp), 0);
			imp = NULL;
		}
		close(fd);
	}
	r = fi_xpu_alloc(ctx, 5000, 0, FI_XPU_ALLOC_HOST | FI_XPU_ALLOC_DMABUF, &h, &fd, &off);
	printf(" host=%d", r);
	if (r == 0) {
		/* Host memory: an fd the host can map. */
		unsigned char *m;
		memset(h, 0x22, 5000);
		m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
		EXPECT(m != MAP_FAILED && m[4999] == 0x22, 1);
		if (m != MAP_FAILED)
			munmap(m, 8192);
		close(fd);
	}
	r = fi_xpu_import(ctx, host + 100, -1, 0, 5000, FI_XPU_IMPORT_DEVICEMAP, &imp);
	printf(" import=%d", r);
	if (r == 0)
		EXPECT(imp == host + 100, 1);
	/* The same pages again: one registration, two imports. */
	r = fi_xpu_import(ctx, host + 200, -1, 0, 100, 0, &re);
	printf(" reimport=%d", r);
	if (re)
		EXPECT(fi_xpu_unimport(ctx, re), 0);
	REQUIRE(pthread_create(&t, NULL, other_thread, ctx), 0);
	REQUIRE(pthread_join(t, &tr), 0);
	printf(" thread=%d", (int)(intptr_t)tr);
	if (imp)
		EXPECT(fi_xpu_unimport(ctx, imp), 0);
	if (h)
		EXPECT(fi_xpu_free(ctx, h), 0);
	if (d)
		EXPECT(fi_xpu_free(ctx, d), 0);
	/* `a` is left to the context's close. */
	EXPECT(fi_xpu_close(&ctx->fid), 0);
	EXPECT(fi_xpu_close(&dom->fid), 0);
	printf(" live=%d\n", live());
	return 0;
}

static void send_fd(int sock, int fd, uint64_t off)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &off, .iov_len = sizeof(off) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	REQUIRE(sendmsg(sock, &m, 0), (ssize_t)sizeof(off));
}

static int recv_fd(int sock, uint64_t *off)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = off, .iov_len = sizeof(*off) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd = -1;
	REQUIRE(recvmsg(sock, &m, 0), (ssize_t)sizeof(*off));
	c = CMSG_FIRSTHDR(&m);
	REQUIRE(c != NULL && c->cmsg_type == SCM_RIGHTS, 1);
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static struct world W;

static int share(void)
{
	struct fid_xpu_domain *tdom;
	struct fid_xpu_host_ctx *cctx;
	unsigned char *dev = NULL, *dev2 = NULL;
	int fd = -1, sock;
	uint64_t off = 0;
	size_t i;

	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_TAGGED);
	sock = W.rank == 0 ? W.socks[1] : W.sock;
	tdom = test_domain();
	REQUIRE(vendor_ctx(tdom, 0, &cctx), 0);

	/* Device memory of rank 0, shared with rank 1 as a CUDA handle fd. */
	if (W.rank == 0) {
		REQUIRE(fi_xpu_alloc(cctx, DEV_SIZE, 0, FI_XPU_ALLOC_DMABUF, (void **)&dev, &fd,
				     &off), 0);
		for (i = 0; i < DEV_SIZE / 2; i++)
			dev[i] = (unsigned char)(i * 7);
		send_fd(sock, fd, off);
		close(fd);
		barrier(&W);
		for (i = DEV_SIZE / 2; i < DEV_SIZE; i++)
			if (dev[i] != (unsigned char)(i * 13)) {
				EXPECT(dev[i], (unsigned char)(i * 13));
				break;
			}
	} else {
		unsigned char *peer;
		fd = recv_fd(sock, &off);
		REQUIRE(fi_xpu_import(cctx, NULL, fd, off, DEV_SIZE,
				      FI_XPU_IMPORT_DMABUF | FI_XPU_IMPORT_DEVICEMAP, (void **)&peer),
			0);
		close(fd);
		for (i = 0; i < DEV_SIZE / 2; i++)
			if (peer[i] != (unsigned char)(i * 7)) {
				EXPECT(peer[i], (unsigned char)(i * 7));
				break;
			}
		for (i = DEV_SIZE / 2; i < DEV_SIZE; i++)
			peer[i] = (unsigned char)(i * 13);
		EXPECT(fi_xpu_unimport(cctx, peer), 0);
		barrier(&W);
	}

	/* Rank 0 imports its device memory's fd into its FI_HMEM_SYSTEM
	 * context, registers it with shm, and rank 1 writes into it. */
	{
		struct fid_xpu_mr *mr = NULL;
		unsigned char *imp = NULL, src[4096];
		uint64_t card[2] = { 0, 0 }, cards[4];
		struct fi_cq_tagged_entry e;

		if (W.rank == 0) {
			REQUIRE(fi_xpu_alloc(cctx, DEV_SIZE / 4, 0, FI_XPU_ALLOC_DMABUF,
					     (void **)&dev2, &fd, &off), 0);
			memset(dev2, 0, DEV_SIZE / 4);
			REQUIRE(fi_xpu_import(W.ctx, NULL, fd, off, DEV_SIZE / 4,
					      FI_XPU_IMPORT_DMABUF, (void **)&imp), 0);
			close(fd);
			REQUIRE(fi_xpu_mr_reg(W.dom, W.ctx, imp + 4096, 8192, FI_REMOTE_WRITE, 0, 0,
					      0, &mr, NULL), 0);
			REQUIRE(fi_xpu_mr_key(mr, &card[1]), 0);
			card[0] = (uint64_t)(uintptr_t)(imp + 4096);
		}
		allgather(&W, card, cards, sizeof(card));
		if (W.rank == 1) {
			for (i = 0; i < sizeof(src); i++)
				src[i] = (unsigned char)(i ^ 0xa5);
			EXPECT(fi_xpu_write(&W.ep, src, sizeof(src), NULL, 0, &W.raw[0],
					    cards[0] + 100, cards[1], src, 0, FI_XPU_WORK_ITEM), 0);
			EXPECT(next(&W, &e, NULL), 1);
			EXPECT(e.op_context == src, 1);
			EXPECT(e.flags, FI_WRITE | FI_RMA);
		}
		barrier(&W);
		if (W.rank == 0) {
			/* Seen through the CUDA context's own address. */
			for (i = 0; i < sizeof(src); i++)
				if (dev2[4096 + 100 + i] != (unsigned char)(i ^ 0xa5)) {
					EXPECT(dev2[4096 + 100 + i], (unsigned char)(i ^ 0xa5));
					break;
				}
			EXPECT(dev2[4096 + 99], 0);
			EXPECT(dev2[4096 + 100 + sizeof(src)], 0);
			EXPECT(fi_xpu_close(&mr->fid), 0);
			EXPECT(fi_xpu_unimport(W.ctx, imp), 0);
			EXPECT(fi_xpu_free(cctx, dev2), 0);
			EXPECT(fi_xpu_free(cctx, dev), 0);
		}
	}
	/* A region a peer shares read-only (a sealed memfd handed over as a
	 * descriptor open for reading only) imported into a CUDA context:
	 * mapped and pinned for reading only, as the driver requires of pages
	 * mapped read-only; the device reads it. */
	if (iface == FI_HMEM_CUDA) {
		int mfd = memfd_create("ro", MFD_CLOEXEC | MFD_ALLOW_SEALING), rfd;
		unsigned char *ro = NULL;
		char path[64];
		REQUIRE(mfd >= 0, 1);
		REQUIRE(ftruncate(mfd, 8192), 0);
		REQUIRE(pwrite(mfd, "readonly", 8, 4096), 8);
		REQUIRE(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
		rfd = open(path, O_RDONLY | O_CLOEXEC);
		REQUIRE(rfd >= 0, 1);
		EXPECT(fi_xpu_import(cctx, NULL, rfd, 4096, 4096, FI_XPU_IMPORT_DMABUF,
				     (void **)&ro), 0);
		if (ro) {
			EXPECT(memcmp(ro, "readonly", 8), 0);
			EXPECT(fi_xpu_unimport(cctx, ro), 0);
		}
		close(rfd);
		close(mfd);
	}
	EXPECT(fi_xpu_close(&cctx->fid), 0);
	EXPECT(fi_xpu_close(&tdom->fid), 0);
	close_world(&W);
	return finish(&W, "vendor_memory share");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 3 && (strcmp(argv[1], "cuda") == 0 || strcmp(argv[1], "ze") == 0 ||
			  strcmp(argv[1], "rocr") == 0)) {
		iface = strcmp(argv[1], "ze") == 0   ? FI_HMEM_ZE :
			strcmp(argv[1], "rocr") == 0 ? FI_HMEM_ROCR :
						       FI_HMEM_CUDA;
		if (strcmp(argv[2], "ops") == 0)
			return ops(argc > 3 ? strtoull(argv[3], NULL, 0) : 0) || failures;
		if (strcmp(argv[2], "share") == 0)
			return share();
	}
	fprintf(stderr, "usage: vendor_memory cuda|ze|rocr ops [device] | share\n");
	return 2;
}
