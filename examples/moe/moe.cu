/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * MoE dispatch and combine (moe.h) on a GPU, as a user writes them: the
 * dispatch is one kernel and the combine one kernel, on an fi_xpu world
 * (fi_xpu_world(3)) of FI_HMEM_CUDA contexts, so the symmetric window is
 * device memory. The host never touches it through a pointer: the layout
 * and the inputs are built in host memory and copied in, the result is
 * copied out to be checked (cudaMemcpy both ways). Where the provider
 * does not serve device memory (ofi today), or FI_XPU_EXAMPLE_MEMORY=pinned
 * asks for it, the window is pinned host memory from ../cuda/cuda_mem.h
 * instead, and the program says so on stderr. All ranks use GPU 0 unless
 * CUDA_VISIBLE_DEVICES says otherwise.
 *
 *   dispatch  every work item sends its tokens (moe_dispatch_send); a grid
 *             barrier; one work item sends the count signals after a quiet
 *             (moe_dispatch_signal); every work item then waits for the
 *             signals of the (source, expert) pairs it owns, so that the
 *             kernel ends when this rank has received everything;
 *   expert    runs the experts on what arrived (not timed: the exchange is
 *             what is measured);
 *   combine   every work item returns the results it owns to their
 *             origins; a grid barrier; the combine signals; the weighted
 *             sums (moe_combine_reduce); a grid barrier; then the kernel
 *             resets the counts and signal words for the next round (the
 *             receive-buffer reset is done on the device, not by the host).
 *
 * The grid barriers need every block resident at once: the grid is sized
 * by occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor) times the
 * SMs this process may use (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of them under
 * MPS), and never larger than the work.
 *
 *   moe_cuda [-n ranks] [-p shm|ofi] [-f tcp|shm] [-T tokens] [-H hidden]
 *            [-E experts per rank] [-K top-k] [-8] [-W warm-ups] [-i iters]
 *
 * Every iteration starts with a host barrier and times the dispatch and the
 * combine kernel with CUDA events; rank 0 prints the memory kind and the
 * median over iterations of the slowest rank's time:
 *   MOE memory device|pinned_host
 *   MOE dispatch_us <us>
 *   MOE combine_us <us>
 *   MOE total_us <us>
 *   RESULT moe-n<ranks> <provider> ok|FAIL <total us> -
 *
 * Build with -fmad=false: the host checks every result byte with the same
 * arithmetic, which a fused multiply-add would round differently.
 */
#include "../cuda/cuda_mem.h"
#include "moe.h"

#include <algorithm>
#include <getopt.h>
#include <vector>

#define MOE_THREADS 128

/* All blocks of the grid meet; `target` is the barrier's sequence number
 * times the grid size (the counter only grows). */
__device__ static void grid_barrier(uint64_t *bar, uint64_t target, struct moe_layout *l)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		uint64_t spins = 0;
		fi_xpu_arch_fetch_add_u64(bar, 1, FI_XPU_ARCH_ACQ_REL, FI_XPU_ARCH_MS_DEVICE);
		while (fi_xpu_arch_load_u64(bar, FI_XPU_ARCH_ACQUIRE, FI_XPU_ARCH_MS_DEVICE) < target)
			if (++spins > (1ull << 32)) {
				moe_fail(l, -FI_ETIMEDOUT, __LINE__);
				break;
			}
	}
	__syncthreads();
}

