/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_xpu_gpu_probe: what one NVIDIA GPU and its driver allow, measured before
 * anything depends on it. Standalone (no fi_xpu); the GPU check runs it
 * first. It streams one `key=value` line per answer, flushed as measured, so
 * that a run cut off still reports what it had:
 *
 *   env.*     driver, device, SMs, L2, clocks, MPS state, NVSHMEM wheel
 *   probe.*   pass|fail|error:<why> for: a VMM allocation exported as a
 *             POSIX fd, passed over SCM_RIGHTS, imported (cuMemSetAccess) in
 *             a second process, written in one process and read in the
 *             other; legacy IPC handles; the device attributes for POSIX-fd
 *             handles, GPUDirect RDMA with VMM, stream memory operations;
 *             whether two spinning clients stay co-resident
 *   litmus.*  violations/trials of message passing (weak 16-byte stores,
 *             block barrier, the leader's release; relaxed poll, then one
 *             acquire fence) and store buffering, between two blocks and
 *             between two processes, at .gpu and .sys scope
 *   cost.*    p50/p99 in ns
 *   bw.*      GB/s of the copy engine and of a kernel copy, local and into
 *             memory imported from the other process
 *
 *   fi_xpu_gpu_probe [-d device] [-t seconds] [section...]
 *
 * Sections: env probe litmus cost bw (the default: all of them) and floor
 * (only the two-block flag ping-pong, the floor the GPU check compares the
 * library's ping-pong with). The whole run stops after -t seconds (170),
 * each step after its own limit; a step that runs out prints
 * `<step>=timeout` and the probe exits 124.
 *
 * The second process is this program executed again (never a fork after
 * CUDA is initialized), connected by a socket pair; under MPS it is a
 * second MPS client. The driver API comes through the runtime's entry point
 * query, so the program links with nothing but the static CUDA runtime.
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

extern char **environ;

/* ---- output and time limits --------------------------------------------- */

static void kv(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER;
static char step_name[96] = "start";
static double step_end, run_end;
static pid_t peer_pid;

/* Names the step now running and gives it at most `seconds`. */
static void step(const char *name, double seconds)
{
	pthread_mutex_lock(&step_lock);
	snprintf(step_name, sizeof(step_name), "%s", name);
	step_end = now_ns() + seconds * 1e9;
	pthread_mutex_unlock(&step_lock);
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		usleep(20000);
		pthread_mutex_lock(&step_lock);
		double t = now_ns();
		int over = t > step_end || t > run_end;
		if (over) {
			kv("%s=timeout", t > run_end ? "run" : step_name);
			if (peer_pid > 0)
				kill(peer_pid, SIGKILL);
			_exit(124);
		}
		pthread_mutex_unlock(&step_lock);
	}
	return NULL;
}

/* ---- the driver API, through the runtime --------------------------------- */

#define DRIVER_FUNCS(X)                                                                          \
	X(cuMemCreate)                                                                           \
	X(cuMemRelease)                                                                          \
	X(cuMemExportToShareableHandle)                                                          \
	X(cuMemImportFromShareableHandle)                                                        \
	X(cuMemAddressReserve)                                                                   \
	X(cuMemAddressFree)                                                                      \
	X(cuMemMap)                                                                              \
	X(cuMemUnmap)                                                                            \
	X(cuMemSetAccess)                                                                        \
	X(cuMemGetAllocationGranularity)                                                         \
	X(cuDeviceGetAttribute)                                                                  \
	X(cuStreamWriteValue64)                                                                  \
	X(cuCtxGetExecAffinity)                                                                  \
	X(cuGetErrorName)

#define DECLARE(f) static decltype(&f) p_##f;
DRIVER_FUNCS(DECLARE)

static int load_driver(void)
{
	int missing = 0;
	cudaDriverEntryPointQueryResult q;
#define LOAD(f)                                                                                  \
	if (cudaGetDriverEntryPointByVersion(#f, (void **)&p_##f, 12000, cudaEnableDefault, &q) != \
		    cudaSuccess ||                                                               \
	    q != cudaDriverEntryPointSuccess || !p_##f) {                                        \
		kv("env.driver_symbol_missing=%s", #f);                                          \
		missing = 1;                                                                     \
	}
	DRIVER_FUNCS(LOAD)
#undef LOAD
	return missing ? -1 : 0;
}

static const char *cu_name(CUresult r)
{
	const char *s = "CUDA_ERROR_UNKNOWN";
	if (p_cuGetErrorName)
		p_cuGetErrorName(r, &s);
	return s;
}

/* Failure text for a key's value: `error:<call>:<name>`. */
static char err_buf[160];
#define CU_TRY(call)                                                                             \
	do {                                                                                     \
		CUresult r_ = (call);                                                            \
		if (r_ != CUDA_SUCCESS) {                                                        \
			snprintf(err_buf, sizeof(err_buf), "error:%s:%s", #call, cu_name(r_));  \
			goto fail;                                                               \
		}                                                                                \
	} while (0)
#define RT_TRY(call)                                                                             \
	do {                                                                                     \
		cudaError_t e_ = (call);                                                         \
		if (e_ != cudaSuccess) {                                                         \
			snprintf(err_buf, sizeof(err_buf), "error:%s:%s", #call,                 \
				 cudaGetErrorName(e_));                                          \
			goto fail;                                                               \
		}                                                                                \
	} while (0)
/* For steps whose failure ends the program (setup). */
#define RT_MUST(call)                                                                            \
	do {                                                                                     \
		cudaError_t e_ = (call);                                                         \
		if (e_ != cudaSuccess) {                                                         \
			kv("error=%s:%s", #call, cudaGetErrorName(e_));                          \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

/* ---- device primitives ------------------------------------------------------ */

__device__ __forceinline__ uint64_t gtime(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* 64-bit loads and stores of PTX semantics `sem`, and fences, at system
 * scope (SYS) or GPU scope. */
#define PROBE_LOAD(name, sem)                                                                     \
	template <bool SYS> __device__ __forceinline__ uint64_t name(const uint64_t *p)           \
	{                                                                                         \
		uint64_t v;                                                                       \
		if (SYS)                                                                          \
			asm volatile("ld." sem ".sys.global.u64 %0, [%1];"                        \
				     : "=l"(v)                                                    \
				     : "l"(p)                                                     \
				     : "memory");                                                 \
		else                                                                              \
			asm volatile("ld." sem ".gpu.global.u64 %0, [%1];"                        \
				     : "=l"(v)                                                    \
				     : "l"(p)                                                     \
				     : "memory");                                                 \
		return v;                                                                         \
	}
#define PROBE_STORE(name, sem)                                                                    \
	template <bool SYS> __device__ __forceinline__ void name(uint64_t *p, uint64_t v)         \
	{                                                                                         \
		if (SYS)                                                                          \
			asm volatile("st." sem ".sys.global.u64 [%0], %1;" ::"l"(p), "l"(v)       \
				     : "memory");                                                 \
		else                                                                              \
			asm volatile("st." sem ".gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v)       \
				     : "memory");                                                 \
	}
#define PROBE_FENCE(name, sem)                                                                    \
	template <bool SYS> __device__ __forceinline__ void name(void)                            \
	{                                                                                         \
		if (SYS)                                                                          \
			asm volatile("fence." sem ".sys;" ::: "memory");                          \
		else                                                                              \
			asm volatile("fence." sem ".gpu;" ::: "memory");                          \
	}

PROBE_LOAD(ld_relaxed, "relaxed")
PROBE_LOAD(ld_acquire, "acquire")
PROBE_STORE(st_release, "release")
PROBE_STORE(st_relaxed, "relaxed")
PROBE_FENCE(fence_acq_rel, "acq_rel")
PROBE_FENCE(fence_sc, "sc")

__device__ __forceinline__ void st_weak16(uint4 *p, uint4 v)
{
	asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
		     "r"(v.z), "r"(v.w)
		     : "memory");
}

__device__ __forceinline__ uint4 ld_weak16(const uint4 *p)
{
	uint4 v;
	asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
		     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
		     : "l"(p)
		     : "memory");
	return v;
}

/* Spins until *p >= want (relaxed), then one acquire fence; false when the
 * deadline (globaltimer ns) passes first. */
template <bool SYS> __device__ bool wait_ge(const uint64_t *p, uint64_t want, uint64_t deadline)
{
	unsigned n = 0;
	while (ld_relaxed<SYS>(p) < want)
		if ((++n & 255) == 0 && gtime() > deadline)
			return false;
	fence_acq_rel<SYS>();
	return true;
}

/* ---- shared layout ---------------------------------------------------------- */

/* The control area at the start of every region two agents share. */
struct ctl {
	uint64_t flag, pad0[15];
	uint64_t ack, pad1[15];
	uint64_t arrive, pad2[15];
	uint64_t count[2], pad3[14];
};
#define CTL_BYTES ((size_t)1 << 20)       /* control area; trial arrays follow */
#define SB_MAX 8192                       /* store-buffering trials at most */
#define DATA_OFF ((size_t)2 << 20)        /* data area of a shared region */
#define MP_OFF (DATA_OFF - 65536)         /* message-passing data (in the control area) */
#define BW_MAX ((size_t)1024 << 20)       /* largest bandwidth size */
#define SHARED_BYTES (DATA_OFF + BW_MAX)

/* Per-kernel results (device memory, read back). */
struct result {
	unsigned long long trials, violations, timeout, gap_ns;
};

/* ---- kernels -------------------------------------------------------------- */

/* Message passing with the library's pattern. Writer (role 0): weak 16-byte
 * stores by every thread, block barrier, leader's release of the flag.
 * Reader (role 1): leader's relaxed poll then one acquire fence, block
 * barrier, weak loads, compare. A handshake (ack) separates the trials. */
template <bool SYS>
__global__ void mp_kernel(struct ctl *c, uint4 *data, int role, uint64_t iters, uint64_t budget,
			  struct result *out)
{
	__shared__ int stop;
	__shared__ unsigned long long bad;
	uint64_t deadline = 0, i, done = 0;
	if (threadIdx.x == 0) {
		stop = 0;
		bad = 0;
		deadline = gtime() + budget;
	}
	__syncthreads();
	for (i = 1; i <= iters; i++) {
		if (role == 0) {
			if (threadIdx.x == 0 && !wait_ge<SYS>(&c->ack, i - 1, deadline))
				stop = 1;
			__syncthreads();
			if (stop)
				break;
			unsigned v = (unsigned)i;
			st_weak16(&data[threadIdx.x], make_uint4(v, v ^ 1u, v ^ 2u, v ^ 3u));
			__syncthreads();
			if (threadIdx.x == 0)
				st_release<SYS>(&c->flag, i);
		} else {
			if (threadIdx.x == 0 && !wait_ge<SYS>(&c->flag, i, deadline))
				stop = 1;
			__syncthreads();
			if (stop)
				break;
			uint4 v = ld_weak16(&data[threadIdx.x]);
			unsigned w = (unsigned)i;
			if (v.x != w || v.y != (w ^ 1u) || v.z != (w ^ 2u) || v.w != (w ^ 3u))
				atomicAdd(&bad, 1ull);
			__syncthreads();
			if (threadIdx.x == 0)
				st_release<SYS>(&c->ack, i);
		}
		done = i;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		out->trials = done;
		out->violations = bad;
		out->timeout = stop;
	}
}

/* Store buffering, one thread per agent, a fresh pair of words per trial
 * (zeroed before the launch): store mine; fence; load theirs. FENCE 0: the
 * library's pattern (release store; relaxed load then acquire fence), which
 * the model allows to fail; FENCE 1: relaxed store, fence.sc, relaxed load. */
template <bool SYS, int FENCE>
__global__ void sb_kernel(struct ctl *c, uint64_t *x, uint64_t *y, uint64_t *seen, int role,
			  uint64_t iters, uint64_t budget, struct result *out)
{
	uint64_t deadline = gtime() + budget, i, done = 0;
	uint64_t *mine = role ? y : x, *theirs = role ? x : y;
	int stop = 0;
	for (i = 0; i < iters && !stop; i++) {
		/* Both agents arrive before the trial starts. */
		atomicAdd((unsigned long long *)&c->arrive, 1ull);
		unsigned n = 0;
		while (ld_relaxed<SYS>(&c->arrive) < 2 * (i + 1))
			if ((++n & 255) == 0 && gtime() > deadline) {
				stop = 1;
				break;
			}
		if (stop)
			break;
		uint64_t r;
		if (FENCE == 0) {
			st_release<SYS>(&mine[i], 1);
			r = ld_relaxed<SYS>(&theirs[i]);
			fence_acq_rel<SYS>();
		} else {
			st_relaxed<SYS>(&mine[i], 1);
			fence_sc<SYS>();
			r = ld_relaxed<SYS>(&theirs[i]);
		}
		seen[i] = r;
		done = i + 1;
	}
	out->trials = done;
	out->timeout = stop;
}

/* Flag ping-pong: role 0 releases `ping` and waits for `pong`, role 1 the
 * reverse; relaxed polls with one acquire fence. One sample per `batch`
 * round trips: one-way ns. */
template <bool SYS>
__global__ void ping_kernel(struct ctl *c, int role, int samples, int batch, uint64_t budget,
			    uint64_t *ns, struct result *out)
{
	uint64_t deadline = gtime() + budget, seq = 0;
	int s, stop = 0;
	for (s = 0; s < samples && !stop; s++) {
		uint64_t t0 = gtime();
		for (int b = 0; b < batch; b++) {
			seq++;
			if (role == 0) {
				st_release<SYS>(&c->flag, seq);
				if (!wait_ge<SYS>(&c->ack, seq, deadline)) {
					stop = 1;
					break;
				}
			} else {
				if (!wait_ge<SYS>(&c->flag, seq, deadline)) {
					stop = 1;
					break;
				}
				st_release<SYS>(&c->ack, seq);
			}
		}
		if (!stop && role == 0)
			ns[s] = (gtime() - t0) / (2 * (uint64_t)batch);
	}
	out->trials = s - stop;
	out->timeout = stop;
}

/* Cost of one poll: MODE 0 acquire load, 1 relaxed load + acquire fence. */
template <bool SYS, int MODE>
__global__ void load_kernel(const uint64_t *p, int samples, uint64_t *ns, uint64_t *sink)
{
	uint64_t sum = 0;
	for (int s = 0; s < samples; s++) {
		uint64_t t0 = gtime();
		for (int k = 0; k < 64; k++) {
			if (MODE == 0) {
				sum += ld_acquire<SYS>(p);
			} else {
				sum += ld_relaxed<SYS>(p);
				fence_acq_rel<SYS>();
			}
		}
		ns[s] = (gtime() - t0) / 64;
	}
	*sink = sum;
}

/* fence.sc with stores in flight: each lane of one warp stores 16 lines,
 * then (FENCE) fence.sc at the scope; one sample per round, ns. */
template <bool SYS, int FENCE>
__global__ void fence_kernel(uint4 *buf, int samples, uint64_t *ns)
{
	for (int s = 0; s < samples; s++) {
		__syncwarp();
		uint64_t t0 = gtime();
		for (int k = 0; k < 16; k++)
			st_weak16(&buf[(k * 32 + threadIdx.x) * 8], make_uint4(s, k, 0, 0));
		if (FENCE)
			fence_sc<SYS>();
		__syncwarp();
		if (threadIdx.x == 0)
			ns[s] = gtime() - t0;
	}
}

/* %globaltimer: the nonzero differences between consecutive reads. */
__global__ void gtimer_kernel(int samples, uint64_t *ns)
{
	uint64_t last = gtime();
	int s = 0;
	for (long n = 0; s < samples && n < (1l << 26); n++) {
		uint64_t t = gtime();
		if (t != last) {
			ns[s++] = t - last;
			last = t;
		}
	}
	for (; s < samples; s++)
		ns[s] = 0;
}

/* cuStreamWriteValue64 to a kernel: waits for the host's value in device
 * memory, answers in pinned host memory. */
__global__ void write_value_kernel(const uint64_t *flag, uint64_t *ack, uint64_t iters,
				   uint64_t budget, struct result *out)
{
	uint64_t deadline = gtime() + budget, i;
	for (i = 1; i <= iters; i++) {
		if (!wait_ge<true>(flag, i, deadline))
			break;
		st_release<true>(ack, i);
	}
	out->trials = i - 1;
	out->timeout = i <= iters;
}

/* Co-residency: spins for `span` ns once both agents have started, counting
 * the other's progress and the longest gap in its own timeline. */
__global__ void spin_kernel(struct ctl *c, int role, uint64_t span, uint64_t budget,
			    struct result *out)
{
	uint64_t start = gtime(), deadline = start + budget, k = 0, seen = 0, last_other = 0;
	uint64_t gap = 0;
	st_relaxed<true>(&c->count[role], 1);
	while (ld_relaxed<true>(&c->count[!role]) == 0)
		if (gtime() > deadline) {
			out->timeout = 1;
			return;
		}
	uint64_t t = gtime(), end = t + span;
	while (t < end) {
		uint64_t u = gtime();
		gap = u - t > gap ? u - t : gap;
		t = u;
		st_relaxed<true>(&c->count[role], ++k + 1);
		uint64_t o = ld_relaxed<true>(&c->count[!role]);
		if (o != last_other) {
			seen++;
			last_other = o;
		}
	}
	out->trials = seen;
	out->gap_ns = gap;
	out->timeout = 0;
}

/* Bandwidth: 16-byte vectors, four loads in flight per thread. */
__global__ void copy_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i + 3 * stride < n; i += 4 * stride) {
		uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
		dst[i] = a;
		dst[i + stride] = b;
		dst[i + 2 * stride] = c;
		dst[i + 3 * stride] = d;
	}
	for (; i < n; i += stride)
		dst[i] = src[i];
}

/* Bytes per ns (GB/s) of copying `len` bytes from `src` to `dst` by the
 * copy engine (kind 0) or by copy_kernel on `blocks` blocks of 512: the
 * median of 5 timed copies after one warm-up. */
static double copy_gbps(int kind, void *dst, const void *src, size_t len, int blocks,
			cudaEvent_t e0, cudaEvent_t e1)
{
	std::vector<uint64_t> t;
	for (int rep = 0; rep < 6; rep++) {
		cudaEventRecord(e0);
		if (kind == 0)
			cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice);
		else
			copy_kernel<<<blocks, 512>>>((uint4 *)dst, (const uint4 *)src, len / 16);
		cudaEventRecord(e1);
		cudaEventSynchronize(e1);
		float ms = 0;
		cudaEventElapsedTime(&ms, e0, e1);
		if (rep)
			t.push_back((uint64_t)(ms * 1e6));
	}
	std::sort(t.begin(), t.end());
	return (double)len / (double)t[t.size() / 2];
}

__global__ void fill_kernel(uint32_t *p, size_t n, uint32_t seed)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = seed * 2654435761u + (uint32_t)i;
}

__global__ void check_kernel(const uint32_t *p, size_t n, uint32_t seed, unsigned long long *bad)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		if (p[i] != seed * 2654435761u + (uint32_t)i)
			atomicAdd(bad, 1ull);
}

/* ---- host helpers ----------------------------------------------------------- */

static int device_id;
static int sm_count;

static void pct(std::vector<uint64_t> v, double *p50, double *p99)
{
	v.erase(std::remove(v.begin(), v.end(), 0ull), v.end());
	if (v.empty()) {
		*p50 = *p99 = -1;
		return;
	}
	std::sort(v.begin(), v.end());
	*p50 = (double)v[v.size() / 2];
	*p99 = (double)v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

static void print_pct(const char *key, const std::vector<uint64_t> &v)
{
	double a, b;
	pct(v, &a, &b);
	if (a < 0) {
		kv("%s=error:no-samples", key);
		return;
	}
	kv("%s.p50_ns=%.0f", key, a);
	kv("%s.p99_ns=%.0f", key, b);
}

/* A blocking exact transfer on the socket pair: sends `n` bytes from `p`
 * (`out`), or receives them into it. */
static int xfer_all(int fd, void *p, size_t n, int out)
{
	char *c = (char *)p;
	while (n) {
		ssize_t k = out ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);
		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return -1;
		}
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static int send_all(int fd, const void *p, size_t n)
{
	return xfer_all(fd, (void *)p, n, 1);
}

static int recv_all(int fd, void *p, size_t n)
{
	return xfer_all(fd, p, n, 0);
}

static int send_fd(int sock, int fd, uint64_t size)
{
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &size, sizeof(size) };
	struct msghdr m;
	memset(&m, 0, sizeof(m));
	memset(ctrl, 0, sizeof(ctrl));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctrl;
	m.msg_controllen = sizeof(ctrl);
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(size) ? 0 : -1;
}

static int recv_fd(int sock, int *fd, uint64_t *size)
{
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { size, sizeof(*size) };
	struct msghdr m;
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctrl;
	m.msg_controllen = sizeof(ctrl);
	*fd = -1;
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*size))
		return -1;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (!h && *size == 0)
		return 0; /* no region: the sender could not export one */
	if (!h || h->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(fd, CMSG_DATA(h), sizeof(int));
	return 0;
}

/* A VMM allocation of at least `want` bytes, exportable as a POSIX fd,
 * mapped read-write for this device. */
struct vmm {
	CUdeviceptr va;
	size_t size;
	CUmemGenericAllocationHandle h;
};

static CUmemAllocationProp vmm_prop(void)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = device_id;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	return p;
}

static int vmm_map(struct vmm *m)
{
	CUmemAccessDesc a;
	memset(&a, 0, sizeof(a));
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = device_id;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU_TRY(p_cuMemAddressReserve(&m->va, m->size, 0, 0, 0));
	CU_TRY(p_cuMemMap(m->va, m->size, 0, m->h, 0));
	CU_TRY(p_cuMemSetAccess(m->va, m->size, &a, 1));
	return 0;
fail:
	return -1;
}

static int vmm_alloc(struct vmm *m, size_t want)
{
	CUmemAllocationProp p = vmm_prop();
	size_t gran = 0;
	memset(m, 0, sizeof(*m));
	CU_TRY(p_cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	m->size = (want + gran - 1) / gran * gran;
	CU_TRY(p_cuMemCreate(&m->h, m->size, &p, 0));
	return vmm_map(m);
fail:
	return -1;
}

/* ---- the peer protocol ------------------------------------------------------ */

enum op {
	OP_QUIT,
	OP_VERIFY,    /* check the parent's pattern in [0, len); write ours at len */
	OP_MP,        /* mp_kernel role 1 */
	OP_SB,        /* sb_kernel role 1 */
	OP_PING,      /* ping_kernel role 1 */
	OP_SPIN,      /* spin_kernel role 1 */
	OP_BW,        /* copies into the imported region */
	OP_LEGACY,    /* legacy IPC handle follows: open, check, write */
};

struct cmd {
	int32_t op, sys, fence, pad;
	uint64_t iters, budget, len;
};

struct reply {
	int32_t rc, pad;
	double v[6];
	struct result r;
};

#define BUDGET_NS 3000000000ull /* one kernel's own limit */

/* The peer's side of every operation, on the shared region `base`. */
static int peer_serve(int sock, char *base)
{
	struct ctl *c = (struct ctl *)base;
	struct result *res;
	unsigned long long *bad;
	uint64_t *ns;
	char *local = NULL;
	RT_MUST(cudaMalloc((void **)&res, sizeof(*res)));
	RT_MUST(cudaMalloc((void **)&bad, sizeof(*bad)));
	RT_MUST(cudaMalloc((void **)&ns, 4096 * sizeof(uint64_t)));
	for (;;) {
		struct cmd m;
		struct reply r;
		memset(&r, 0, sizeof(r));
		if (recv_all(sock, &m, sizeof(m)) != 0 || m.op == OP_QUIT)
			break;
		cudaMemset(res, 0, sizeof(*res));
		switch (m.op) {
		case OP_VERIFY: {
			size_t n = m.len / 4;
			cudaMemset(bad, 0, sizeof(*bad));
			check_kernel<<<sm_count, 256>>>((const uint32_t *)(base + DATA_OFF), n, 1, bad);
			fill_kernel<<<sm_count, 256>>>((uint32_t *)(base + DATA_OFF + m.len), n, 2);
			unsigned long long b = 0;
			r.rc = cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost);
			r.v[0] = (double)b;
			break;
		}
		case OP_MP:
			if (m.sys)
				mp_kernel<true><<<1, 256>>>(c, (uint4 *)(base + MP_OFF), 1, m.iters,
							    m.budget, res);
			else
				mp_kernel<false><<<1, 256>>>(c, (uint4 *)(base + MP_OFF), 1, m.iters,
							     m.budget, res);
			break;
		case OP_SB: {
			uint64_t *x = (uint64_t *)(base + CTL_BYTES), *y = x + SB_MAX, *s1 = y + 2 * SB_MAX;
#define SB(S, F) sb_kernel<S, F><<<1, 1>>>(c, x, y, s1, 1, m.iters, m.budget, res)
			if (m.sys && m.fence)
				SB(true, 1);
			else if (m.sys)
				SB(true, 0);
			else if (m.fence)
				SB(false, 1);
			else
				SB(false, 0);
#undef SB
			break;
		}
		case OP_PING:
			if (m.sys)
				ping_kernel<true><<<1, 1>>>(c, 1, (int)m.iters, 16, m.budget, ns, res);
			else
				ping_kernel<false><<<1, 1>>>(c, 1, (int)m.iters, 16, m.budget, ns, res);
			break;
		case OP_SPIN:
			spin_kernel<<<1, 1>>>(c, 1, m.iters, m.budget, res);
			break;
		case OP_BW: {
			/* Copy engine and kernel copy from local memory into the
			 * imported region; GB/s, median of 5. */
			if (!local && cudaMalloc((void **)&local, BW_MAX) != cudaSuccess) {
				r.rc = -1;
				break;
			}
			cudaEvent_t e0, e1;
			cudaEventCreate(&e0);
			cudaEventCreate(&e1);
			for (int kind = 0; kind < 2; kind++)
				r.v[kind] = copy_gbps(kind, base + DATA_OFF, local, m.len,
						      sm_count * 4, e0, e1);
			cudaEventDestroy(e0);
			cudaEventDestroy(e1);
			r.rc = cudaGetLastError();
			break;
		}
		case OP_LEGACY: {
			cudaIpcMemHandle_t h;
			void *p = NULL;
			if (recv_all(sock, &h, sizeof(h)) != 0)
				return 1;
			r.rc = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
			if (r.rc == 0) {
				size_t n = m.len / 4;
				cudaMemset(bad, 0, sizeof(*bad));
				check_kernel<<<sm_count, 256>>>((const uint32_t *)p, n, 3, bad);
				fill_kernel<<<sm_count, 256>>>((uint32_t *)p + n, n, 4);
				unsigned long long b = 0;
				r.rc = cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost);
				r.v[0] = (double)b;
				cudaIpcCloseMemHandle(p);
			}
			break;
		}
		default:
			r.rc = -1;
		}
		cudaError_t e = cudaDeviceSynchronize();
		if (r.rc == 0)
			r.rc = e;
		cudaMemcpy(&r.r, res, sizeof(r.r), cudaMemcpyDeviceToHost);
		if (send_all(sock, &r, sizeof(r)) != 0)
			break;
	}
	return 0;
}

