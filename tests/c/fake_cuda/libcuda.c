/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A test double of the CUDA driver (libcuda.so.1): the entry points fi_xpu's
 * CUDA memory backend calls, over host memory. Built by the tests against
 * the real <cuda.h> (so every definition here has the driver's prototype)
 * and found through the same dlopen("libcuda.so.1") search as the real one,
 * with LD_LIBRARY_PATH naming its directory.
 *
 * - A physical allocation (cuMemCreate) is a memfd named "fake-cuda"; its
 *   POSIX shareable handle is a dup of that fd; importing a handle accepts
 *   only such memfds (anything else: CUDA_ERROR_INVALID_VALUE, as the real
 *   driver refuses what is not its handle).
 * - cuMemAddressReserve reserves PROT_NONE address space, cuMemMap maps the
 *   memfd there still PROT_NONE, cuMemSetAccess makes it read-write: a
 *   backend that forgets a step faults.
 * - cuMemAlloc memory is a memfd mapping too; cuMemGetHandleForAddressRange
 *   returns a dup of it as the "DMA-BUF" (whole allocations only). Its
 *   legacy IPC handle (cuIpcGetMemHandle) names the owner's pid and the
 *   memfd's descriptor there; cuIpcOpenMemHandle opens that memfd through
 *   /proc (same user) and maps it.
 * - Memory calls need a current context on the calling thread
 *   (CUDA_ERROR_INVALID_CONTEXT otherwise).
 *
 * - Streams: cuStreamCreate records the flags; copies, memsets and
 *   cuStreamWriteValue64 run at once (the double has no copy engine), and
 *   cuStreamSynchronize returns.
 *
 * Strict mode (FAKE_CUDA_STRICT=1) keeps device memory out of the host's
 * reach, as on a GPU whose memory the CPU cannot map:
 * - VMM mappings (cuMemMap) stay PROT_NONE to the process whatever
 *   cuMemSetAccess grants, so a host load or store into device memory
 *   faults; each has a second, private mapping of the same pages (the
 *   "device side") that only the double's copy functions use.
 * - The access cuMemSetAccess granted is opened only while a "kernel"
 *   runs: between fake_cuda_kernel_begin() and fake_cuda_kernel_end(),
 *   which a test calls around each launch on the host launcher (nested
 *   calls count).
 * - A copy, memset or wait on the legacy stream (NULL, CU_STREAM_LEGACY,
 *   CU_STREAM_PER_THREAD, a stream created without
 *   CU_STREAM_NON_BLOCKING, or a synchronous cuMemcpy*) while a kernel
 *   runs would wait for that kernel on a GPU, which may wait for the
 *   host: the double prints the call and aborts.
 *
 * Environment: FAKE_CUDA_DEVICES (default 1; 0 makes cuInit fail with
 * CUDA_ERROR_NO_DEVICE), FAKE_CUDA_GPU_ID (up to 5 characters in the
 * devices' UUIDs: processes with different values have different GPUs), FAKE_CUDA_FAIL=<entry point>:<CUresult> makes that
 * entry point fail, FAKE_CUDA_STRICT (above). -DFAKE_CUDA_NO_VMM leaves
 * out cuMemCreate (an old driver).
 */
#include <cuda.h>

#include "../fake_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GRANULARITY (64u << 10)
#define MAX_RANGES 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static int primary_refs[8];
static __thread CUcontext current;

struct handle {
	int fd;
	size_t size;
};

/* Reserved ranges, mapped ranges, cuMemAlloc'd ranges, host registrations,
 * peers' cuMemAlloc'd ranges opened from IPC handles. */
enum kind { FREE = 0, RESERVED, MAPPED, ALLOCATED, REGISTERED, IPC_OPENED };

static struct range {
	enum kind kind;
	uintptr_t base;
	size_t len;
	int fd;       /* MAPPED, ALLOCATED */
	void *alias;  /* MAPPED in strict mode: the device side's mapping */
	int prot;     /* MAPPED in strict mode: what cuMemSetAccess granted */
} ranges[MAX_RANGES];

/* Kernels running (strict mode opens device memory while this is > 0). */
static int kernels;

static int strict(void)
{
	const char *s = getenv("FAKE_CUDA_STRICT");
	return s && atoi(s) > 0;
}

static CUresult injected(const char *fn)
{
	return (CUresult)fake_injected("FAKE_CUDA_FAIL", fn, 10);
}

static int devices(void)
{
	return fake_count("FAKE_CUDA_DEVICES", INT_MAX);
}

#define ENTER(name) FAKE_ENTER(CUresult, name, CUDA_ERROR_NOT_INITIALIZED)

#define ENTER_CTX(name)                                    \
	do {                                               \
		ENTER(name);                               \
		if (!current)                              \
			return CUDA_ERROR_INVALID_CONTEXT; \
	} while (0)

/* The range of kind k holding [addr, addr + len) (at least the byte at addr). */
static struct range *find(enum kind k, uintptr_t addr, size_t len)
{
	int i;
	for (i = 0; i < MAX_RANGES; i++) {
		struct range *r = &ranges[i];
		if (r->kind == k && addr >= r->base && addr - r->base < r->len &&
		    len <= r->len - (addr - r->base))
			return r;
	}
	return NULL;
}

static struct range *add(enum kind k, uintptr_t base, size_t len, int fd)
{
	int i;
	for (i = 0; i < MAX_RANGES; i++) {
		if (ranges[i].kind == FREE) {
			ranges[i] = (struct range){ k, base, len, fd, NULL, PROT_NONE };
			return &ranges[i];
		}
	}
	return NULL;
}

static int is_our_memfd(int fd)
{
	char link[64], target[128];
	ssize_t n;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return strncmp(target, "/memfd:fake-cuda ", 17) == 0;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	switch (error) {
	case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; break;
	case CUDA_ERROR_INVALID_VALUE: *pStr = "CUDA_ERROR_INVALID_VALUE"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case CUDA_ERROR_NOT_INITIALIZED: *pStr = "CUDA_ERROR_NOT_INITIALIZED"; break;
	case CUDA_ERROR_NO_DEVICE: *pStr = "CUDA_ERROR_NO_DEVICE"; break;
	case CUDA_ERROR_INVALID_DEVICE: *pStr = "CUDA_ERROR_INVALID_DEVICE"; break;
	case CUDA_ERROR_INVALID_CONTEXT: *pStr = "CUDA_ERROR_INVALID_CONTEXT"; break;
	case CUDA_ERROR_NOT_SUPPORTED: *pStr = "CUDA_ERROR_NOT_SUPPORTED"; break;
	case CUDA_ERROR_NOT_PERMITTED: *pStr = "CUDA_ERROR_NOT_PERMITTED"; break;
	case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
		*pStr = "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
		break;
	default: *pStr = NULL; return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags)
{
	CUresult r = injected("cuInit");
	if (r != CUDA_SUCCESS)
		return r;
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (devices() <= 0)
		return CUDA_ERROR_NO_DEVICE;
	initialised = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	ENTER("cuDeviceGet");
	if (ordinal < 0 || ordinal >= devices() || ordinal >= 8)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

/* A device's UUID: "fake-gpu-<ordinal>" and FAKE_CUDA_GPU_ID (default
 * empty), so that processes given different values see different GPUs. */
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	const char *id = getenv("FAKE_CUDA_GPU_ID");
	ENTER("cuDeviceGetUuid");
	if (!uuid || dev < 0 || dev >= devices() || dev >= 8)
		return CUDA_ERROR_INVALID_VALUE;
	memset(uuid->bytes, 0, sizeof(uuid->bytes));
	snprintf(uuid->bytes, sizeof(uuid->bytes), "fake-gpu-%d%.5s", dev, id ? id : "");
	return CUDA_SUCCESS;
}

/* A context is the address of the device's slot: never NULL. */
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	ENTER("cuDevicePrimaryCtxRetain");
	if (dev < 0 || dev >= devices() || dev >= 8)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&lock);
	primary_refs[dev]++;
	pthread_mutex_unlock(&lock);
	*pctx = (CUcontext)&primary_refs[dev];
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	ENTER("cuDevicePrimaryCtxRelease");
	if (dev < 0 || dev >= 8 || primary_refs[dev] == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&lock);
	primary_refs[dev]--;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	ENTER("cuCtxSetCurrent");
	if (ctx && (ctx < (CUcontext)&primary_refs[0] || ctx > (CUcontext)&primary_refs[7] ||
		    *(int *)ctx == 0))
		return CUDA_ERROR_INVALID_CONTEXT;
	current = ctx;
	return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
				       CUmemAllocationGranularity_flags option)
{
	ENTER("cuMemGetAllocationGranularity");
	if (!granularity || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
	     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	*granularity = GRANULARITY;
	return CUDA_SUCCESS;
}

/* A memfd of fixed size standing in for device memory and its shareable
 * handles: sealed as a driver's buffer cannot be resized under an
 * importer (fi_xpu refuses to map memory that could shrink). */
static int new_memfd(size_t size)
{
	int fd = memfd_create("fake-cuda", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

#ifndef FAKE_CUDA_NO_VMM
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct handle *h;
	ENTER_CTX("cuMemCreate");
	if (!handle || !prop || flags || size == 0 || size % GRANULARITY ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
	    prop->location.id >= devices())
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	h = malloc(sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->size = size;
	h->fd = new_memfd(size);
	if (h->fd < 0) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
	return CUDA_SUCCESS;
}
#endif

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct handle *h = (struct handle *)(uintptr_t)handle;
	ENTER_CTX("cuMemRelease");
	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	close(h->fd);
	free(h);
	return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
			     unsigned long long flags)
{
	void *p;
	uintptr_t a, start;
	size_t total;
	ENTER_CTX("cuMemAddressReserve");
	if (!ptr || size == 0 || size % GRANULARITY || addr || flags ||
	    (alignment & (alignment - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	if (alignment < GRANULARITY)
		alignment = GRANULARITY;
	total = size + alignment;
	p = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	start = (uintptr_t)p;
	a = (start + alignment - 1) & ~(uintptr_t)(alignment - 1);
	if (a > start)
		munmap(p, a - start);
	if (start + total > a + size)
		munmap((void *)(a + size), start + total - (a + size));
	pthread_mutex_lock(&lock);
	if (!add(RESERVED, a, size, -1)) {
		pthread_mutex_unlock(&lock);
		munmap((void *)a, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&lock);
	*ptr = (CUdeviceptr)a;
	return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct range *r;
	ENTER_CTX("cuMemAddressFree");
	pthread_mutex_lock(&lock);
	r = find(RESERVED, (uintptr_t)ptr, size);
	if (!r || r->base != (uintptr_t)ptr || r->len != size ||
	    find(MAPPED, (uintptr_t)ptr, 0)) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	r->kind = FREE;
	pthread_mutex_unlock(&lock);
	munmap((void *)(uintptr_t)ptr, size);
	return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		  unsigned long long flags)
{
	struct handle *h = (struct handle *)(uintptr_t)handle;
	struct range *r;
	void *p;
	int fd;
	ENTER_CTX("cuMemMap");
	if (!h || offset || flags || size == 0 || size % GRANULARITY || size > h->size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	if (!find(RESERVED, (uintptr_t)ptr, size) || find(MAPPED, (uintptr_t)ptr, 0)) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
	p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0);
	if (fd < 0 || p == MAP_FAILED || !(r = add(MAPPED, (uintptr_t)ptr, size, fd))) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (strict()) {
		r->alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
		if (r->alias == MAP_FAILED) {
			r->alias = NULL;
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct range *r;
	ENTER_CTX("cuMemUnmap");
	pthread_mutex_lock(&lock);
	r = find(MAPPED, (uintptr_t)ptr, size);
	if (!r || r->base != (uintptr_t)ptr || r->len != size) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	close(r->fd);
	if (r->alias)
		munmap(r->alias, r->len);
	r->kind = FREE;
	/* Back to a bare reservation. */
	mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	struct range *r;
	int prot, rc = 0;
	ENTER_CTX("cuMemSetAccess");
	if (!desc || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    desc->location.id < 0 || desc->location.id >= devices())
		return CUDA_ERROR_INVALID_VALUE;
	prot = desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE :
	       desc->flags == CU_MEM_ACCESS_FLAGS_PROT_READ	 ? PROT_READ :
								   PROT_NONE;
	pthread_mutex_lock(&lock);
	r = find(MAPPED, (uintptr_t)ptr, size);
	if (r && r->alias) {
		/* Strict: the grant opens only while kernels run. */
		r->prot = prot;
		if (!kernels)
			prot = PROT_NONE;
	}
	if (r)
		rc = mprotect((void *)(uintptr_t)ptr, size, prot);
	pthread_mutex_unlock(&lock);
	if (!r || rc != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
				      CUmemAllocationHandleType handleType,
				      unsigned long long flags)
{
	struct handle *h = (struct handle *)(uintptr_t)handle;
	int fd;
	ENTER_CTX("cuMemExportToShareableHandle");
	if (!h || !shareableHandle || flags ||
	    handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)shareableHandle = fd;
	return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					CUmemAllocationHandleType shHandleType)
{
	int fd = (int)(intptr_t)osHandle;
	struct handle *h;
	struct stat st;
	ENTER_CTX("cuMemImportFromShareableHandle");
	if (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    !is_our_memfd(fd) || fstat(fd, &st) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	h = malloc(sizeof(*h));
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	h->size = (size_t)st.st_size;
	if (h->fd < 0) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
	return CUDA_SUCCESS;
}

/* Maps `len` bytes of memfd `fd` and records them as a range of `kind`
 * (cuMemAlloc, cuIpcOpenMemHandle); the fd is the range's, or closed. */
static CUresult map_range(enum kind kind, int fd, size_t len, CUdeviceptr *out)
{
	size_t pages = (len + 4095) & ~(size_t)4095;
	void *p = mmap(NULL, pages, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	pthread_mutex_lock(&lock);
	if (p == MAP_FAILED || !add(kind, (uintptr_t)p, len, fd)) {
		pthread_mutex_unlock(&lock);
		if (p != MAP_FAILED)
			munmap(p, pages);
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&lock);
	*out = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* Undoes `map_range` of a range of `kind` that starts at `dptr`. */
static CUresult unmap_range(enum kind kind, CUdeviceptr dptr)
{
	struct range *r;
	pthread_mutex_lock(&lock);
	r = find(kind, (uintptr_t)dptr, 0);
	if (!r || r->base != (uintptr_t)dptr) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	munmap((void *)r->base, (r->len + 4095) & ~(size_t)4095);
	close(r->fd);
	r->kind = FREE;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	int fd;
	ENTER_CTX("cuMemAlloc");
	if (!dptr || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	fd = new_memfd((bytesize + 4095) & ~(size_t)4095);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	return map_range(ALLOCATED, fd, bytesize, dptr);
}

CUresult cuMemFree(CUdeviceptr dptr)
{
	ENTER_CTX("cuMemFree");
	return unmap_range(ALLOCATED, dptr);
}

/* The double's IPC handle. */
struct ipc {
	char magic[8];
	int32_t pid, fd;
	uint64_t len;
};

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	struct range *r;
	struct ipc h = { "fakeipc", 0, 0, 0 };
	ENTER_CTX("cuIpcGetMemHandle");
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	r = find(ALLOCATED, (uintptr_t)dptr, 0);
	if (!r || r->base != (uintptr_t)dptr) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	h.pid = (int32_t)getpid();
	h.fd = r->fd;
	h.len = r->len;
	pthread_mutex_unlock(&lock);
	memset(pHandle, 0, sizeof(*pHandle));
	memcpy(pHandle->reserved, &h, sizeof(h));
	return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	struct ipc h;
	char path[64];
	int fd;
	ENTER_CTX("cuIpcOpenMemHandle");
	memcpy(&h, handle.reserved, sizeof(h));
	if (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
	    memcmp(h.magic, "fakeipc", 8) != 0 || h.len == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (h.pid == (int32_t)getpid())
		return CUDA_ERROR_INVALID_CONTEXT; /* as the driver: not in the owner */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!is_our_memfd(fd)) {
		close(fd);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return map_range(IPC_OPENED, fd, h.len, pdptr);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	ENTER_CTX("cuIpcCloseMemHandle");
	return unmap_range(IPC_OPENED, dptr);
}

CUresult cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct range *r;
	ENTER_CTX("cuMemGetAddressRange");
	pthread_mutex_lock(&lock);
	r = find(ALLOCATED, (uintptr_t)dptr, 1);
	if (!r)
		r = find(MAPPED, (uintptr_t)dptr, 1);
	if (!r)
		r = find(IPC_OPENED, (uintptr_t)dptr, 1);
	pthread_mutex_unlock(&lock);
	if (!r)
		return CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = (CUdeviceptr)r->base;
	if (psize)
		*psize = r->len;
	return CUDA_SUCCESS;
}

CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
				       CUmemRangeHandleType handleType, unsigned long long flags)
{
	struct range *r;
	int fd;
	ENTER_CTX("cuMemGetHandleForAddressRange");
	if (!handle || handleType != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags ||
	    (dptr | size) % 4096)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	r = find(ALLOCATED, (uintptr_t)dptr, 0);
	if (!r)
		r = find(MAPPED, (uintptr_t)dptr, 0);
	/* The double's limit: a DMA-BUF of a whole allocation only. */
	if (!r || r->base != (uintptr_t)dptr || size > ((r->len + 4095) & ~(size_t)4095)) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&lock);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)handle = fd;
	return CUDA_SUCCESS;
}

/* Whether every page of [a, a + len) is mapped writable in this process
 * (/proc/self/maps): the driver pins pages for writing unless told they
 * are read-only, and refuses pages it cannot write. */
static int writable(uintptr_t a, size_t len)
{
	char line[512], perm[8];
	unsigned long lo, hi;
	uintptr_t at = a, end = a + len;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 1;
	while (at < end && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && lo <= at && at < hi) {
			if (perm[1] != 'w')
				break;
			at = hi;
		}
	fclose(f);
	return at >= end;
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	uintptr_t a = (uintptr_t)p;
	int i;
	ENTER_CTX("cuMemHostRegister");
	if (!p || bytesize == 0 ||
	    (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
				 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
		return CUDA_ERROR_INVALID_VALUE;
	/* Pages mapped read-only need CU_MEMHOSTREGISTER_READ_ONLY. */
	if (!(Flags & CU_MEMHOSTREGISTER_READ_ONLY) && !writable(a, bytesize))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_RANGES; i++) {
		struct range *r = &ranges[i];
		if (r->kind == REGISTERED && a < r->base + r->len && r->base < a + bytesize) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
		}
	}
	if (!add(REGISTERED, a, bytesize, -1)) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p)
{
	struct range *r;
	ENTER_CTX("cuMemHostUnregister");
	pthread_mutex_lock(&lock);
	r = find(REGISTERED, (uintptr_t)p, 0);
	if (!r || r->base != (uintptr_t)p) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	}
	r->kind = FREE;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	int ok;
	ENTER_CTX("cuMemHostGetDevicePointer");
	if (!pdptr || Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	ok = find(REGISTERED, (uintptr_t)p, 1) != NULL;
	pthread_mutex_unlock(&lock);
	if (!ok)
		return CUDA_ERROR_INVALID_VALUE;
	*pdptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

/* Streams: the flags they were created with. */
struct stream {
	unsigned int flags;
};

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	struct stream *s;
	ENTER_CTX("cuStreamCreate");
	if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	s = malloc(sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->flags = Flags;
	*phStream = (CUstream)s;
	return CUDA_SUCCESS;
}

static int is_special(CUstream s)
{
	return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

CUresult cuStreamDestroy(CUstream hStream)
{
	ENTER_CTX("cuStreamDestroy");
	if (is_special(hStream))
		return CUDA_ERROR_INVALID_HANDLE;
	free(hStream);
	return CUDA_SUCCESS;
}

/* Work on stream s (NULL for a synchronous call) from entry point fn:
 * in strict mode, anything that waits for the legacy stream while a
 * kernel runs aborts. */
static void stream_check(const char *fn, CUstream s)
{
	int k;
	if (!strict())
		return;
	pthread_mutex_lock(&lock);
	k = kernels;
	pthread_mutex_unlock(&lock);
	if (k && (is_special(s) || !(((struct stream *)s)->flags & CU_STREAM_NON_BLOCKING))) {
		fprintf(stderr, "fake_cuda: %s on the legacy stream while a kernel runs\n", fn);
		abort();
	}
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	ENTER_CTX("cuStreamSynchronize");
	stream_check("cuStreamSynchronize", hStream);
	return CUDA_SUCCESS;
}

/* Where the double itself reaches [addr, addr + len): the device side of
 * a strict VMM mapping, else the address itself (host memory, cuMemAlloc
 * memory, or any mapping outside strict mode). NULL: part of the range is
 * a strict mapping's but the range runs past it. */
static unsigned char *reach(uintptr_t addr, size_t len)
{
	struct range *r;
	unsigned char *p = (unsigned char *)addr;
	pthread_mutex_lock(&lock);
	r = find(MAPPED, addr, 0);
	if (r && r->alias)
		p = len <= r->len - (addr - r->base) ?
			    (unsigned char *)r->alias + (addr - r->base) : NULL;
	pthread_mutex_unlock(&lock);
	return p;
}

static CUresult copy(const char *fn, void *dst, const void *src, size_t n, int to_device,
		     CUstream s)
{
	unsigned char *d;
	ENTER_CTX(fn);
	stream_check(fn, s);
	d = reach((uintptr_t)(to_device ? dst : src), n);
	if (!d || !dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	if (to_device)
		memmove(d, src, n);
	else
		memmove(dst, d, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
			   CUstream hStream)
{
	return copy("cuMemcpyHtoDAsync", (void *)(uintptr_t)dstDevice, srcHost, ByteCount, 1,
		    hStream);
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
			   CUstream hStream)
{
	return copy("cuMemcpyDtoHAsync", dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, 0,
		    hStream);
}

/* The synchronous copies run on the legacy stream. */
CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy("cuMemcpyHtoD", (void *)(uintptr_t)dstDevice, srcHost, ByteCount, 1, NULL);
}

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy("cuMemcpyDtoH", dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, 0,
		    NULL);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	unsigned char *d;
	ENTER_CTX("cuMemsetD8Async");
	stream_check("cuMemsetD8Async", hStream);
	d = reach((uintptr_t)dstDevice, N);
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	memset(d, uc, N);
	return CUDA_SUCCESS;
}

CUresult cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
			      unsigned int flags)
{
	unsigned char *d;
	ENTER_CTX("cuStreamWriteValue64");
	stream_check("cuStreamWriteValue64", stream);
	d = reach((uintptr_t)addr, 8);
	if (!d || flags || addr % 8)
		return CUDA_ERROR_INVALID_VALUE;
	__atomic_store_n((uint64_t *)(void *)d, (uint64_t)value, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

/* Strict mode: device memory opens to the process while kernels run. */
static void set_open(int open)
{
	int i;
	for (i = 0; i < MAX_RANGES; i++)
		if (ranges[i].kind == MAPPED && ranges[i].alias)
			mprotect((void *)ranges[i].base, ranges[i].len,
				 open ? ranges[i].prot : PROT_NONE);
}

void fake_cuda_kernel_begin(void)
{
	pthread_mutex_lock(&lock);
	if (kernels++ == 0)
		set_open(1);
	pthread_mutex_unlock(&lock);
}

void fake_cuda_kernel_end(void)
{
	pthread_mutex_lock(&lock);
	if (--kernels == 0)
		set_open(0);
	pthread_mutex_unlock(&lock);
}

/* Test hook: whether [addr, addr + len) is device memory the host cannot
 * reach (a VMM mapping in strict mode). */
int fake_cuda_device_memory(const void *addr, size_t len)
{
	struct range *r;
	int yes;
	pthread_mutex_lock(&lock);
	r = find(MAPPED, (uintptr_t)addr, len);
	yes = r && r->alias;
	pthread_mutex_unlock(&lock);
	return yes;
}

/* Test hooks for the C test program: the number of live ranges of a kind
 * (leak checks), not part of the driver API. */
int fake_cuda_live(int kind)
{
	int i, n = 0;
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_RANGES; i++)
		n += ranges[i].kind == (enum kind)kind;
	pthread_mutex_unlock(&lock);
	return n;
}
