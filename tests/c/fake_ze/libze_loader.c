/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A test double of the Level Zero loader (libze_loader.so.1): the entry
 * points fi_xpu's ZE memory backend calls, over host memory. Built against
 * the real <level_zero/ze_api.h> (libze-dev), so every definition has the
 * loader's prototype, and found through LD_LIBRARY_PATH by the same
 * dlopen("libze_loader.so.1") as the real one.
 *
 * - Device and host allocations are memfd mappings ("fake-ze"); an
 *   allocation asked for with ze_external_memory_export_desc_t (DMA_BUF)
 *   exports a dup of its memfd as the "DMA-BUF" through
 *   zeMemGetAllocProperties + ze_external_memory_export_fd_t; others refuse
 *   with ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, as a driver does.
 * - zeMemAllocDevice with ze_external_memory_import_fd_t maps the fd
 *   (any mappable fd: the DMA-BUFs of the tests are memfds).
 *
 * Environment: FAKE_ZE_DEVICES (default 1; 0: zeInit fails with
 * ZE_RESULT_ERROR_UNINITIALIZED, as the real loader does without a
 * driver), FAKE_ZE_FAIL=<entry point>:<ze_result_t, hex> makes that entry
 * point fail.
 */
#include <level_zero/ze_api.h>

#include "../fake_driver.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ALLOCS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static int driver_tag, device_tags[8], contexts;

static struct alloc {
	int used;
	uintptr_t base; /* of the mapping */
	uintptr_t addr; /* returned */
	size_t size, maplen;
	int fd, exportable;
} allocs[MAX_ALLOCS];

static ze_result_t injected(const char *fn)
{
	return (ze_result_t)fake_injected("FAKE_ZE_FAIL", fn, 16);
}

static int devices(void)
{
	return fake_count("FAKE_ZE_DEVICES", 8);
}

#define ENTER(name) FAKE_ENTER(ze_result_t, name, ZE_RESULT_ERROR_UNINITIALIZED)

/* ENTER, then the context must be the one context handle there is. */
#define ENTER_CTX(name, ctx)                                         \
	do {                                                         \
		ENTER(name);                                         \
		if ((ctx) != (ze_context_handle_t)&contexts)         \
			return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;  \
	} while (0)