/* The second process: imports the parent's region (fd over SCM_RIGHTS), or
 * takes a legacy IPC handle when the parent says VMM import failed, then
 * serves the parent's operations. */
static int peer_main(int sock)
{
	int fd = -1, imported = 0;
	uint64_t size = 0;
	char *base = NULL;
	struct vmm m;
	memset(&m, 0, sizeof(m));
	RT_MUST(cudaSetDevice(device_id));
	RT_MUST(cudaFree(0));
	if (load_driver() != 0)
		return 1;
	cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device_id);
	if (recv_fd(sock, &fd, &size) != 0)
		return 1;
	int32_t rc = -1;
	if (fd >= 0 && size) {
		m.size = size;
		CU_TRY(p_cuMemImportFromShareableHandle(&m.h, (void *)(uintptr_t)fd,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
		if (vmm_map(&m) != 0)
			goto fail;
		base = (char *)m.va;
		imported = 1;
		rc = 0;
	}
fail:
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		fprintf(stderr, "peer: %s\n", err_buf);
	if (send_all(sock, &rc, sizeof(rc)) != 0)
		return 1;
	if (!imported) {
		/* The parent falls back to a legacy handle of its region. */
		cudaIpcMemHandle_t h;
		if (recv_all(sock, &h, sizeof(h)) != 0)
			return 1;
		void *p = NULL;
		rc = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
		send_all(sock, &rc, sizeof(rc));
		if (rc != 0)
			return 1;
		base = (char *)p;
	}
	return peer_serve(sock, base);
}

/* ---- the parent's sections -------------------------------------------------- */

static int sock = -1;
static char *shared;     /* the region both processes map, or NULL */
static struct ctl *lctl; /* a control area in local device memory */
static struct result *dres;
static uint64_t *dns;
#define NS_MAX 4096

static int peer_call(struct cmd m)
{
	if (sock < 0 || send_all(sock, &m, sizeof(m)) != 0)
		return -1;
	return 0;
}

static int peer_wait(struct reply *r)
{
	return recv_all(sock, r, sizeof(*r));
}

static struct result get_result(void)
{
	struct result r;
	memset(&r, 0, sizeof(r));
	cudaMemcpy(&r, dres, sizeof(r), cudaMemcpyDeviceToHost);
	return r;
}

static std::vector<uint64_t> get_ns(int n)
{
	std::vector<uint64_t> v((size_t)n);
	cudaMemcpy(v.data(), dns, (size_t)n * sizeof(uint64_t), cudaMemcpyDeviceToHost);
	return v;
}

static void section_env(void)
{
	int drv = 0, rt = 0, v = 0;
	cudaDeviceProp p;
	step("env", 20);
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	kv("env.driver_version=%d.%d", drv / 1000, drv % 1000 / 10);
	kv("env.runtime_version=%d.%d", rt / 1000, rt % 1000 / 10);
	if (cudaGetDeviceProperties(&p, device_id) == cudaSuccess) {
		kv("env.device=%d", device_id);
		kv("env.name=%s", p.name);
		kv("env.compute_capability=%d.%d", p.major, p.minor);
		kv("env.memory_bytes=%zu", p.totalGlobalMem);
	}
	kv("env.sms=%d", sm_count);
	cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device_id);
	kv("env.l2_bytes=%d", v);
	cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device_id);
	kv("env.sm_clock_khz=%d", v);
	cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device_id);
	kv("env.memory_clock_khz=%d", v);
	cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerMultiProcessor, device_id);
	kv("env.threads_per_sm=%d", v);
	if (p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, device_id) == CUDA_SUCCESS)
		kv("env.mps=%s", v ? "on" : "off");
	else
		kv("env.mps=unknown");
	const char *pctv = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
	kv("env.mps_active_thread_percentage=%s", pctv && *pctv ? pctv : "unset");
	CUexecAffinityParam a;
	memset(&a, 0, sizeof(a));
	if (p_cuCtxGetExecAffinity(&a, CU_EXEC_AFFINITY_TYPE_SM_COUNT) == CUDA_SUCCESS)
		kv("env.context_sm_count=%u", a.param.smCount.val);
	else
		kv("env.context_sm_count=unknown");
	/* NVSHMEM: the wheel's dist-info in Python's site directories. */
	FILE *f = popen("python3 -c 'import site; print(\"\\n\".join(site.getsitepackages() + "
			"[site.getusersitepackages()]))' 2>/dev/null",
			"r");
	char dir[512], found[512] = "";
	while (f && fgets(dir, sizeof(dir), f) && !found[0]) {
		dir[strcspn(dir, "\n")] = 0;
		char pat[600];
		glob_t g;
		snprintf(pat, sizeof(pat), "%s/nvidia_nvshmem*.dist-info", dir);
		if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc) {
			const char *base = strrchr(g.gl_pathv[0], '/') + 1;
			const char *dash = strchr(base, '-');
			snprintf(found, sizeof(found), "%.*s", (int)(strstr(base, ".dist-info") - dash - 1),
				 dash + 1);
			kv("env.nvshmem_path=%s/nvidia/nvshmem", dir);
		}
		globfree(&g);
	}
	if (f)
		pclose(f);
	kv("env.nvshmem_version=%s", found[0] ? found : "absent");
}

