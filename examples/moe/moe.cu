/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * MoE dispatch and combine (moe.h) as CUDA kernels: the same device code
 * as moe.c, each phase a kernel over a grid of work items, on an
 * FI_HMEM_SYSTEM world (fi_xpu_world(3)) whose memory comes from
 * ../cuda/cuda_mem.h (pinned host memory the GPU maps). All ranks use GPU 0 unless
 * CUDA_VISIBLE_DEVICES says otherwise.
 *
 *   moe_cuda [-n ranks] [-p shm|ofi] [-f tcp|shm] [-T tokens] [-8] [-i iters]
 *
 * Rank 0 ends with the line
 *   RESULT moe-n<ranks> <provider> ok <microseconds per dispatch+combine> -
 * (FAIL instead of ok when any rank found a wrong byte or failed).
 *
 * Build with -fmad=false: the host checks every result byte with the same
 * arithmetic, which a fused multiply-add would round differently.
 */
#include "../cuda/cuda_mem.h"
#include "moe.h"

#include <getopt.h>

#define PHASE(name)                                                                  \
	__global__ void k_##name(struct moe_args a)                                  \
	{                                                                            \
		moe_##name(&a, blockIdx.x * blockDim.x + threadIdx.x,                \
			   gridDim.x * blockDim.x);                                  \
	}
PHASE(dispatch_send)
PHASE(dispatch_signal)
PHASE(expert_combine)
PHASE(combine_signal)
PHASE(combine_reduce)

static void sync_or_die(const struct moe_args *a, const char *what)
{
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		fprintf(stderr, "[%u] %s: %s\n", a->w->rank, what, cudaGetErrorString(e));
		exit(1);
	}
	if (a->l->err) {
		fprintf(stderr, "[%u] %s failed at moe.h:%d: %s\n", a->w->rank, what, a->l->err_line,
			fi_xpu_strerror(a->l->err));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct world w;
	struct moe_layout plan;
	struct moe_args a;
	struct fi_xpu_ctx_open_attr xattr = { FI_HMEM_SYSTEM, 0, &cuda_mem_ops };
	int c, n = 2, fp8 = 0, iters = 3, it, rc;
	uint32_t T = 32;
	long bad;
	double t0, sum = 0;
	const char *prov = "shm", *fabric = NULL;

	while ((c = getopt(argc, argv, "n:p:f:T:8i:")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'p': prov = optarg; break;
		case 'f': fabric = optarg; break;
		case 'T': T = (uint32_t)atoi(optarg); break;
		case '8': fp8 = 1; break;
		case 'i': iters = atoi(optarg); break;
		default: return 2;
		}
	}
	if (n < 2 || n > WORLD_MAXP || T < 1 || iters < 1)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	memset(&w, 0, sizeof(w));
	w.prov = prov;
	w.fabric = fabric;
	/* CUDA is first touched after fork: a context does not survive it. */
	world_spawn(&w, n);
	n = w.n; /* a launcher's FI_XPU_BOOTSTRAP_SIZE */
	moe_plan(&plan, (uint32_t)n, T, 7168, 4, 3, fp8);
	world_open(&w, plan.size, &xattr);
	memcpy(w.sym + WORLD_HDR, &plan, sizeof(plan));
	a.w = w.dev;
	a.sym = w.sym;
	a.l = (struct moe_layout *)(void *)(w.sym + WORLD_HDR);
	moe_fill(a.l, w.sym, (uint32_t)n, (uint32_t)w.rank);
	for (it = 0; it < iters; it++) {
		moe_reset(a.l, w.sym, (uint32_t)n);
		world_barrier(&w);
		t0 = world_now();
		k_dispatch_send<<<8, 32>>>(a);
		sync_or_die(&a, "dispatch_send");
		k_dispatch_signal<<<1, 32>>>(a);
		sync_or_die(&a, "dispatch_signal");
		k_expert_combine<<<8, 32>>>(a);
		sync_or_die(&a, "expert_combine");
		k_combine_signal<<<1, 32>>>(a);
		sync_or_die(&a, "combine_signal");
		k_combine_reduce<<<8, 32>>>(a);
		sync_or_die(&a, "combine_reduce");
		sum += world_now() - t0;
	}
	bad = moe_verify(a.l, w.sym, (uint32_t)n, (uint32_t)w.rank);
	printf("[%d] moe_cuda n=%d prov=%s dtype=%s T=%u: %s, %.1f us per dispatch+combine\n",
	       w.rank, n, prov, fp8 ? "fp8" : "bf16", T, bad ? "FAILED" : "ok", sum / iters * 1e6);
	world_close(&w);
	if (w.rank != 0)
		return bad != 0;
	rc = world_join(&w);
	/* The line gpu-check.sh reads: operation, provider, result, latency. */
	printf("RESULT moe-n%d %s %s %.1f -\n", n, prov, rc || bad ? "FAIL" : "ok",
	       sum / iters * 1e6);
	return rc || bad != 0;
}
