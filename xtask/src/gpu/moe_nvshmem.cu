/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The MoE exchange of examples/moe/moe.cu written with NVSHMEM instead of
 * fi_xpu: the GPU check's peer figure. Same shape (T tokens of H BF16
 * elements, top-K over E experts per rank on the other ranks), same
 * routing, experts, buffer layout and byte-for-byte check (moe.h), same
 * kernels (dispatch and combine one kernel each, grids sized by occupancy,
 * receive words reset on the device) and the same timing (CUDA events,
 * median over iterations of the slowest rank, the expert step excluded).
 * Puts are NVSHMEM's warp-wide non-blocking puts; counts travel as NVSHMEM
 * signals after a quiet.
 *
 * Built on the GPU machine against the NVSHMEM wheel (gpu-check.sh):
 *   nvcc -std=c++17 -O2 -arch=sm_90 -rdc=true -fmad=false \
 *        -I $NVSHMEM/include -I include -I examples/moe moe_nvshmem.cu \
 *        -L $NVSHMEM/lib -l:libnvshmem_host.so.3 -lnvshmem_device -o moe_nvshmem
 *
 *   moe_nvshmem [-n ranks] [-T tokens] [-H hidden] [-E experts per rank]
 *               [-K top-k] [-W warm-ups] [-i iters]
 *
 * The ranks are forked before CUDA is touched and join through NVSHMEM's
 * unique-id bootstrap (rank 0's id passed over socket pairs). Rank 0
 * prints:
 *   NVSHMEM dispatch_us <us>
 *   NVSHMEM combine_us <us>
 *   NVSHMEM total_us <us>
 *   RESULT moe-nvshmem-n<ranks> nvshmem ok|FAIL <total us> -
 */
#include <nvshmem.h>
#include <nvshmemx.h>

#include "moe.h"

#include <algorithm>
#include <vector>

#define THREADS 128
#define WARPS (THREADS / 32)

#define CK(expr)                                                                         \
	do {                                                                             \
		cudaError_t e_ = (expr);                                                 \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "[%d] %s: %s\n", (int)getpid(), #expr,            \
				cudaGetErrorString(e_));                                 \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

struct args {
	unsigned char *sym; /* symmetric: the same offsets on every rank */
	struct moe_layout l;
	int rank, n;
	uint64_t *bar; /* grid barrier counter (local) */
};

#define AT(a, off) ((a).sym + (off))
#define U64(a, off) ((uint64_t *)(void *)AT(a, off))

__device__ static void grid_barrier(uint64_t *bar, uint64_t target)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		atomicAdd((unsigned long long *)bar, 1ull);
		while (atomicAdd((unsigned long long *)bar, 0ull) < target)
			;
		__threadfence();
	}
	__syncthreads();
}

__device__ static void reset_words(struct args a, uint64_t item, uint64_t nitems)
{
	uint64_t i;
	for (i = item; i < (uint64_t)a.n * a.l.E; i += nitems) {
		U64(a, a.l.cnt)[i] = 0;
		U64(a, a.l.dsig)[i] = 0;
	}
	for (i = item; i < (uint64_t)a.n; i += nitems)
		U64(a, a.l.csig)[i] = 0;
	for (i = item; i < (uint64_t)a.l.T * a.l.out_bytes / 8; i += nitems)
		U64(a, a.l.result)[i] = 0;
	__threadfence_system();
}

