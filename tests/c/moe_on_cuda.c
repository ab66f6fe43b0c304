/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The host side of examples/moe/moe.cu, on the CUDA driver double in
 * strict mode (compiled with `-include device_on_cuda.h`): two forked
 * ranks join a world of FI_HMEM_CUDA contexts on shm, without callbacks,
 * so the symmetric window is "device" memory the host cannot touch. As in
 * moe.cu, the host builds the layout and the inputs in host memory and
 * copies them in (world.h's write hook), every phase and the reset of the
 * receive-side words run as kernels, and the window is copied out to be
 * checked byte by byte. The world's and the window's tables, which
 * kernels read on every operation, are device memory too.
 *
 *   moe_on_cuda     prints "moe_on_cuda: ok" on rank 0 when every byte
 *                   of two rounds checked out on both ranks
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../../examples/moe/moe.h"

#include <cuda.h>

#define ROUNDS 2

typedef CUresult (*copy_in_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*copy_out_fn)(void *, CUdeviceptr, size_t);
typedef int (*is_device_fn)(const void *, size_t);

/* An entry point of the driver double, which the library loaded when the
 * world's first CUDA context opened. */
static void *driver_sym(const char *name)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), *f = h ? dlsym(h, name) : NULL;
	if (!f) {
		fprintf(stderr, "moe_on_cuda: %s not found in the driver\n", name);
		exit(1);
	}
	return f;
}

static void copy_in(void *dst, const void *src, size_t len)
{
	copy_in_fn f = (copy_in_fn)(uintptr_t)driver_sym("cuMemcpyHtoD_v2");
	if (f((CUdeviceptr)(uintptr_t)dst, src, len) != CUDA_SUCCESS) {
		fprintf(stderr, "moe_on_cuda: cuMemcpyHtoD failed\n");
		exit(1);
	}
}

static void copy_out(void *dst, const void *src, size_t len)
{
	copy_out_fn f = (copy_out_fn)(uintptr_t)driver_sym("cuMemcpyDtoH_v2");
	if (f(dst, (CUdeviceptr)(uintptr_t)src, len) != CUDA_SUCCESS) {
		fprintf(stderr, "moe_on_cuda: cuMemcpyDtoH failed\n");
		exit(1);
	}
}

typedef void (*phase_fn)(const struct moe_args *, uint32_t, uint32_t);

struct kernel {
	phase_fn phase;
	const struct moe_args *a;
};

static void run_phase(void *arg)
{
	const struct kernel *k = (const struct kernel *)arg;
	const struct fi_xpu_host_item *it = fi_xpu_host_item();
	k->phase(k->a, it->group_id * it->group_size + it->local_id,
		 it->num_groups * it->group_size);
}

/* One kernel (bracketed by device_on_cuda.h), then the layout's error
 * word, copied out. */
static void launch(int rank, phase_fn phase, const struct moe_args *a, const char *what)
{
	struct fi_xpu_host_launch_attr la;
	struct kernel k = { phase, a };
	struct moe_layout l;
	memset(&la, 0, sizeof(la));
	la.num_groups = 2;
	la.group_size = 4;
	WCHECK(fi_xpu_host_launch(&la, run_phase, &k));
	copy_out(&l, a->l, sizeof(l));
	if (l.err) {
		fprintf(stderr, "[%d] %s failed at moe.h:%d: %s\n", rank, what, l.err_line,
			fi_xpu_strerror(l.err));
		exit(1);
	}
}

int main(void)
{
	struct fi_xpu_ctx_open_attr dev = { FI_HMEM_CUDA, 0, NULL };
	struct moe_layout plan;
	struct moe_args a;
	struct world w;
	unsigned char *host;
	long bad = 0, bads[2];
	int round, rc;

	memset(&w, 0, sizeof(w));
	w.prov = "shm";
	w.write = copy_in;
	world_spawn(&w, 2);
	moe_plan(&plan, 2, 8, 64, 2, 2, 0);
	rc = world_try_open(&w, plan.size, &dev);
	if (rc) {
		fprintf(stderr, "[%d] a world of FI_HMEM_CUDA contexts: %s\n", w.rank,
			fi_xpu_strerror(rc));
		return 1;
	}
	/* The window, and the world's and the window's tables that kernels
	 * read on every operation, are device memory. */
	{
		is_device_fn is_device = (is_device_fn)(uintptr_t)driver_sym("fake_cuda_device_memory");
		struct world_dev hdr;
		copy_out(&hdr, w.dev, sizeof(hdr));
		if (!is_device(w.sym, plan.size) || !is_device(hdr.world, sizeof(*hdr.world)) ||
		    !is_device(hdr.win, sizeof(*hdr.win))) {
			fprintf(stderr, "[%d] window %d, world table %d, window table %d: not all device memory\n",
				w.rank, is_device(w.sym, plan.size), is_device(hdr.world, sizeof(*hdr.world)),
				is_device(hdr.win, sizeof(*hdr.win)));
			return 1;
		}
	}
	host = (unsigned char *)calloc(1, plan.size);
	if (!host)
		return 1;
	memcpy(host + WORLD_HDR, &plan, sizeof(plan));
	moe_fill(&plan, host, 2, (uint32_t)w.rank);
	copy_in(w.sym + WORLD_HDR, host + WORLD_HDR, plan.size - WORLD_HDR);
	a.w = w.dev;
	a.sym = w.sym;
	a.l = (struct moe_layout *)(void *)(w.sym + WORLD_HDR);
	for (round = 0; round < ROUNDS; round++) {
		launch(w.rank, moe_reset_words, &a, "reset");
		world_barrier(&w);
		launch(w.rank, moe_dispatch_send, &a, "dispatch_send");
		launch(w.rank, moe_dispatch_signal, &a, "dispatch_signal");
		launch(w.rank, moe_expert_combine, &a, "expert_combine");
		launch(w.rank, moe_combine_signal, &a, "combine_signal");
		launch(w.rank, moe_combine_reduce, &a, "combine_reduce");
		world_barrier(&w);
	}
	copy_out(host, w.sym, plan.size);
	bad = moe_verify(&plan, host, 2, (uint32_t)w.rank);
	world_allgather(&w, &bad, bads, sizeof(bad));
	world_close(&w);
	free(host);
	if (w.rank != 0)
		return bad != 0;
	rc = world_join(&w);
	if (rc || bads[0] || bads[1]) {
		fprintf(stderr, "moe_on_cuda: %ld and %ld mismatches, ranks %s\n", bads[0], bads[1],
			rc ? "failed" : "ok");
		return 1;
	}
	printf("moe_on_cuda: ok\n");
	return 0;
}
