/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * shm on an FI_HMEM_CUDA context without callbacks, over the CUDA driver
 * double in strict mode; compiled with `-include device_on_cuda.h`.
 *
 *   shm_device_heap placement
 *       Two processes: where each structure of the context lives. Peer-
 *       writable ones (the context heap, the endpoint's inbox block, the
 *       CQ's remote ring, the counter's remote words, and the peer's heap
 *       as imported here) are device memory the host cannot reach; the
 *       device blocks the host initialises (EpDev, CqDev, CntrDev) are not.
 *       Then rank 1 writes into rank 0 with remote CQ data, and sends it a
 *       tagged message: the completion lands in rank 0's remote ring, the
 *       count in its remote counter words and the message in its inbox,
 *       all in device memory; then a put-with-signal into rank 0's device
 *       memory from fi_xpu_alloc (data and signal word there), waited
 *       for in a kernel. Prints "shm_device_heap placement: ok".
 *   shm_device_heap placement-two-gpus
 *       The same with rank 1 on another GPU (the double's
 *       FAKE_CUDA_GPU_ID): each context decides per peer whether the peer
 *       is on its device (logged at debug level by fi_xpu_av_lookup).
 *   shm_device_heap departed
 *       Two processes; rank 1 dies without closing anything. Rank 0 sees
 *       the peer's heap leave its peer map, but the import stays mapped
 *       (a kernel still reads it, no fault) until rank 0's context
 *       closes, and is unmapped then. Prints "shm_device_heap departed: ok".
 *   shm_device_heap host-progress
 *       A domain with FI_XPU_DOMAIN_HOST_PROGRESS: opening a CUDA context
 *       on it fails. Prints "ctx=<rc>".
 *   shm_device_heap register
 *       Registrations on a CUDA context: memory of the context (device
 *       memory from fi_xpu_alloc, pinned host memory) and memory from
 *       cuMemAlloc (through a legacy IPC handle; refused where the driver
 *       gives none). Prints "vmm=<rc> host=<rc> cumemalloc=<rc>".
 *   shm_device_heap ipc
 *       Two processes: rank 0 registers cuMemAlloc memory, rank 1 writes
 *       into it through the legacy IPC handle it was shared by. Prints
 *       "shm_device_heap ipc: ok".
 *   shm_device_heap host-store | legacy-copy
 *       The double's own checks, which must fail the program: a host store
 *       into device memory from fi_xpu_alloc (SIGSEGV), and a synchronous
 *       copy on the legacy stream while a kernel runs (abort). Print
 *       "survived" if they do not.
 */
#include "shm_common.h"

#include <cuda.h>
#include <signal.h>

static struct world W;

/* The magic word a context heap starts with (providers/shm/src/layout.rs). */
#define HEAP_MAGIC 0x6669787075686570ULL

static int (*is_device)(const void *, size_t);

static void *driver_sym(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *f = h ? dlsym(h, name) : NULL;
	REQUIRE(f != NULL, 1);
	return f;
}

static int dev(uint64_t addr, size_t len)
{
	return addr != 0 && is_device((const void *)(uintptr_t)addr, len);
}

/* The peer heap in map `m`: its region id, or 0. */
static int peer_heap(const struct fi_xpu_shm_peer_map *m)
{
	int r;
	for (r = 1; r < FI_XPU_SHM_MAX_REGIONS; r++)
		if (m->size[r] >= (1u << 20) && dev(m->base[r], m->size[r]))
			return r;
	return 0;
}