static int vmm_ok;

/* The region both processes map: VMM exported as a POSIX fd and imported by
 * the peer; where that fails, a legacy IPC handle of a cudaMalloc region. */
static void shared_region(void)
{
	struct vmm m;
	int fd = -1;
	int32_t peer_rc = -1;
	uint64_t none = 0;
	step("probe.vmm_posix_fd", 30);
	if (vmm_alloc(&m, SHARED_BYTES) != 0)
		goto fail;
	CU_TRY(p_cuMemExportToShareableHandle(&fd, m.h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	if (send_fd(sock, fd, m.size) != 0 || recv_all(sock, &peer_rc, sizeof(peer_rc)) != 0) {
		snprintf(err_buf, sizeof(err_buf), "error:peer-gone");
		close(fd);
		sock = -1;
		kv("probe.vmm_posix_fd_import=%s", err_buf);
		return;
	}
	close(fd);
	if (peer_rc != 0) {
		snprintf(err_buf, sizeof(err_buf), "fail:peer-import(its stderr says why)");
		kv("probe.vmm_posix_fd_import=%s", err_buf);
	} else {
		shared = (char *)m.va;
		vmm_ok = 1;
	}
	goto fallback;
fail:
	kv("probe.vmm_posix_fd_import=%s", err_buf);
	/* The peer waits for an fd: tell it there is none. */
	if (send_all(sock, &none, sizeof(none)) != 0 ||
	    recv_all(sock, &peer_rc, sizeof(peer_rc)) != 0) {
		sock = -1;
		return;
	}
fallback:
	if (!vmm_ok) {
		step("probe.legacy_region", 30);
		void *p = NULL;
		cudaIpcMemHandle_t h;
		int32_t rc = -1;
		if (cudaMalloc(&p, SHARED_BYTES) == cudaSuccess &&
		    cudaIpcGetMemHandle(&h, p) == cudaSuccess && send_all(sock, &h, sizeof(h)) == 0 &&
		    recv_all(sock, &rc, sizeof(rc)) == 0 && rc == 0)
			shared = (char *)p;
	}
	kv("probe.shared_region=%s", vmm_ok ? "vmm_posix_fd" : shared ? "legacy_ipc" : "none");
}

/* Written here, read there; written there, read here (1 MiB each way). */
static void vmm_read_write(void)
{
	step("probe.vmm_posix_fd_rw", 20);
	size_t len = 1 << 20;
	unsigned long long *bad = NULL, b = 1;
	struct reply r;
	struct cmd c = { OP_VERIFY, 0, 0, 0, 0, 0, len };
	memset(&r, 0, sizeof(r));
	cudaMalloc((void **)&bad, sizeof(*bad));
	cudaMemset(bad, 0, sizeof(*bad));
	fill_kernel<<<sm_count, 256>>>((uint32_t *)(shared + DATA_OFF), len / 4, 1);
	cudaDeviceSynchronize();
	if (peer_call(c) == 0 && peer_wait(&r) == 0 && r.rc == 0) {
		check_kernel<<<sm_count, 256>>>((const uint32_t *)(shared + DATA_OFF + len), len / 4, 2,
						 bad);
		cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost);
		kv("probe.vmm_posix_fd_import=%s", r.v[0] == 0 && b == 0 ? "pass" : "fail:wrong-bytes");
	} else {
		kv("probe.vmm_posix_fd_import=error:peer-rc-%d", r.rc);
	}
	cudaFree(bad);
}

/* Legacy IPC: a cudaMalloc buffer's handle, opened by the peer. */
static void legacy_ipc(void)
{
	step("probe.legacy_ipc", 20);
	size_t len = 1 << 20;
	void *p = NULL;
	unsigned long long *bad = NULL, b = 1;
	cudaIpcMemHandle_t h;
	struct reply r;
	struct cmd c = { OP_LEGACY, 0, 0, 0, 0, 0, len };
	RT_TRY(cudaMalloc(&p, 2 * len));
	RT_TRY(cudaMalloc((void **)&bad, sizeof(*bad)));
	RT_TRY(cudaMemset(bad, 0, sizeof(*bad)));
	fill_kernel<<<sm_count, 256>>>((uint32_t *)p, len / 4, 3);
	RT_TRY(cudaDeviceSynchronize());
	RT_TRY(cudaIpcGetMemHandle(&h, p));
	if (peer_call(c) != 0 || send_all(sock, &h, sizeof(h)) != 0 || peer_wait(&r) != 0) {
		snprintf(err_buf, sizeof(err_buf), "error:peer-gone");
		goto fail;
	}
	if (r.rc != 0) {
		snprintf(err_buf, sizeof(err_buf), "error:peer:%s", cudaGetErrorName((cudaError_t)r.rc));
		goto fail;
	}
	check_kernel<<<sm_count, 256>>>((const uint32_t *)p + len / 4, len / 4, 4, bad);
	cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost);
	snprintf(err_buf, sizeof(err_buf), "%s", r.v[0] == 0 && b == 0 ? "pass" : "fail:wrong-bytes");
fail:
	kv("probe.legacy_ipc=%s", err_buf);
	cudaFree(bad);
	cudaFree(p);
}

