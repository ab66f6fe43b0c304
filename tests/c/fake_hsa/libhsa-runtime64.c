/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A test double of the ROCm runtime (libhsa-runtime64.so.1): the entry
 * points fi_xpu's ROCr memory backend calls, over host memory. Built
 * against the real <hsa/hsa.h> and <hsa/hsa_ext_amd.h> (Debian's ROCm 5.2),
 * so every definition has the runtime's prototype, and found through
 * LD_LIBRARY_PATH by the same dlopen("libhsa-runtime64.so.1") as the real
 * one. hsa_amd_portable_export_dmabuf, newer than those headers, is
 * declared here as upstream's header has it.
 *
 * - One CPU agent and FAKE_HSA_GPUS GPU agents (default 1; 0: hsa_init
 *   fails with HSA_STATUS_ERROR_OUT_OF_RESOURCES, as the runtime does on a
 *   machine without a GPU). Each GPU has a fine-grained and a
 *   coarse-grained global pool.
 * - Pool allocations are memfd mappings ("fake-hsa"); their DMA-BUF is a
 *   dup of that memfd with the offset of the range in it.
 *   hsa_amd_interop_map_buffer maps any mappable fd.
 * - hsa_amd_memory_lock records the range and returns the host address.
 *
 * FAKE_HSA_FAIL=<entry point>:<hsa_status_t, hex> makes that entry point
 * fail; -DFAKE_HSA_NO_EXPORT leaves out hsa_amd_portable_export_dmabuf
 * (ROCm 5.2).
 */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

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

hsa_status_t hsa_amd_portable_export_dmabuf(const void *ptr, size_t size, int *dmabuf,
					    uint64_t *offset);

#define MAX_RANGES 256
#define GRANULE 4096
/* Agent handles: 1 is the CPU, 2.. the GPUs; pools: 100 * agent + 1
 * (fine-grained) or + 2 (coarse-grained). */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;

enum kind { FREE = 0, ALLOCATED, LOCKED, MAPPED };

static struct range {
	enum kind kind;
	uintptr_t base;
	size_t len;
	int fd;
} ranges[MAX_RANGES];

static hsa_status_t injected(const char *fn)
{
	return (hsa_status_t)fake_injected("FAKE_HSA_FAIL", fn, 16);
}

static int gpus(void)
{
	return fake_count("FAKE_HSA_GPUS", 8);
}

#define ENTER(name) FAKE_ENTER(hsa_status_t, name, HSA_STATUS_ERROR_NOT_INITIALIZED)

static struct range *find(enum kind k, uintptr_t addr)
{
	int i;
	for (i = 0; i < MAX_RANGES; i++)
		if (ranges[i].kind == k && addr >= ranges[i].base &&
		    addr - ranges[i].base < ranges[i].len)
			return &ranges[i];
	return NULL;
}

static int add(enum kind k, uintptr_t base, size_t len, int fd)
{
	int i;
	for (i = 0; i < MAX_RANGES; i++)
		if (ranges[i].kind == FREE) {
			ranges[i] = (struct range){ k, base, len, fd };
			return 1;
		}
	return 0;
}

hsa_status_t hsa_status_string(hsa_status_t status, const char **status_string)
{
	switch (status) {
	case HSA_STATUS_ERROR_INVALID_ARGUMENT:
		*status_string = "HSA_STATUS_ERROR_INVALID_ARGUMENT: invalid argument";
		break;
	case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
		*status_string = "HSA_STATUS_ERROR_OUT_OF_RESOURCES: out of resources";
		break;
	case HSA_STATUS_ERROR_NOT_INITIALIZED:
		*status_string = "HSA_STATUS_ERROR_NOT_INITIALIZED: not initialized";
		break;
	case HSA_STATUS_ERROR_INVALID_ALLOCATION:
		*status_string = "HSA_STATUS_ERROR_INVALID_ALLOCATION: invalid allocation";
		break;
	default:
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_init(void)
{
	hsa_status_t r = injected("hsa_init");
	if (r != HSA_STATUS_SUCCESS)
		return r;
	if (gpus() <= 0)
		return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
	initialised = 1;
	return HSA_STATUS_SUCCESS;
}

static int valid_agent(hsa_agent_t a)
{
	return a.handle >= 1 && a.handle <= 1 + (uint64_t)gpus();
}

hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void *data), void *data)
{
	uint64_t i;
	ENTER("hsa_iterate_agents");
	if (!callback)
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	for (i = 1; i <= 1 + (uint64_t)gpus(); i++) {
		hsa_status_t r = callback((hsa_agent_t){ i }, data);
		if (r != HSA_STATUS_SUCCESS)
			return r;
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void *value)
{
	ENTER("hsa_agent_get_info");
	if (!valid_agent(agent) || !value)
		return HSA_STATUS_ERROR_INVALID_AGENT;
	if (attribute != HSA_AGENT_INFO_DEVICE)
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	*(hsa_device_type_t *)value = agent.handle == 1 ? HSA_DEVICE_TYPE_CPU : HSA_DEVICE_TYPE_GPU;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent,
						hsa_status_t (*callback)(hsa_amd_memory_pool_t memory_pool,
									 void *data),
						void *data)
{
	uint64_t k;
	ENTER("hsa_amd_agent_iterate_memory_pools");
	if (!valid_agent(agent) || !callback)
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	for (k = 1; k <= 2; k++) {
		hsa_status_t r = callback((hsa_amd_memory_pool_t){ 100 * agent.handle + k }, data);
		if (r != HSA_STATUS_SUCCESS)
			return r;
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
					  hsa_amd_memory_pool_info_t attribute, void *value)
{
	uint64_t kind = memory_pool.handle % 100;
	ENTER("hsa_amd_memory_pool_get_info");
	if (!value || kind < 1 || kind > 2 || !valid_agent((hsa_agent_t){ memory_pool.handle / 100 }))
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	switch (attribute) {
	case HSA_AMD_MEMORY_POOL_INFO_SEGMENT:
		*(hsa_amd_segment_t *)value = HSA_AMD_SEGMENT_GLOBAL;
		break;
	case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
		*(uint32_t *)value = kind == 1 ? HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED :
						 HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
		break;
	case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED:
		*(bool *)value = true;
		break;
	case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
		*(size_t *)value = GRANULE;
		break;
	default:
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
					  uint32_t flags, void **ptr)
{
	uint64_t kind = memory_pool.handle % 100;
	void *p;
	int fd;
	ENTER("hsa_amd_memory_pool_allocate");
	if (!ptr || size == 0 || flags || kind < 1 || kind > 2 ||
	    !valid_agent((hsa_agent_t){ memory_pool.handle / 100 }))
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	size = (size + GRANULE - 1) & ~(size_t)(GRANULE - 1);
	/* Sized for good, as a DMA-BUF is (importers check the seals). */
	fd = memfd_create("fake-hsa", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		if (fd >= 0)
			close(fd);
		return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	pthread_mutex_lock(&lock);
	if (p == MAP_FAILED || !add(ALLOCATED, (uintptr_t)p, size, fd)) {
		pthread_mutex_unlock(&lock);
		close(fd);
		return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
	}
	pthread_mutex_unlock(&lock);
	*ptr = p;
	return HSA_STATUS_SUCCESS;
}

/* Unmaps the range of `kind` that starts at `ptr`; `bad` if none does. */
static hsa_status_t unmap_range(enum kind kind, void *ptr, hsa_status_t bad)
{
	struct range *r;
	pthread_mutex_lock(&lock);
	r = find(kind, (uintptr_t)ptr);
	if (!r || r->base != (uintptr_t)ptr) {
		pthread_mutex_unlock(&lock);
		return bad;
	}
	munmap(ptr, r->len);
	close(r->fd);
	r->kind = FREE;
	pthread_mutex_unlock(&lock);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_memory_pool_free(void *ptr)
{
	ENTER("hsa_amd_memory_pool_free");
	return unmap_range(ALLOCATED, ptr, HSA_STATUS_ERROR_INVALID_ALLOCATION);
}

hsa_status_t hsa_amd_memory_lock(void *host_ptr, size_t size, hsa_agent_t *agents, int num_agent,
				 void **agent_ptr)
{
	int i;
	ENTER("hsa_amd_memory_lock");
	if (!host_ptr || size == 0 || !agent_ptr || (num_agent && !agents))
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	for (i = 0; i < num_agent; i++)
		if (!valid_agent(agents[i]) || agents[i].handle == 1)
			return HSA_STATUS_ERROR_INVALID_AGENT;
	pthread_mutex_lock(&lock);
	if (find(LOCKED, (uintptr_t)host_ptr) || !add(LOCKED, (uintptr_t)host_ptr, size, -1)) {
		pthread_mutex_unlock(&lock);
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	}
	pthread_mutex_unlock(&lock);
	*agent_ptr = host_ptr;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_memory_unlock(void *host_ptr)
{
	struct range *r;
	ENTER("hsa_amd_memory_unlock");
	pthread_mutex_lock(&lock);
	r = find(LOCKED, (uintptr_t)host_ptr);
	if (r && r->base == (uintptr_t)host_ptr)
		r->kind = FREE;
	pthread_mutex_unlock(&lock);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_interop_map_buffer(uint32_t num_agents, hsa_agent_t *agents,
					int interop_handle, uint32_t flags, size_t *size, void **ptr,
					size_t *metadata_size, const void **metadata)
{
	struct stat st;
	void *p;
	int fd;
	uint32_t i;
	ENTER("hsa_amd_interop_map_buffer");
	if (!num_agents || !agents || flags || !size || !ptr)
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	for (i = 0; i < num_agents; i++)
		if (!valid_agent(agents[i]))
			return HSA_STATUS_ERROR_INVALID_AGENT;
	if (fstat(interop_handle, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	fd = fcntl(interop_handle, F_DUPFD_CLOEXEC, 0);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, interop_handle, 0);
	pthread_mutex_lock(&lock);
	if (fd < 0 || p == MAP_FAILED || !add(MAPPED, (uintptr_t)p, (size_t)st.st_size, fd)) {
		pthread_mutex_unlock(&lock);
		return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
	}
	pthread_mutex_unlock(&lock);
	*size = (size_t)st.st_size;
	*ptr = p;
	if (metadata_size)
		*metadata_size = 0;
	if (metadata)
		*metadata = NULL;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_interop_unmap_buffer(void *ptr)
{
	ENTER("hsa_amd_interop_unmap_buffer");
	return unmap_range(MAPPED, ptr, HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

#ifndef FAKE_HSA_NO_EXPORT
hsa_status_t hsa_amd_portable_export_dmabuf(const void *ptr, size_t size, int *dmabuf,
					    uint64_t *offset)
{
	struct range *r;
	ENTER("hsa_amd_portable_export_dmabuf");
	if (!ptr || !size || !dmabuf || !offset)
		return HSA_STATUS_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&lock);
	r = find(ALLOCATED, (uintptr_t)ptr);
	if (!r || size > r->len - ((uintptr_t)ptr - r->base)) {
		pthread_mutex_unlock(&lock);
		return HSA_STATUS_ERROR_INVALID_ALLOCATION;
	}
	*dmabuf = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	*offset = (uint64_t)((uintptr_t)ptr - r->base);
	pthread_mutex_unlock(&lock);
	return *dmabuf < 0 ? HSA_STATUS_ERROR_OUT_OF_RESOURCES : HSA_STATUS_SUCCESS;
}
#endif

/* Test hook: live pool allocations, locks and mappings. */
int fake_hsa_live(void)
{
	int i, n = 0;
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_RANGES; i++)
		n += ranges[i].kind != FREE;
	pthread_mutex_unlock(&lock);
	return n;
}