__global__ void k_reset(struct moe_args a)
{
	moe_reset_words(&a, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

__global__ void k_dispatch(struct moe_args a, uint64_t *bar, uint64_t seq)
{
	uint32_t item = blockIdx.x * blockDim.x + threadIdx.x, nitems = gridDim.x * blockDim.x;
	uint32_t pair, n = a.w->n;
	moe_dispatch_send(&a, item, nitems);
	grid_barrier(bar, seq * gridDim.x, a.l);
	if (item == 0)
		moe_dispatch_signal(&a, 0, 1);
	for (pair = item; pair < n * a.l->E; pair += nitems)
		if (pair / a.l->E != a.w->rank)
			(void)moe_wait_signal(a.w, a.l, MOE_U64(&a, a.l->dsig) + pair);
}

/* Expert g on each received token; slots (source, expert, p) spread over
 * the work items. */
__global__ void k_expert(struct moe_args a)
{
	const struct moe_layout *l = a.l;
	uint64_t nitems = (uint64_t)gridDim.x * blockDim.x, idx;
	uint64_t total = (uint64_t)a.w->n * l->E * l->T;
	for (idx = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += nitems) {
		uint32_t pair = (uint32_t)(idx / l->T), p = (uint32_t)(idx % l->T);
		uint32_t s = pair / l->E, e = pair % l->E;
		uint64_t count = MOE_U64(&a, l->dsig)[pair];
		if (s == a.w->rank || !count || p >= count - 1)
			continue;
		moe_expert_token(l, a.w->rank * l->E + e, MOE_AT(&a, l->recv + idx * l->tok_bytes),
				 (uint16_t *)(void *)MOE_AT(&a, l->out + idx * l->out_bytes));
	}
}

__global__ void k_combine(struct moe_args a, uint64_t *bar, uint64_t seq, int reset)
{
	struct moe_layout *l = a.l;
	const struct world_dev *w = a.w;
	uint32_t item = blockIdx.x * blockDim.x + threadIdx.x, nitems = gridDim.x * blockDim.x;
	uint64_t total = (uint64_t)w->n * l->E * l->T, idx;
	for (idx = item; idx < total; idx += nitems) {
		uint32_t pair = (uint32_t)(idx / l->T), p = (uint32_t)(idx % l->T), s = pair / l->E;
		uint64_t count = MOE_U64(&a, l->dsig)[pair], origin;
		if (s == w->rank || !count || p >= count - 1)
			continue;
		origin = fi_xpu_arch_load_u64(MOE_U64(&a, l->meta) + idx, FI_XPU_ARCH_RELAXED,
					      FI_XPU_ARCH_MS_SYSTEM);
		if (origin >= (uint64_t)l->T * l->K) {
			moe_fail(l, -FI_EIO, __LINE__);
			break;
		}
		int rc;
		while ((rc = fi_xpu_world_put(w->win, (int)s, l->comb + origin * l->out_bytes,
					      MOE_AT(&a, l->out + idx * l->out_bytes), l->out_bytes,
					      FI_DELIVERY_COMPLETE, FI_XPU_WORK_ITEM)) == -FI_EAGAIN)
			fi_xpu_arch_pause();
		if (rc) {
			moe_fail(l, rc, __LINE__);
			break;
		}
	}
	grid_barrier(bar, seq * gridDim.x, l);
	if (item == 0)
		moe_combine_signal(&a, 0, 1);
	moe_combine_reduce(&a, item, nitems);
	if (!reset)
		return; /* the last round: its words are checked */
	/* Everyone has read this round's counts and signals. */
	grid_barrier(bar, (seq + 1) * gridDim.x, l);
	moe_reset_words(&a, item, nitems);
}

/* The host's one way into the window, device memory or pinned host memory
 * alike. */
static void window_write(void *dst, const void *src, size_t len)
{
	CUDA_CHECK(cudaMemcpy(dst, src, len, cudaMemcpyDefault));
}

static void sync_or_die(const struct moe_args *a, int rank, const char *what)
{
	struct moe_layout l;
	cudaError_t e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		fprintf(stderr, "[%d] %s: %s\n", rank, what, cudaGetErrorString(e));
		exit(1);
	}
	CUDA_CHECK(cudaMemcpy(&l, a->l, sizeof(l), cudaMemcpyDefault));
	if (l.err) {
		fprintf(stderr, "[%d] %s failed at moe.h:%d: %s\n", rank, what, l.err_line,
			fi_xpu_strerror(l.err));
		exit(1);
	}
}

/* Blocks of MOE_THREADS that can all be resident in this process, for the
 * kernels with grid barriers, and no more than `work` items need. */
static unsigned grid_blocks(uint64_t work)
{
	int sms = 0, dev = 0, per_sm = 0, other = 0;
	const char *pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
	CUDA_CHECK(cudaGetDevice(&dev));
	CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
	CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_dispatch, MOE_THREADS, 0));
	CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&other, k_combine, MOE_THREADS, 0));
	per_sm = std::min(per_sm, other);
	if (pct && atoi(pct) > 0 && atoi(pct) < 100)
		sms = std::max(1, sms * atoi(pct) / 100);
	uint64_t resident = (uint64_t)std::max(per_sm, 1) * (uint64_t)sms;
	uint64_t need = (work + MOE_THREADS - 1) / MOE_THREADS;
	return (unsigned)std::max<uint64_t>(1, std::min(resident, need));
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv)
{
	struct world w;
	struct moe_layout plan;
	struct moe_args a;
	struct fi_xpu_ctx_open_attr dev_attr = { FI_HMEM_CUDA, 0, NULL };
	struct fi_xpu_ctx_open_attr pinned_attr = { FI_HMEM_SYSTEM, 0, &cuda_mem_ops };
	const char *mem = getenv("FI_XPU_EXAMPLE_MEMORY"), *kind = "device";
	int c, n = 2, fp8 = 0, iters = 20, warm = 5, it, rc = 0;
	uint32_t T = 128, H = 7168, E = 8, K = 8;
	uint64_t *bar, seq = 0;
	long bad;
	const char *prov = "shm", *fabric = NULL;
	cudaEvent_t ev[4];
	std::vector<double> dispatch_us, combine_us, total_us;

	while ((c = getopt(argc, argv, "n:p:f:T:H:E:K:8W:i:")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'p': prov = optarg; break;
		case 'f': fabric = optarg; break;
		case 'T': T = (uint32_t)atoi(optarg); break;
		case 'H': H = (uint32_t)atoi(optarg); break;
		case 'E': E = (uint32_t)atoi(optarg); break;
		case 'K': K = (uint32_t)atoi(optarg); break;
		case '8': fp8 = 1; break;
		case 'W': warm = atoi(optarg); break;
		case 'i': iters = atoi(optarg); break;
		default: return 2;
		}
	}
	if (n < 2 || n > WORLD_MAXP || T < 1 || H < 1 || E < 1 || K < 1 || K > MOE_MAX_K ||
	    iters < 1 || warm < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	memset(&w, 0, sizeof(w));
	w.prov = prov;
	w.fabric = fabric;
	/* CUDA is first touched after fork: a context does not survive it. */
	world_spawn(&w, n);
	n = w.n; /* a launcher's FI_XPU_BOOTSTRAP_SIZE */
	if (K > (uint32_t)(n - 1) * E) {
		fprintf(stderr, "top-%u needs %u experts on other ranks, there are %u\n", K, K,
			(uint32_t)(n - 1) * E);
		return 2;
	}
	moe_plan(&plan, (uint32_t)n, T, H, E, K, fp8);
	w.write = window_write;
	CUDA_CHECK(cudaSetDevice(0));
	if ((mem && !strcmp(mem, "pinned")) || (rc = world_try_open(&w, plan.size, &dev_attr))) {
		if (!(mem && !strcmp(mem, "pinned")))
			fprintf(stderr, "[%d] %s: device memory refused (%s); pinned host memory instead\n",
				w.rank, prov, fi_xpu_strerror(rc));
		kind = "pinned_host";
		world_open(&w, plan.size, &pinned_attr);
	}
	/* The layout and this rank's inputs, built in host memory and copied
	 * into the window after the kernels' table. */
	std::vector<unsigned char> host(plan.size);
	memcpy(host.data() + WORLD_HDR, &plan, sizeof(plan));
	moe_fill(&plan, host.data(), (uint32_t)n, (uint32_t)w.rank);
	window_write(w.sym + WORLD_HDR, host.data() + WORLD_HDR, plan.size - WORLD_HDR);
	a.w = w.dev;
	a.sym = w.sym;
	a.l = (struct moe_layout *)(void *)(w.sym + WORLD_HDR);
	CUDA_CHECK(cudaMalloc((void **)&bar, sizeof(*bar)));
	CUDA_CHECK(cudaMemset(bar, 0, sizeof(*bar)));
	for (int i = 0; i < 4; i++)
		CUDA_CHECK(cudaEventCreate(&ev[i]));
	unsigned blocks = grid_blocks((uint64_t)n * E * T);
	k_reset<<<1, MOE_THREADS>>>(a);
	sync_or_die(&a, w.rank, "reset");
	for (it = 0; it < warm + iters; it++) {
		float d = 0, cmb = 0;
		double mine[2], all[2 * WORLD_MAXP], dmax = 0, cmax = 0;
		/* Every rank has reset its words before any rank sends. */
		world_barrier(&w);
		CUDA_CHECK(cudaEventRecord(ev[0]));
		k_dispatch<<<blocks, MOE_THREADS>>>(a, bar, ++seq);
		CUDA_CHECK(cudaEventRecord(ev[1]));
		sync_or_die(&a, w.rank, "dispatch");
		k_expert<<<blocks, MOE_THREADS>>>(a);
		sync_or_die(&a, w.rank, "expert");
		/* The combine starts on every rank with the experts done. */
		world_barrier(&w);
		CUDA_CHECK(cudaEventRecord(ev[2]));
		k_combine<<<blocks, MOE_THREADS>>>(a, bar, ++seq, it + 1 < warm + iters);
		CUDA_CHECK(cudaEventRecord(ev[3]));
		seq++;
		sync_or_die(&a, w.rank, "combine");
		CUDA_CHECK(cudaEventElapsedTime(&d, ev[0], ev[1]));
		CUDA_CHECK(cudaEventElapsedTime(&cmb, ev[2], ev[3]));
		mine[0] = d * 1e3;
		mine[1] = cmb * 1e3;
		world_allgather(&w, mine, all, sizeof(mine));
		for (int r = 0; r < n; r++) {
			dmax = std::max(dmax, all[2 * r]);
			cmax = std::max(cmax, all[2 * r + 1]);
		}
		if (it >= warm) {
			dispatch_us.push_back(dmax);
			combine_us.push_back(cmax);
			total_us.push_back(dmax + cmax);
		}
	}
	/* The last round skipped its reset: every byte it moved is checked,
	 * on a copy of the window in host memory. */
	CUDA_CHECK(cudaMemcpy(host.data(), w.sym, plan.size, cudaMemcpyDefault));
	bad = moe_verify(&plan, host.data(), (uint32_t)n, (uint32_t)w.rank);
	printf("[%d] moe_cuda n=%d prov=%s dtype=%s T=%u H=%u E=%u K=%u grid=%ux%d: %s\n", w.rank, n,
	       prov, fp8 ? "fp8" : "bf16", T, H, E, K, blocks, MOE_THREADS, bad ? "FAILED" : "ok");
	world_close(&w);
	if (w.rank != 0)
		return bad != 0;
	rc = world_join(&w);
	printf("MOE memory %s\n", kind);
	printf("MOE dispatch_us %.1f\nMOE combine_us %.1f\nMOE total_us %.1f\n", median(dispatch_us),
	       median(combine_us), median(total_us));
	/* The line gpu-check.sh reads: operation, provider, result, latency. */
	printf("RESULT moe-n%d %s %s %.1f -\n", n, prov, rc || bad ? "FAIL" : "ok", median(total_us));
	return rc || bad != 0;
}