/* Two spinning clients: does each keep running while the other spins? */
static void coresident(void)
{
	step("probe.coresident", 15);
	struct reply r;
	struct cmd c = { OP_SPIN, 1, 0, 0, 300000000ull, BUDGET_NS, 0 };
	cudaMemset(shared, 0, sizeof(struct ctl));
	cudaMemset(dres, 0, sizeof(*dres));
	cudaDeviceSynchronize();
	if (peer_call(c) != 0) {
		kv("probe.coresident=error:peer-gone");
		return;
	}
	spin_kernel<<<1, 1>>>((struct ctl *)shared, 0, 300000000ull, BUDGET_NS, dres);
	cudaDeviceSynchronize();
	struct result mine = get_result();
	if (peer_wait(&r) != 0) {
		kv("probe.coresident=error:peer-gone");
		return;
	}
	uint64_t gap = std::max(mine.gap_ns, r.r.gap_ns);
	kv("probe.coresident_max_gap_ns=%llu", (unsigned long long)gap);
	kv("probe.coresident_progress_seen=%llu/%llu", mine.trials, r.r.trials);
	if (mine.timeout || r.r.timeout)
		kv("probe.coresident=fail:peer-never-ran");
	else
		kv("probe.coresident=%s",
		   gap < 1000000 && mine.trials > 100 && r.r.trials > 100 ? "pass" : "fail:time-sliced");
}