__global__ void k_reset(struct args a)
{
	reset_words(a, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

__global__ void k_dispatch(struct args a, uint64_t seq)
{
	const struct moe_layout &l = a.l;
	const uint32_t *route = (const uint32_t *)(const void *)AT(a, l.route);
	uint32_t lane = threadIdx.x % 32, item = blockIdx.x * blockDim.x + threadIdx.x;
	uint32_t warp = item / 32, nwarps = gridDim.x * WARPS, nitems = gridDim.x * blockDim.x;
	for (uint32_t tj = warp; tj < l.T * l.K; tj += nwarps) {
		uint32_t t = tj / l.K, g = route[tj], d = g / l.E, e = g % l.E;
		unsigned long long slot = 0;
		if (lane == 0)
			slot = atomicAdd((unsigned long long *)U64(a, l.cnt) + d * l.E + e, 1ull);
		slot = __shfl_sync(0xffffffffu, slot, 0);
		uint64_t idx = ((uint64_t)a.rank * l.E + e) * l.T + slot;
		nvshmemx_putmem_nbi_warp(AT(a, l.recv + idx * l.tok_bytes),
					 AT(a, l.x + (uint64_t)t * l.tok_bytes), l.tok_bytes, (int)d);
		if (lane == 0)
			nvshmem_putmem_nbi(AT(a, l.meta + idx * 8), U64(a, l.origin) + tj, 8, (int)d);
	}
	nvshmem_quiet();
	grid_barrier(a.bar, seq * gridDim.x);
	if (item == 0) {
		nvshmem_quiet();
		for (int d = 0; d < a.n; d++)
			for (uint32_t e = 0; d != a.rank && e < l.E; e++)
				nvshmemx_signal_op(U64(a, l.dsig) + (uint64_t)a.rank * l.E + e,
						   U64(a, l.cnt)[d * l.E + e] + 1, NVSHMEM_SIGNAL_SET, d);
	}
	for (uint32_t pair = item; pair < (uint32_t)a.n * l.E; pair += nitems)
		if ((int)(pair / l.E) != a.rank)
			nvshmem_signal_wait_until(U64(a, l.dsig) + pair, NVSHMEM_CMP_NE, 0);
}

__global__ void k_expert(struct args a)
{
	const struct moe_layout &l = a.l;
	uint64_t total = (uint64_t)a.n * l.E * l.T, nitems = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t idx = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
	     idx += nitems) {
		uint32_t pair = (uint32_t)(idx / l.T), p = (uint32_t)(idx % l.T), e = pair % l.E;
		uint64_t count = U64(a, l.dsig)[pair];
		if ((int)(pair / l.E) == a.rank || !count || p >= count - 1)
			continue;
		moe_expert_token(&l, (uint32_t)a.rank * l.E + e, AT(a, l.recv + idx * l.tok_bytes),
				 (uint16_t *)(void *)AT(a, l.out + idx * l.out_bytes));
	}
}

__global__ void k_combine(struct args a, uint64_t seq, int reset)
{
	const struct moe_layout &l = a.l;
	uint32_t item = blockIdx.x * blockDim.x + threadIdx.x, nitems = gridDim.x * blockDim.x;
	uint64_t warp = item / 32, nwarps = (uint64_t)gridDim.x * WARPS;
	uint64_t total = (uint64_t)a.n * l.E * l.T;
	for (uint64_t idx = warp; idx < total; idx += nwarps) {
		uint32_t pair = (uint32_t)(idx / l.T), p = (uint32_t)(idx % l.T), s = pair / l.E;
		uint64_t count = U64(a, l.dsig)[pair];
		if ((int)s == a.rank || !count || p >= count - 1)
			continue;
		uint64_t origin = U64(a, l.meta)[idx];
		if (origin >= (uint64_t)l.T * l.K)
			continue; /* moe_verify reports it */
		nvshmemx_putmem_nbi_warp(AT(a, l.comb + origin * l.out_bytes),
					 AT(a, l.out + idx * l.out_bytes), l.out_bytes, (int)s);
	}
	nvshmem_quiet();
	grid_barrier(a.bar, seq * gridDim.x);
	if (item == 0) {
		nvshmem_quiet();
		for (int s = 0; s < a.n; s++) {
			uint64_t sent = 0;
			if (s == a.rank)
				continue;
			for (uint32_t e = 0; e < l.E; e++)
				sent += U64(a, l.dsig)[s * l.E + e] - 1;
			nvshmemx_signal_op(U64(a, l.csig) + a.rank, sent + 1, NVSHMEM_SIGNAL_SET, s);
		}
	}
	for (int d = 0; d < a.n; d++)
		if (d != a.rank)
			nvshmem_signal_wait_until(U64(a, l.csig) + d, NVSHMEM_CMP_NE, 0);
	const float *wt = (const float *)(const void *)AT(a, l.weight);
	for (uint32_t t = item; t < l.T; t += nitems) {
		const uint16_t *y[MOE_MAX_K];
		for (uint32_t j = 0; j < l.K; j++)
			y[j] = (const uint16_t *)(const void *)AT(a, l.comb + ((uint64_t)t * l.K + j) *
									       l.out_bytes);
		moe_weighted_sum(l.H, l.K, wt + t * l.K, y,
				 (uint16_t *)(void *)AT(a, l.result + (uint64_t)t * l.out_bytes));
	}
	if (!reset)
		return;
	grid_barrier(a.bar, (seq + 1) * gridDim.x);
	reset_words(a, item, nitems);
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv)
{
	int c, n = 2, iters = 20, warm = 5, rank = 0, up = -1, down[WORLD_MAXP];
	uint32_t T = 128, H = 7168, E = 8, K = 8;
	pid_t pids[WORLD_MAXP];
	while ((c = getopt(argc, argv, "n:T:H:E:K:W:i:")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'T': T = (uint32_t)atoi(optarg); break;
		case 'H': H = (uint32_t)atoi(optarg); break;
		case 'E': E = (uint32_t)atoi(optarg); break;
		case 'K': K = (uint32_t)atoi(optarg); break;
		case 'W': warm = atoi(optarg); break;
		case 'i': iters = atoi(optarg); break;
		default: return 2;
		}
	}
	if (n < 2 || n > WORLD_MAXP || T < 1 || H < 1 || E < 1 || K < 1 || K > MOE_MAX_K ||
	    K > (uint32_t)(n - 1) * E || iters < 1 || warm < 0)
		return 2;
	/* Fork the ranks before CUDA is touched. */
	for (int i = 1; i < n; i++) {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			return 1;
		pids[i] = fork();
		if (pids[i] < 0)
			return 1;
		if (pids[i] == 0) {
			for (int j = 1; j < i; j++)
				close(down[j]);
			close(sv[0]);
			rank = i;
			up = sv[1];
			break;
		}
		close(sv[1]);
		down[i] = sv[0];
	}
	const char *dev = getenv("FI_XPU_CUDA_DEVICE");
	CK(cudaSetDevice(dev ? atoi(dev) : 0));
	nvshmemx_uniqueid_t uid;
	nvshmemx_init_attr_t attr;
	memset(&uid, 0, sizeof(uid));
	memset(&attr, 0, sizeof(attr));
	if (rank == 0) {
		if (nvshmemx_get_uniqueid(&uid) != 0) {
			fprintf(stderr, "nvshmemx_get_uniqueid failed\n");
			return 1;
		}
		for (int i = 1; i < n; i++)
			world_io(down[i], &uid, sizeof(uid), 1);
	} else {
		world_io(up, &uid, sizeof(uid), 0);
	}
	if (nvshmemx_set_attr_uniqueid_args(rank, n, &uid, &attr) != 0 ||
	    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
		fprintf(stderr, "[%d] NVSHMEM initialisation failed\n", rank);
		return 1;
	}

	struct args a;
	moe_plan(&a.l, (uint32_t)n, T, H, E, K, 0);
	a.rank = rank;
	a.n = n;
	a.sym = (unsigned char *)nvshmem_malloc(a.l.size);
	if (!a.sym) {
		fprintf(stderr, "[%d] nvshmem_malloc(%llu) failed\n", rank,
			(unsigned long long)a.l.size);
		return 1;
	}
	std::vector<unsigned char> host(a.l.size);
	memcpy(host.data() + WORLD_HDR, &a.l, sizeof(a.l));
	moe_fill(&a.l, host.data(), (uint32_t)n, (uint32_t)rank);
	CK(cudaMemcpy(a.sym, host.data(), a.l.size, cudaMemcpyHostToDevice));
	CK(cudaMalloc((void **)&a.bar, 8));
	CK(cudaMemset(a.bar, 0, 8));

	int sms = 0, d = 0, per_sm = 0, other = 0;
	const char *pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
	CK(cudaGetDevice(&d));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_dispatch, THREADS, 0));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&other, k_combine, THREADS, 0));
	if (pct && atoi(pct) > 0 && atoi(pct) < 100)
		sms = std::max(1, sms * atoi(pct) / 100);
	uint64_t need = ((uint64_t)n * E * T * 32 + THREADS - 1) / THREADS;
	unsigned blocks = (unsigned)std::max<uint64_t>(
		1, std::min<uint64_t>((uint64_t)std::max(1, std::min(per_sm, other)) * sms, need));

	cudaEvent_t ev[4];
	for (int i = 0; i < 4; i++)
		CK(cudaEventCreate(&ev[i]));
	std::vector<double> disp, comb;
	uint64_t seq = 0;
	k_reset<<<1, THREADS>>>(a);
	CK(cudaDeviceSynchronize());
	for (int it = 0; it < warm + iters; it++) {
		float dm = 0, cm = 0;
		nvshmem_barrier_all();
		CK(cudaEventRecord(ev[0]));
		k_dispatch<<<blocks, THREADS>>>(a, ++seq);
		CK(cudaEventRecord(ev[1]));
		CK(cudaDeviceSynchronize());
		k_expert<<<blocks, THREADS>>>(a);
		CK(cudaDeviceSynchronize());
		nvshmem_barrier_all();
		CK(cudaEventRecord(ev[2]));
		k_combine<<<blocks, THREADS>>>(a, ++seq, it + 1 < warm + iters);
		CK(cudaEventRecord(ev[3]));
		seq++;
		CK(cudaDeviceSynchronize());
		CK(cudaEventElapsedTime(&dm, ev[0], ev[1]));
		CK(cudaEventElapsedTime(&cm, ev[2], ev[3]));
		if (it >= warm) {
			disp.push_back(dm * 1e3);
			comb.push_back(cm * 1e3);
		}
	}
	CK(cudaMemcpy(host.data(), a.sym, a.l.size, cudaMemcpyDeviceToHost));
	long bad = moe_verify(&a.l, host.data(), (uint32_t)n, (uint32_t)rank);
	printf("[%d] moe_nvshmem n=%d T=%u H=%u E=%u K=%u grid=%ux%d: %s\n", rank, n, T, H, E, K,
	       blocks, THREADS, bad ? "FAILED" : "ok");
	fflush(stdout);
	nvshmem_barrier_all();
	nvshmem_free(a.sym);
	nvshmem_finalize();

	/* The slowest rank's time per iteration, then the median. */
	std::vector<double> td(disp), tc(comb), tt;
	if (rank != 0) {
		world_io(up, disp.data(), disp.size() * sizeof(double), 1);
		world_io(up, comb.data(), comb.size() * sizeof(double), 1);
		return bad != 0;
	}
	int failed = bad != 0;
	std::vector<double> other_d(td.size()), other_c(tc.size());
	for (int i = 1; i < n; i++) {
		world_io(down[i], other_d.data(), other_d.size() * sizeof(double), 0);
		world_io(down[i], other_c.data(), other_c.size() * sizeof(double), 0);
		for (size_t k = 0; k < td.size(); k++) {
			td[k] = std::max(td[k], other_d[k]);
			tc[k] = std::max(tc[k], other_c[k]);
		}
	}
	for (int i = 1; i < n; i++) {
		int st = 0;
		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	for (size_t k = 0; k < td.size(); k++)
		tt.push_back(td[k] + tc[k]);
	printf("NVSHMEM dispatch_us %.1f\nNVSHMEM combine_us %.1f\nNVSHMEM total_us %.1f\n",
	       median(td), median(tc), median(tt));
	printf("RESULT moe-nvshmem-n%d nvshmem %s %.1f -\n", n, failed ? "FAIL" : "ok", median(tt));
	return failed;
}