static int placement(int two_gpus)
{
	const struct fi_xpu_shm_ep_dev *ed;
	const struct fi_xpu_shm_ctx_dev *cd;
	const struct fi_xpu_shm_cq_dev *qd;
	const struct fi_xpu_shm_cntr_dev *kd;
	unsigned char src[4096];
	struct fi_cq_tagged_entry e;
	uint64_t tagged = 0;
	size_t i;

	spawn(&W, 2);
	if (two_gpus && W.rank == 1)
		setenv("FAKE_CUDA_GPU_ID", "other", 1);
	open_world(&W, FI_CQ_FORMAT_DATA);
	is_device = (int (*)(const void *, size_t))(uintptr_t)driver_sym("fake_cuda_device_memory");
	ed = (const struct fi_xpu_shm_ep_dev *)(uintptr_t)W.ep.fid.prov_ctx;
	cd = (const struct fi_xpu_shm_ctx_dev *)(uintptr_t)ed->ctx;
	qd = (const struct fi_xpu_shm_cq_dev *)(uintptr_t)W.cq.fid.prov_ctx;
	kd = (const struct fi_xpu_shm_cntr_dev *)(uintptr_t)W.rwcntr.fid.prov_ctx;
	/* Peer-writable: device memory. */
	EXPECT(dev(cd->heap_base, 64), 1);
	EXPECT(dev(ed->block, sizeof(struct fi_xpu_shm_ep_block) +
				      FI_XPU_SHM_INBOX_SLOTS * FI_XPU_SHM_SLOT_SIZE),
	       1);
	EXPECT(dev(qd->rring, FI_XPU_SHM_CQ_HDR), 1);
	EXPECT(dev(kd->rcntr, sizeof(struct fi_xpu_shm_cntr)), 1);
	/* What the host initialises, and the application's pinned buffers: not. */
	EXPECT(dev((uint64_t)(uintptr_t)ed, sizeof(*ed)), 0);
	EXPECT(dev((uint64_t)(uintptr_t)cd, sizeof(*cd)), 0);
	EXPECT(dev((uint64_t)(uintptr_t)qd, sizeof(*qd)), 0);
	EXPECT(dev((uint64_t)(uintptr_t)kd, sizeof(*kd)), 0);
	EXPECT(dev((uint64_t)(uintptr_t)W.heap, 64), 0);
	/* The peer's heap, imported here (the peer map its raw address
	 * names): device memory too. */
	EXPECT(peer_heap((const struct fi_xpu_shm_peer_map *)(uintptr_t)(
				 (const struct fi_xpu_shm_peer_addr *)(uintptr_t)W.raw[1 - W.rank])
				 ->map) != 0,
	       1);

	/* Through them, between the processes. */
	if (W.rank == 1) {
		for (i = 0; i < sizeof(src); i++)
			src[i] = (unsigned char)(i * 7 + 3);
		EXPECT(fi_xpu_write(&W.ep, src, sizeof(src), NULL, 0x2a, &W.raw[0],
				    W.cards[0].base + 512, W.cards[0].key, src, FI_REMOTE_CQ_DATA,
				    FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
		EXPECT(e.op_context == src, 1);
		tagged = 0x1122334455667788ULL;
		EXPECT(fi_xpu_tsend(&W.ep, &tagged, 8, NULL, 0, &W.raw[0], 0x77, &tagged, 0,
				    FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
		EXPECT(e.op_context == &tagged, 1);
	} else {
		EXPECT(next(&W, &e, NULL), 1);
		EXPECT(e.flags, FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA);
		EXPECT(e.data, 0x2a);
		EXPECT(fi_xpu_cntr_read(&W.rwcntr, FI_XPU_WORK_ITEM), 1);
		for (i = 0; i < sizeof(src); i++)
			if (W.heap[512 + i] != (unsigned char)(i * 7 + 3)) {
				EXPECT(W.heap[512 + i], (unsigned char)(i * 7 + 3));
				break;
			}
		EXPECT(fi_xpu_trecv(&W.ep, &tagged, 8, NULL, NULL, 0x77, 0, &tagged, 0,
				    FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
		EXPECT(e.flags, FI_RECV | FI_TAGGED);
		EXPECT(tagged, 0x1122334455667788ULL);
	}
	/* Put-with-signal into rank 0's device memory: data and signal word
	 * there, the wait in a kernel, the check through the driver. */
	{
		struct fid_xpu_mr *mr = NULL;
		unsigned char *d = NULL, got[4096];
		uint64_t card[2] = { 0, 0 }, cards[4];
		CUresult (*dtoh)(void *, CUdeviceptr, size_t);
		if (W.rank == 0) {
			REQUIRE(fi_xpu_alloc(W.ctx, 65536, 0, 0, (void **)&d, NULL, NULL), 0);
			EXPECT(dev((uint64_t)(uintptr_t)d, 65536), 1);
			REQUIRE(fi_xpu_mr_reg(W.dom, W.ctx, d, 65536, FI_REMOTE_WRITE, 0, 0, 0, &mr,
					      NULL), 0);
			REQUIRE(fi_xpu_mr_key(mr, &card[1]), 0);
			card[0] = (uint64_t)(uintptr_t)d;
		}
		allgather(&W, card, cards, sizeof(card));
		if (W.rank == 1) {
			EXPECT(fi_xpu_put_signal(&W.ep, src, sizeof(src), NULL, &W.raw[0],
						 cards[0] + 4096, cards[1], cards[0], cards[1], 1,
						 FI_XPU_SIGNAL_ADD, src, 0, FI_XPU_WORK_ITEM), 0);
			EXPECT(next(&W, &e, NULL), 1);
			EXPECT(e.op_context == src, 1);
		} else {
			EXPECT(fi_xpu_signal_wait_until(&W.ep, (const uint64_t *)(void *)d,
							FI_XPU_CMP_GE, 1, 10000 * time_scale(),
							FI_XPU_WORK_ITEM), 0);
			dtoh = (CUresult(*)(void *, CUdeviceptr, size_t))(uintptr_t)driver_sym(
				"cuMemcpyDtoH_v2");
			REQUIRE(dtoh(got, (CUdeviceptr)(uintptr_t)(d + 4096), sizeof(got)),
				CUDA_SUCCESS);
			for (i = 0; i < sizeof(got); i++)
				if (got[i] != (unsigned char)(i * 7 + 3)) {
					EXPECT(got[i], (unsigned char)(i * 7 + 3));
					break;
				}
		}
		barrier(&W);
		if (W.rank == 0) {
			EXPECT(fi_xpu_close(&mr->fid), 0);
			EXPECT(fi_xpu_free(W.ctx, d), 0);
		}
	}
	close_world(&W);
	return finish(&W, "shm_device_heap placement");
}

static int departed(void)
{
	const struct fi_xpu_shm_peer_map *m = NULL;
	uint64_t base = 0, size = 0, word;
	int r = 0, waited;

	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_DATA);
	is_device = (int (*)(const void *, size_t))(uintptr_t)driver_sym("fake_cuda_device_memory");
	if (W.rank == 0) {
		/* Rank 1's raw address names its peer map; its heap is read
		 * there before rank 1 may leave. */
		m = (const struct fi_xpu_shm_peer_map *)(uintptr_t)(
			(const struct fi_xpu_shm_peer_addr *)(uintptr_t)W.raw[1])->map;
		r = peer_heap(m);
		REQUIRE(r != 0, 1);
		base = m->base[r];
		size = m->size[r];
	}
	barrier(&W);
	if (W.rank == 1)
		_exit(0); /* gone, closing nothing */
	for (waited = 0; waited < 10000 * time_scale() &&
			 __atomic_load_n(&m->base[r], __ATOMIC_ACQUIRE) != 0;
	     waited++)
		usleep(1000);
	/* Out of the map: device code no longer finds it... */
	EXPECT(m->base[r], 0);
	/* ...but what a kernel still holds stays mapped and readable. */
	EXPECT(dev(base, size), 1);
	doc_kernel(1);
	word = *(volatile const uint64_t *)(uintptr_t)base;
	doc_kernel(0);
	EXPECT(word, HEAP_MAGIC); /* the departed peer's heap header, still there */
	EXPECT(fi_xpu_close(&W.mr->fid), 0);
	EXPECT(fi_xpu_close(&W.ro_mr->fid), 0);
	EXPECT(fi_xpu_free(W.ctx, W.heap), 0);
	EXPECT(fi_xpu_free(W.ctx, W.ro), 0);
	EXPECT(fi_xpu_close(&W.hep->fid), 0);
	EXPECT(fi_xpu_close(&W.hcq->fid), 0);
	EXPECT(fi_xpu_close(&W.hwc->fid), 0);
	EXPECT(fi_xpu_close(&W.hrwc->fid), 0);
	EXPECT(fi_xpu_close(&W.hrc->fid), 0);
	EXPECT(fi_xpu_close(&W.av->fid), 0);
	EXPECT(dev(base, size), 1);
	/* Once the context is closed, nothing of it runs: unmapped. */
	EXPECT(fi_xpu_close(&W.ctx->fid), 0);
	EXPECT(dev(base, size), 0);
	EXPECT(fi_xpu_close(&W.dom->fid), 0);
	return finish(&W, "shm_device_heap departed");
}

static int ipc(void)
{
	CUresult (*cu_alloc)(CUdeviceptr *, size_t);
	CUresult (*cu_free)(CUdeviceptr) = NULL;
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	struct fid_xpu_mr *mr = NULL;
	struct fi_cq_tagged_entry e;
	uint64_t card[2] = { 0, 0 }, cards[4];
	unsigned char src[8192], got[8192];
	CUdeviceptr cm = 0;
	size_t i;

	spawn(&W, 2);
	open_world(&W, FI_CQ_FORMAT_DATA);
	if (W.rank == 0) {
		cu_alloc = (CUresult(*)(CUdeviceptr *, size_t))(uintptr_t)driver_sym("cuMemAlloc_v2");
		REQUIRE(cu_alloc(&cm, 3 * 65536), CUDA_SUCCESS);
		/* A registration that starts inside the allocation. */
		REQUIRE(fi_xpu_mr_reg(W.dom, W.ctx, (void *)(uintptr_t)(cm + 65536), 65536,
				      FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL), 0);
		REQUIRE(fi_xpu_mr_key(mr, &card[1]), 0);
		card[0] = (uint64_t)(cm + 65536);
	}
	allgather(&W, card, cards, sizeof(card));
	if (W.rank == 1) {
		for (i = 0; i < sizeof(src); i++)
			src[i] = (unsigned char)(i * 13 + 1);
		EXPECT(fi_xpu_write(&W.ep, src, sizeof(src), NULL, 0, &W.raw[0], cards[0] + 100,
				    cards[1], src, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), 1);
		EXPECT(e.op_context == src, 1);
		EXPECT(e.flags, FI_WRITE | FI_RMA);
		/* Past the registration: refused by its bounds. */
		EXPECT(fi_xpu_write(&W.ep, src, 64, NULL, 0, &W.raw[0], cards[0] + 65536 - 32,
				    cards[1], src, 0, FI_XPU_WORK_ITEM), 0);
		EXPECT(next(&W, &e, NULL), -FI_EAVAIL);
	}
	barrier(&W);
	if (W.rank == 0) {
		dtoh = (CUresult(*)(void *, CUdeviceptr, size_t))(uintptr_t)driver_sym("cuMemcpyDtoH_v2");
		cu_free = (CUresult(*)(CUdeviceptr))(uintptr_t)driver_sym("cuMemFree_v2");
		REQUIRE(dtoh(got, cm + 65536 + 100, sizeof(got)), CUDA_SUCCESS);
		for (i = 0; i < sizeof(got); i++)
			if (got[i] != (unsigned char)(i * 13 + 1)) {
				EXPECT(got[i], (unsigned char)(i * 13 + 1));
				break;
			}
		EXPECT(fi_xpu_close(&mr->fid), 0);
	}
	close_world(&W);
	if (cu_free)
		EXPECT(cu_free(cm), CUDA_SUCCESS);
	return finish(&W, "shm_device_heap ipc");
}

static struct fid_xpu_domain *shm_domain(uint64_t flags)
{
	struct fi_xpu_info *info, *i;
	struct fi_xpu_domain_attr a = { .size = sizeof(a), .flags = flags };
	struct fid_xpu_domain *dom;
	REQUIRE(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info), 0);
	for (i = info; i && strcmp(i->prov_name, "shm") != 0; i = i->next)
		;
	REQUIRE(i != NULL, 1);
	REQUIRE(fi_xpu_domain(i, &a, &dom, NULL), 0);
	fi_xpu_freeinfo(info);
	return dom;
}

static int host_progress(void)
{
	struct fid_xpu_domain *dom = shm_domain(FI_XPU_DOMAIN_HOST_PROGRESS);
	struct fi_xpu_ctx_open_attr a = { .iface = FI_HMEM_CUDA, .device = 0, .ops = NULL };
	struct fid_xpu_host_ctx *ctx = NULL;
	int rc = fi_xpu_ctx_open(dom, &a, &ctx, NULL);
	printf("ctx=%d\n", rc);
	if (rc == 0)
		EXPECT(fi_xpu_close(&ctx->fid), 0);
	EXPECT(fi_xpu_close(&dom->fid), 0);
	return failures != 0;
}

static int reg(void)
{
	struct fid_xpu_domain *dom = shm_domain(0);
	struct fi_xpu_ctx_open_attr a = { .iface = FI_HMEM_CUDA, .device = 0, .ops = NULL };
	struct fid_xpu_host_ctx *ctx;
	struct fid_xpu_mr *mr[3] = { NULL, NULL, NULL };
	CUresult (*cu_alloc)(CUdeviceptr *, size_t);
	CUresult (*cu_free)(CUdeviceptr);
	CUdeviceptr cm = 0;
	void *d, *h;
	int rc[3], i;
	REQUIRE(fi_xpu_ctx_open(dom, &a, &ctx, NULL), 0);
	cu_alloc = (CUresult(*)(CUdeviceptr *, size_t))(uintptr_t)driver_sym("cuMemAlloc_v2");
	cu_free = (CUresult(*)(CUdeviceptr))(uintptr_t)driver_sym("cuMemFree_v2");
	REQUIRE(fi_xpu_alloc(ctx, 65536, 0, 0, &d, NULL, NULL), 0);
	REQUIRE(fi_xpu_alloc(ctx, 65536, 0, FI_XPU_ALLOC_HOST, &h, NULL, NULL), 0);
	REQUIRE(cu_alloc(&cm, 65536), CUDA_SUCCESS);
	rc[0] = fi_xpu_mr_reg(dom, ctx, d, 65536, FI_REMOTE_WRITE, 0, 0, 0, &mr[0], NULL);
	rc[1] = fi_xpu_mr_reg(dom, ctx, h, 65536, FI_REMOTE_WRITE, 0, 0, 0, &mr[1], NULL);
	rc[2] = fi_xpu_mr_reg(dom, ctx, (void *)(uintptr_t)cm, 65536, FI_REMOTE_WRITE, 0, 0, 0,
			      &mr[2], NULL);
	printf("vmm=%d host=%d cumemalloc=%d\n", rc[0], rc[1], rc[2]);
	for (i = 0; i < 3; i++)
		if (mr[i])
			EXPECT(fi_xpu_close(&mr[i]->fid), 0);
	EXPECT(cu_free(cm), CUDA_SUCCESS);
	EXPECT(fi_xpu_free(ctx, h), 0);
	EXPECT(fi_xpu_free(ctx, d), 0);
	EXPECT(fi_xpu_close(&ctx->fid), 0);
	EXPECT(fi_xpu_close(&dom->fid), 0);
	return failures != 0;
}

static int double_check(int legacy)
{
	struct fid_xpu_domain *dom = shm_domain(0);
	struct fi_xpu_ctx_open_attr a = { .iface = FI_HMEM_CUDA, .device = 0, .ops = NULL };
	struct fid_xpu_host_ctx *ctx;
	unsigned char *p, byte = 1;
	REQUIRE(fi_xpu_ctx_open(dom, &a, &ctx, NULL), 0);
	REQUIRE(fi_xpu_alloc(ctx, 4096, 0, 0, (void **)&p, NULL, NULL), 0);
	if (legacy) {
		CUresult (*htod)(CUdeviceptr, const void *, size_t) =
			(CUresult(*)(CUdeviceptr, const void *, size_t))(uintptr_t)driver_sym(
				"cuMemcpyHtoD_v2");
		void (*begin)(void) = (void (*)(void))(uintptr_t)driver_sym("fake_cuda_kernel_begin");
		/* Outside a kernel the legacy stream is harmless. */
		REQUIRE(htod((CUdeviceptr)(uintptr_t)p, &byte, 1), CUDA_SUCCESS);
		begin();
		htod((CUdeviceptr)(uintptr_t)p, &byte, 1);
	} else {
		*(volatile unsigned char *)p = byte;
	}
	printf("survived\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 2 && strcmp(argv[1], "placement") == 0)
		return placement(0);
	if (argc == 2 && strcmp(argv[1], "placement-two-gpus") == 0)
		return placement(1);
	if (argc == 2 && strcmp(argv[1], "departed") == 0)
		return departed();
	if (argc == 2 && strcmp(argv[1], "host-progress") == 0)
		return host_progress();
	if (argc == 2 && strcmp(argv[1], "ipc") == 0)
		return ipc();
	if (argc == 2 && strcmp(argv[1], "register") == 0)
		return reg();
	if (argc == 2 && strcmp(argv[1], "host-store") == 0)
		return double_check(0);
	if (argc == 2 && strcmp(argv[1], "legacy-copy") == 0)
		return double_check(1);
	fprintf(stderr, "usage: shm_device_heap placement|placement-two-gpus|departed|host-progress|register|ipc|host-store|legacy-copy\n");
	return 2;
}