static void section_probe(void)
{
	int v = 0;
	step("probe.attributes", 10);
	static const struct {
		const char *key;
		CUdevice_attribute a;
	} attrs[] = {
		{ "probe.attr_vmm", CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED },
		{ "probe.attr_posix_fd_handles",
		  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED },
		{ "probe.attr_gpudirect_rdma_with_vmm",
		  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED },
		{ "probe.attr_stream_mem_ops_64", CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS },
	};
	for (auto &a : attrs) {
		CUresult r = p_cuDeviceGetAttribute(&v, a.a, device_id);
		if (r == CUDA_SUCCESS)
			kv("%s=%s", a.key, v ? "pass" : "fail");
		else
			kv("%s=error:%s", a.key, cu_name(r));
	}
	shared_region();
	if (sock < 0)
		return;
	if (!shared) {
		close(sock);
		sock = -1;
		return;
	}
	cudaMemset(shared, 0, DATA_OFF);
	if (vmm_ok)
		vmm_read_write();
	legacy_ipc();
	coresident();
}

static const uint64_t LITMUS_MP_ITERS = 20000;

/* Runs both roles of a two-party test: role 0 here and role 1 in the peer
 * process, which `m` asks to run it (`cross`), or both here as two launches
 * on streams of their own, so that either may start first.
 * `launch(role, stream, out)` starts one role's kernel. `theirs`, when not
 * NULL, gets role 1's result. False when the peer is gone (reported under
 * `key`). */