ze_result_t zeInit(ze_init_flags_t flags)
{
	ze_result_t r = injected("zeInit");
	if (r != ZE_RESULT_SUCCESS)
		return r;
	if (flags & ~(ze_init_flags_t)(ZE_INIT_FLAG_GPU_ONLY | ZE_INIT_FLAG_VPU_ONLY))
		return ZE_RESULT_ERROR_INVALID_ENUMERATION;
	if (devices() <= 0)
		return ZE_RESULT_ERROR_UNINITIALIZED;
	initialised = 1;
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGet(uint32_t *pCount, ze_driver_handle_t *phDrivers)
{
	ENTER("zeDriverGet");
	if (!pCount)
		return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
	if (*pCount && phDrivers)
		phDrivers[0] = (ze_driver_handle_t)&driver_tag;
	*pCount = 1;
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t hDriver, uint32_t *pCount, ze_device_handle_t *phDevices)
{
	uint32_t i;
	ENTER("zeDeviceGet");
	if (hDriver != (ze_driver_handle_t)&driver_tag)
		return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
	if (!pCount)
		return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
	if (*pCount == 0 || !phDevices) {
		*pCount = (uint32_t)devices();
		return ZE_RESULT_SUCCESS;
	}
	for (i = 0; i < *pCount && i < (uint32_t)devices(); i++)
		phDevices[i] = (ze_device_handle_t)&device_tags[i];
	*pCount = i;
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeContextCreate(ze_driver_handle_t hDriver, const ze_context_desc_t *desc,
			    ze_context_handle_t *phContext)
{
	ENTER("zeContextCreate");
	if (hDriver != (ze_driver_handle_t)&driver_tag)
		return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
	if (!desc || !phContext || desc->stype != ZE_STRUCTURE_TYPE_CONTEXT_DESC)
		return ZE_RESULT_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&lock);
	contexts++;
	pthread_mutex_unlock(&lock);
	*phContext = (ze_context_handle_t)&contexts;
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeContextDestroy(ze_context_handle_t hContext)
{
	ENTER("zeContextDestroy");
	if (hContext != (ze_context_handle_t)&contexts || contexts == 0)
		return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
	pthread_mutex_lock(&lock);
	contexts--;
	pthread_mutex_unlock(&lock);
	return ZE_RESULT_SUCCESS;
}

static int is_device(ze_device_handle_t d)
{
	int i;
	for (i = 0; i < devices(); i++)
		if (d == (ze_device_handle_t)&device_tags[i])
			return 1;
	return 0;
}

/* Walks a pNext chain for a structure of type `stype`. */
static const void *chained(const void *next, ze_structure_type_t stype)
{
	while (next) {
		const ze_base_desc_t *b = next;
		if (b->stype == stype)
			return b;
		next = b->pNext;
	}
	return NULL;
}

static ze_result_t new_alloc(size_t size, size_t alignment, const void *next, void **pptr)
{
	const ze_external_memory_export_desc_t *ex =
		chained(next, ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC);
	const ze_external_memory_import_fd_t *im =
		chained(next, ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD);
	size_t page = 4096, maplen;
	uintptr_t base, addr;
	void *p;
	int fd, i;

	if (size == 0)
		return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
	if (alignment & (alignment - 1))
		return ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT;
	if (alignment < page)
		alignment = page;
	maplen = (size + page - 1) & ~(page - 1);
	if (im) {
		struct stat st;
		if (!(im->flags & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF) || fstat(im->fd, &st) != 0 ||
		    (size_t)st.st_size < size)
			return ZE_RESULT_ERROR_INVALID_ARGUMENT;
		fd = fcntl(im->fd, F_DUPFD_CLOEXEC, 0);
	} else {
		/* Sealed: a driver's DMA-BUF cannot be resized under an
		 * importer (fi_xpu refuses memory that could shrink). */
		fd = memfd_create("fake-ze", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd >= 0 && (ftruncate(fd, (off_t)maplen) != 0 ||
				fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
	/* Reserve room to slide to the alignment. */
	p = mmap(NULL, maplen + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
	}
	base = (uintptr_t)p;
	addr = (base + alignment - 1) & ~(uintptr_t)(alignment - 1);
	if (mmap((void *)addr, maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
	    MAP_FAILED) {
		munmap(p, maplen + alignment);
		close(fd);
		return ZE_RESULT_ERROR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_ALLOCS && allocs[i].used; i++)
		;
	if (i == MAX_ALLOCS) {
		pthread_mutex_unlock(&lock);
		munmap(p, maplen + alignment);
		close(fd);
		return ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY;
	}
	allocs[i] = (struct alloc){ 1, base, addr, size, maplen + alignment, fd,
				    ex && (ex->flags & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF) };
	pthread_mutex_unlock(&lock);
	*pptr = (void *)addr;
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeMemAllocDevice(ze_context_handle_t hContext, const ze_device_mem_alloc_desc_t *device_desc,
			     size_t size, size_t alignment, ze_device_handle_t hDevice, void **pptr)
{
	ENTER("zeMemAllocDevice");
	if (hContext != (ze_context_handle_t)&contexts || !is_device(hDevice))
		return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
	if (!device_desc || !pptr || device_desc->stype != ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC)
		return ZE_RESULT_ERROR_INVALID_ARGUMENT;
	return new_alloc(size, alignment, device_desc->pNext, pptr);
}

ze_result_t zeMemAllocHost(ze_context_handle_t hContext, const ze_host_mem_alloc_desc_t *host_desc,
			   size_t size, size_t alignment, void **pptr)
{
	ENTER_CTX("zeMemAllocHost", hContext);
	if (!host_desc || !pptr || host_desc->stype != ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC)
		return ZE_RESULT_ERROR_INVALID_ARGUMENT;
	return new_alloc(size, alignment, host_desc->pNext, pptr);
}

/* The allocation holding `ptr`; lock held. */
static struct alloc *find(const void *ptr)
{
	uintptr_t a = (uintptr_t)ptr;
	int i;
	for (i = 0; i < MAX_ALLOCS; i++)
		if (allocs[i].used && a >= allocs[i].addr && a - allocs[i].addr < allocs[i].size)
			return &allocs[i];
	return NULL;
}

ze_result_t zeMemFree(ze_context_handle_t hContext, void *ptr)
{
	struct alloc *a;
	ENTER_CTX("zeMemFree", hContext);
	pthread_mutex_lock(&lock);
	a = find(ptr);
	if (!a || a->addr != (uintptr_t)ptr) {
		pthread_mutex_unlock(&lock);
		return ZE_RESULT_ERROR_INVALID_ARGUMENT;
	}
	munmap((void *)a->base, a->maplen);
	close(a->fd);
	a->used = 0;
	pthread_mutex_unlock(&lock);
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeMemGetAllocProperties(ze_context_handle_t hContext, const void *ptr,
				    ze_memory_allocation_properties_t *pMemAllocProperties,
				    ze_device_handle_t *phDevice)
{
	ze_external_memory_export_fd_t *ex;
	struct alloc *a;
	ENTER_CTX("zeMemGetAllocProperties", hContext);
	if (!pMemAllocProperties)
		return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
	ex = (ze_external_memory_export_fd_t *)chained(pMemAllocProperties->pNext,
						       ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD);
	pthread_mutex_lock(&lock);
	a = find(ptr);
	if (!a) {
		pthread_mutex_unlock(&lock);
		pMemAllocProperties->type = ZE_MEMORY_TYPE_UNKNOWN;
		return ZE_RESULT_SUCCESS;
	}
	pMemAllocProperties->type = ZE_MEMORY_TYPE_DEVICE;
	pMemAllocProperties->id = (uint64_t)a->addr;
	pMemAllocProperties->pageSize = 4096;
	if (phDevice)
		*phDevice = (ze_device_handle_t)&device_tags[0];
	if (ex) {
		if (!a->exportable || !(ex->flags & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF)) {
			pthread_mutex_unlock(&lock);
			return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
		}
		ex->fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	}
	pthread_mutex_unlock(&lock);
	return ZE_RESULT_SUCCESS;
}

ze_result_t zeMemGetAddressRange(ze_context_handle_t hContext, const void *ptr, void **pBase,
				 size_t *pSize)
{
	struct alloc *a;
	ENTER_CTX("zeMemGetAddressRange", hContext);
	pthread_mutex_lock(&lock);
	a = find(ptr);
	if (a) {
		if (pBase)
			*pBase = (void *)a->addr;
		if (pSize)
			*pSize = a->size;
	}
	pthread_mutex_unlock(&lock);
	return a ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

/* Test hook: live allocations and imports plus open contexts. */
int fake_ze_live(void)
{
	int i, n;
	pthread_mutex_lock(&lock);
	n = contexts;
	for (i = 0; i < MAX_ALLOCS; i++)
		n += allocs[i].used;
	pthread_mutex_unlock(&lock);
	return n;
}