template <typename Launch>
static bool two_roles(const char *key, bool cross, struct cmd m, Launch launch,
		      struct result *theirs)
{
	if (cross) {
		struct reply r;
		if (peer_call(m) != 0) {
			kv("%s=error:peer-gone", key);
			return false;
		}
		launch(0, (cudaStream_t)0, dres);
		cudaDeviceSynchronize();
		if (peer_wait(&r) != 0) {
			kv("%s=error:peer-gone", key);
			return false;
		}
		if (theirs)
			*theirs = r.r;
		return true;
	}
	cudaStream_t s[2];
	cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking);
	for (int role = 0; role < 2; role++)
		launch(role, s[role], dres + role);
	cudaDeviceSynchronize();
	cudaStreamDestroy(s[0]);
	cudaStreamDestroy(s[1]);
	if (theirs)
		cudaMemcpy(theirs, dres + 1, sizeof(*theirs), cudaMemcpyDeviceToHost);
	return true;
}

static void litmus_mp(bool cross, bool sys)
{
	char key[96];
	snprintf(key, sizeof(key), "litmus.mp.%s.%s", cross ? "process" : "block", sys ? "sys" : "gpu");
	step(key, 12);
	struct ctl *c = cross ? (struct ctl *)shared : lctl;
	uint4 *data = (uint4 *)((char *)c + MP_OFF);
	struct result mine, theirs;
	memset(&theirs, 0, sizeof(theirs));
	cudaMemset(c, 0, sizeof(*c));
	cudaMemset(dres, 0, 2 * sizeof(*dres));
	cudaDeviceSynchronize();
	struct cmd m = { OP_MP, sys, 0, 0, LITMUS_MP_ITERS, BUDGET_NS, 0 };
	auto launch = [&](int role, cudaStream_t st, struct result *out) {
		if (sys)
			mp_kernel<true><<<1, 256, 0, st>>>(c, data, role, LITMUS_MP_ITERS, BUDGET_NS,
							   out);
		else
			mp_kernel<false><<<1, 256, 0, st>>>(c, data, role, LITMUS_MP_ITERS, BUDGET_NS,
							    out);
	};
	if (!two_roles(key, cross, m, launch, &theirs))
		return;
	mine = get_result();
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		kv("%s=error:%s", key, cudaGetErrorName(e));
	else
		kv("%s=%llu/%llu%s", key, theirs.violations, theirs.trials,
		   mine.timeout || theirs.timeout ? " (timed out)" : "");
}

static void litmus_sb(bool cross, bool sys, int fence)
{
	char key[96];
	snprintf(key, sizeof(key), "litmus.sb.%s.%s.%s", cross ? "process" : "block", sys ? "sys" : "gpu",
		 fence ? "fence_sc" : "release_acquire");
	step(key, 12);
	struct ctl *c = cross ? (struct ctl *)shared : lctl;
	uint64_t *x = (uint64_t *)((char *)c + CTL_BYTES), *y = x + SB_MAX, *s0 = y + SB_MAX,
		 *s1 = s0 + SB_MAX;
	cudaMemset(c, 0, CTL_BYTES + 4 * SB_MAX * sizeof(uint64_t));
	cudaMemset(dres, 0, 2 * sizeof(*dres));
	cudaDeviceSynchronize();
	struct result theirs;
	memset(&theirs, 0, sizeof(theirs));
#define SB(role, st, out)                                                                        \
	do {                                                                                     \
		uint64_t *seen_ = role ? s1 : s0;                                                \
		if (sys && fence)                                                                \
			sb_kernel<true, 1><<<1, 1, 0, st>>>(c, x, y, seen_, role, SB_MAX, BUDGET_NS, out); \
		else if (sys)                                                                    \
			sb_kernel<true, 0><<<1, 1, 0, st>>>(c, x, y, seen_, role, SB_MAX, BUDGET_NS, out); \
		else if (fence)                                                                  \
			sb_kernel<false, 1><<<1, 1, 0, st>>>(c, x, y, seen_, role, SB_MAX, BUDGET_NS, out); \
		else                                                                             \
			sb_kernel<false, 0><<<1, 1, 0, st>>>(c, x, y, seen_, role, SB_MAX, BUDGET_NS, out); \
	} while (0)
	struct cmd m = { OP_SB, sys, fence, 0, SB_MAX, BUDGET_NS, 0 };
	auto launch = [&](int role, cudaStream_t st, struct result *out) { SB(role, st, out); };
	bool done = two_roles(key, cross, m, launch, &theirs);
#undef SB
	if (!done)
		return;
	struct result mine = get_result();
	uint64_t n = std::min(mine.trials, theirs.trials), bad = 0;
	std::vector<uint64_t> a(SB_MAX), b(SB_MAX);
	cudaMemcpy(a.data(), s0, SB_MAX * sizeof(uint64_t), cudaMemcpyDeviceToHost);
	cudaMemcpy(b.data(), s1, SB_MAX * sizeof(uint64_t), cudaMemcpyDeviceToHost);
	for (uint64_t i = 0; i < n; i++)
		bad += a[i] == 0 && b[i] == 0;
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		kv("%s=error:%s", key, cudaGetErrorName(e));
	else
		kv("%s=%llu/%llu%s", key, (unsigned long long)bad, (unsigned long long)n,
		   mine.timeout || theirs.timeout ? " (timed out)" : "");
}

static void section_litmus(void)
{
	for (int cross = 0; cross < 2; cross++) {
		if (cross && !shared)
			break;
		for (int sys = 0; sys < 2; sys++)
			litmus_mp(cross, sys);
		for (int sys = 0; sys < 2; sys++)
			for (int fence = 0; fence < 2; fence++)
				litmus_sb(cross, sys, fence);
	}
}

/* One-way flag latency: two blocks (two launches) of this process, or this
 * process and the peer; `c` in device memory or pinned host memory. */
static void ping(const char *key, struct ctl *c, bool cross, bool sys, int samples)
{
	step(key, 12);
	cudaMemset(c, 0, sizeof(*c));
	cudaMemset(dres, 0, 2 * sizeof(*dres));
	cudaMemset(dns, 0, NS_MAX * sizeof(uint64_t));
	cudaDeviceSynchronize();
	struct cmd m = { OP_PING, sys, 0, 0, (uint64_t)samples, BUDGET_NS, 0 };
	auto launch = [&](int role, cudaStream_t st, struct result *out) {
		if (sys)
			ping_kernel<true><<<1, 1, 0, st>>>(c, role, samples, 16, BUDGET_NS, dns, out);
		else
			ping_kernel<false><<<1, 1, 0, st>>>(c, role, samples, 16, BUDGET_NS, dns, out);
	};
	if (!two_roles(key, cross, m, launch, NULL))
		return;
	cudaError_t e = cudaGetLastError();
	struct result mine = get_result();
	if (e != cudaSuccess) {
		kv("%s=error:%s", key, cudaGetErrorName(e));
		return;
	}
	if (mine.timeout)
		kv("%s.timed_out_after_samples=%llu", key, mine.trials);
	print_pct(key, get_ns((int)mine.trials));
}

static void section_floor(void)
{
	ping("cost.pingpong.block.gpu", lctl, false, false, 2000);
	ping("cost.pingpong.block.sys", lctl, false, true, 2000);
}

static void section_cost(void)
{
	section_floor();
	if (shared) {
		ping("cost.pingpong.process.gpu", (struct ctl *)shared, true, false, 1000);
		ping("cost.pingpong.process.sys", (struct ctl *)shared, true, true, 1000);
	}
	/* Relaxed polling of pinned host memory, between two blocks. */
	struct ctl *h = NULL;
	if (cudaHostAlloc((void **)&h, sizeof(*h), cudaHostAllocMapped | cudaHostAllocPortable) ==
	    cudaSuccess) {
		ping("cost.pingpong.block.pinned_host", h, false, true, 1000);
		cudaFreeHost(h);
	} else {
		kv("cost.pingpong.block.pinned_host=error:cudaHostAlloc");
	}

	/* One poll: acquire load against relaxed load + acquire fence. */
	uint64_t *sink = (uint64_t *)lctl + 64;
#define LOAD(name, S, M)                                                                         \
	do {                                                                                     \
		step(name, 10);                                                                  \
		load_kernel<S, M><<<1, 1>>>(&lctl->flag, 1000, dns, sink);                       \
		if (cudaDeviceSynchronize() == cudaSuccess)                                      \
			print_pct(name, get_ns(1000));                                           \
		else                                                                             \
			kv("%s=error:%s", name, cudaGetErrorName(cudaGetLastError()));           \
	} while (0)
	LOAD("cost.load_acquire.gpu", false, 0);
	LOAD("cost.load_relaxed_fence.gpu", false, 1);
	LOAD("cost.load_acquire.sys", true, 0);
	LOAD("cost.load_relaxed_fence.sys", true, 1);
#undef LOAD

	/* fence.sc with 512 16-byte stores in flight (one warp). */
	uint4 *buf = NULL;
	if (cudaMalloc((void **)&buf, 16 * 32 * 8 * sizeof(uint4)) == cudaSuccess) {
#define FENCE(name, S, F)                                                                        \
	do {                                                                                     \
		step(name, 10);                                                                  \
		fence_kernel<S, F><<<1, 32>>>(buf, 1000, dns);                                   \
		if (cudaDeviceSynchronize() == cudaSuccess)                                      \
			print_pct(name, get_ns(1000));                                           \
		else                                                                             \
			kv("%s=error:%s", name, cudaGetErrorName(cudaGetLastError()));           \
	} while (0)
		FENCE("cost.stores_no_fence", true, 0);
		FENCE("cost.stores_fence_sc.gpu", false, 1);
		FENCE("cost.stores_fence_sc.sys", true, 1);
#undef FENCE
		cudaFree(buf);
	}

	step("cost.globaltimer_step", 10);
	gtimer_kernel<<<1, 1>>>(1000, dns);
	if (cudaDeviceSynchronize() == cudaSuccess)
		print_pct("cost.globaltimer_step", get_ns(1000));

	/* cuStreamWriteValue64 to a running kernel, back through pinned
	 * memory: the round trip as the host sees it. */
	step("cost.write_value64_roundtrip", 15);
	{
		uint64_t *flag = NULL, *ack = NULL;
		cudaStream_t ks, ws;
		const int n = 1000;
		std::vector<uint64_t> t;
		cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking);
		cudaStreamCreateWithFlags(&ws, cudaStreamNonBlocking);
		if (cudaMalloc((void **)&flag, 8) != cudaSuccess ||
		    cudaHostAlloc((void **)&ack, 8, cudaHostAllocMapped) != cudaSuccess) {
			kv("cost.write_value64_roundtrip=error:alloc");
		} else {
			cudaMemset(flag, 0, 8);
			*(volatile uint64_t *)ack = 0;
			cudaMemset(dres, 0, sizeof(*dres));
			cudaDeviceSynchronize();
			write_value_kernel<<<1, 1, 0, ks>>>(flag, ack, n, BUDGET_NS, dres);
			int ok = 1;
			for (int i = 1; i <= n && ok; i++) {
				double t0 = now_ns();
				CUresult r = p_cuStreamWriteValue64((CUstream)ws, (CUdeviceptr)flag,
								    (cuuint64_t)i, 0);
				if (r != CUDA_SUCCESS) {
					kv("cost.write_value64_roundtrip=error:%s", cu_name(r));
					ok = 0;
					break;
				}
				while (*(volatile uint64_t *)ack < (uint64_t)i)
					if (now_ns() - t0 > 1e9) {
						kv("cost.write_value64_roundtrip=fail:no-answer");
						ok = 0;
						break;
					}
				t.push_back((uint64_t)(now_ns() - t0));
			}
			cudaStreamSynchronize(ks);
			if (ok)
				print_pct("cost.write_value64_roundtrip", t);
		}
		cudaStreamDestroy(ks);
		cudaStreamDestroy(ws);
		cudaFree(flag);
		cudaFreeHost(ack);
	}
}

static void section_bw(void)
{
	static const size_t sizes[] = { (size_t)16 << 20, (size_t)256 << 20, (size_t)1024 << 20 };
	char *src = NULL, *dst = NULL;
	cudaEvent_t e0, e1;
	step("bw.alloc", 20);
	if (cudaMalloc((void **)&src, BW_MAX) != cudaSuccess ||
	    cudaMalloc((void **)&dst, BW_MAX) != cudaSuccess) {
		kv("bw=error:cudaMalloc");
		cudaFree(src);
		return;
	}
	cudaMemset(src, 1, BW_MAX);
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	int per_sm = 0;
	cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_kernel, 512, 0);
	kv("bw.kernel_grid=%dx512", sm_count * std::max(per_sm, 1));
	for (size_t len : sizes) {
		char key[64];
		for (int kind = 0; kind < 2; kind++) {
			snprintf(key, sizeof(key), "bw.%s.local.%zuMiB_GBps", kind ? "kernel" : "copy_engine",
				 len >> 20);
			step(key, 15);
			double gbps = copy_gbps(kind, dst, src, len, sm_count * std::max(per_sm, 1),
						e0, e1);
			cudaError_t e = cudaGetLastError();
			if (e != cudaSuccess)
				kv("%s=error:%s", key, cudaGetErrorName(e));
			else
				kv("%s=%.1f", key, gbps);
		}
		if (!shared)
			continue;
		snprintf(key, sizeof(key), "bw.imported.%zuMiB", len >> 20);
		step(key, 20);
		struct cmd m = { OP_BW, 0, 0, 0, 0, 0, len };
		struct reply r;
		if (peer_call(m) != 0 || peer_wait(&r) != 0 || r.rc != 0) {
			kv("%s=error:peer", key);
			continue;
		}
		kv("bw.copy_engine.imported.%zuMiB_GBps=%.1f", len >> 20, r.v[0]);
		kv("bw.kernel.imported.%zuMiB_GBps=%.1f", len >> 20, r.v[1]);
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaFree(src);
	cudaFree(dst);
}

/* Starts this program again as the peer, before CUDA is initialized here. */
static int spawn_peer(const char *self)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	int fl = fcntl(sv[1], F_GETFD);
	fcntl(sv[1], F_SETFD, fl & ~FD_CLOEXEC);
	char fdarg[16], devarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	snprintf(devarg, sizeof(devarg), "%d", device_id);
	char *argv[] = { (char *)self, (char *)"--peer", fdarg, (char *)"-d", devarg, NULL };
	int rc = posix_spawn(&peer_pid, self, NULL, NULL, argv, environ);
	close(sv[1]);
	if (rc != 0) {
		close(sv[0]);
		peer_pid = 0;
		return -1;
	}
	return sv[0];
}

int main(int argc, char **argv)
{
	double limit = 170;
	int peer_fd = -1, i;
	const char *dev = getenv("FI_XPU_CUDA_DEVICE");
	std::vector<const char *> sections;
	device_id = dev ? atoi(dev) : 0;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--peer") && i + 1 < argc)
			peer_fd = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			device_id = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			limit = atof(argv[++i]);
		else if (!strcmp(argv[i], "env") || !strcmp(argv[i], "probe") ||
			 !strcmp(argv[i], "litmus") || !strcmp(argv[i], "cost") ||
			 !strcmp(argv[i], "bw") || !strcmp(argv[i], "floor"))
			sections.push_back(argv[i]);
		else {
			fprintf(stderr,
				"usage: %s [-d device] [-t seconds] [env|probe|litmus|cost|bw|floor...]\n",
				argv[0]);
			return 2;
		}
	}
	if (peer_fd >= 0)
		return peer_main(peer_fd);
	if (sections.empty())
		sections = { "env", "probe", "litmus", "cost", "bw" };
	auto want = [&](const char *s) {
		for (const char *x : sections)
			if (!strcmp(x, s))
				return true;
		return false;
	};
	bool need_peer = want("probe") || want("litmus") || want("cost") || want("bw");

	run_end = now_ns() + limit * 1e9;
	step("start", 30);
	pthread_t w;
	pthread_create(&w, NULL, watchdog, NULL);
	if (need_peer) {
		sock = spawn_peer("/proc/self/exe");
		if (sock < 0)
			kv("probe.peer_process=error:spawn");
	}
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= device_id) {
		kv("env.devices=%d", n);
		kv("error=no-cuda-device");
		if (peer_pid > 0)
			kill(peer_pid, SIGKILL);
		return 1;
	}
	RT_MUST(cudaSetDevice(device_id));
	RT_MUST(cudaFree(0));
	if (load_driver() != 0) {
		kv("error=driver-entry-points");
		return 1;
	}
	cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device_id);
	RT_MUST(cudaMalloc((void **)&lctl, DATA_OFF));
	RT_MUST(cudaMalloc((void **)&dres, 2 * sizeof(*dres)));
	RT_MUST(cudaMalloc((void **)&dns, NS_MAX * sizeof(uint64_t)));
	if (want("env"))
		section_env();
	if (need_peer && sock >= 0)
		section_probe();
	if (want("litmus"))
		section_litmus();
	if (want("cost"))
		section_cost();
	else if (want("floor"))
		section_floor();
	if (want("bw"))
		section_bw();
	step("end", 10);
	if (sock >= 0) {
		struct cmd q;
		memset(&q, 0, sizeof(q));
		q.op = OP_QUIT;
		send_all(sock, &q, sizeof(q));
		close(sock);
	}
	if (peer_pid > 0) {
		int st = 0;
		waitpid(peer_pid, &st, 0);
		kv("probe.peer_exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
	kv("done=1");
	return 0;
}
