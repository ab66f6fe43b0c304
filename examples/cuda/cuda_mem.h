/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Memory callbacks (struct fi_xpu_mem_ops) over the CUDA
 * runtime, for the CUDA examples (on an FI_HMEM_SYSTEM context; the built-in CUDA
 * backend serves FI_HMEM_CUDA contexts, which the shm provider does not).
 * Every allocation is a memfd mapping registered with
 * cudaHostRegister(Mapped | Portable): pinned host memory that the GPU reads
 * and writes over PCIe/NVLink-C2C at the same address (unified addressing),
 * and that a peer process maps from the memfd. That is what the providers
 * need for rings, CQs and symmetric heaps; it is not device (HBM) memory.
 */
#ifndef FI_XPU_EXAMPLE_CUDA_MEM_H
#define FI_XPU_EXAMPLE_CUDA_MEM_H

#include <fi_xpu.h>

#if defined(__HIPCC__) || defined(__HIP__)
/* The HIP build of the examples (../hip): the same calls under HIP names. */
#include "../hip/cuda_names.h"
#else
#include <cuda_runtime.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Ends the process on a failed CUDA runtime call. */
#define CUDA_CHECK(expr)                                                             \
	do {                                                                         \
		cudaError_t e_ = (expr);                                             \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "[%d] %s:%d: %s: %s\n", (int)getpid(),        \
				__FILE__, __LINE__, #expr, cudaGetErrorString(e_));  \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

#define CUDA_MEM_SLOTS 256

struct cuda_mem_slot {
	char *map;   /* start of the mapping (page aligned) */
	size_t len;  /* length of the mapping */
	char *addr;  /* address handed out */
	int fd;      /* memfd of an allocation, -1 for an import */
	int ours;    /* 1 if cudaHostRegister was done here */
	int unmap;   /* 1 if the mapping was made here */
};

static struct cuda_mem_slot cuda_mem_slots[CUDA_MEM_SLOTS];
static pthread_mutex_t cuda_mem_lock = PTHREAD_MUTEX_INITIALIZER;

static int cuda_mem_err(cudaError_t e, const char *what)
{
	fprintf(stderr, "[%d] %s: %s\n", (int)getpid(), what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -FI_ENOMEM : -FI_EIO;
}

static size_t cuda_mem_page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* Registers [p, p + len) with CUDA; the device address must equal p. */
static int cuda_mem_register(char *p, size_t len, unsigned extra, int *ours)
{
	void *dev = NULL;
	cudaError_t e = cudaHostRegister(p, len, cudaHostRegisterMapped | cudaHostRegisterPortable | extra);
	*ours = 1;
	if (e == cudaErrorHostMemoryAlreadyRegistered) {
		(void)cudaGetLastError();
		*ours = 0;
	} else if (e != cudaSuccess) {
		return cuda_mem_err(e, "cudaHostRegister");
	}
	e = cudaHostGetDevicePointer(&dev, p, 0);
	if (e != cudaSuccess || dev != (void *)p) {
		if (*ours)
			(void)cudaHostUnregister(p);
		if (e != cudaSuccess)
			return cuda_mem_err(e, "cudaHostGetDevicePointer");
		fprintf(stderr, "[%d] GPU cannot use host pointers for registered memory\n",
			(int)getpid());
		return -FI_EOPNOTSUPP;
	}
	return 0;
}

static int cuda_mem_keep(char *map, size_t len, char *addr, int fd, int ours, int unmap)
{
	int i, rc = -FI_ENOMEM;
	pthread_mutex_lock(&cuda_mem_lock);
	for (i = 0; i < CUDA_MEM_SLOTS; i++) {
		if (!cuda_mem_slots[i].map) {
			struct cuda_mem_slot s = { map, len, addr, fd, ours, unmap };
			cuda_mem_slots[i] = s;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&cuda_mem_lock);
	return rc;
}

/* Removes the slot whose handed-out address is addr; 0 if found. */
static int cuda_mem_take(void *addr, struct cuda_mem_slot *out)
{
	int i, rc = -FI_EINVAL;
	pthread_mutex_lock(&cuda_mem_lock);
	for (i = 0; i < CUDA_MEM_SLOTS; i++) {
		if (cuda_mem_slots[i].map && cuda_mem_slots[i].addr == (char *)addr) {
			*out = cuda_mem_slots[i];
			cuda_mem_slots[i].map = NULL;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&cuda_mem_lock);
	return rc;
}

static void cuda_mem_release(const struct cuda_mem_slot *s)
{
	if (s->ours)
		(void)cudaHostUnregister(s->map);
	if (s->unmap)
		munmap(s->map, s->len);
	if (s->fd >= 0)
		close(s->fd);
}

static int cuda_mem_alloc(uint64_t device, uint64_t size, uint64_t alignment, uint64_t flags,
			  void **addr, int *fd, uint64_t *offset)
{
	size_t page = cuda_mem_page(), len = ((size_t)size + page - 1) & ~(page - 1);
	cudaError_t e = cudaSetDevice((int)device);
	int mfd, ours, rc;
	char *p;
	if (e != cudaSuccess)
		return cuda_mem_err(e, "cudaSetDevice");
	if (alignment > page)
		return -FI_EINVAL;
	/* Sealed against resizing: the shm provider shares only memory whose
	 * size a peer cannot change under its mapping. */
	mfd = memfd_create("fi_xpu-cuda", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, (off_t)len) != 0 ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
		if (mfd >= 0)
			close(mfd);
		return -FI_ENOMEM;
	}
	p = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (p == MAP_FAILED) {
		close(mfd);
		return -FI_ENOMEM;
	}
	rc = cuda_mem_register(p, len, 0, &ours);
	if (rc == 0)
		rc = cuda_mem_keep(p, len, p, mfd, ours, 1);
	if (rc != 0) {
		struct cuda_mem_slot s = { p, len, p, mfd, ours, 1 };
		cuda_mem_release(&s);
		return rc;
	}
	*addr = p;
	if (fd)
		*fd = (flags & FI_XPU_ALLOC_DMABUF) ? dup(mfd) : -1;
	if (offset)
		*offset = 0;
	return 0;
}

static int cuda_mem_import(uint64_t device, void *host_addr, int fd, uint64_t offset,
			   uint64_t size, uint64_t flags, void **dev_addr)
{
	size_t page = cuda_mem_page();
	unsigned extra = (flags & FI_XPU_IMPORT_IOMEMORY) ? cudaHostRegisterIoMemory : 0;
	cudaError_t e = cudaSetDevice((int)device);
	char *map, *addr;
	size_t len;
	int ours, rc;
	if (e != cudaSuccess)
		return cuda_mem_err(e, "cudaSetDevice");
	if (flags & FI_XPU_IMPORT_DMABUF) {
		size_t head = (size_t)offset & (page - 1);
		len = (head + (size_t)size + page - 1) & ~(page - 1);
		map = (char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
				   (off_t)(offset - head));
		/* A region a peer shares read-only (sealed against writing,
		 * or handed over open for reading only) maps only for
		 * reading, and pins only with cudaHostRegisterReadOnly. */
		if (map == MAP_FAILED && (errno == EACCES || errno == EPERM)) {
			map = (char *)mmap(NULL, len, PROT_READ, MAP_SHARED, fd,
					   (off_t)(offset - head));
			extra |= cudaHostRegisterReadOnly;
		}
		if (map == MAP_FAILED)
			return -FI_EINVAL;
		addr = map + head;
	} else {
		uintptr_t a = (uintptr_t)host_addr & ~(uintptr_t)(page - 1);
		len = (((uintptr_t)host_addr - a) + (size_t)size + page - 1) & ~(page - 1);
		map = (char *)a;
		addr = (char *)host_addr;
	}
	rc = cuda_mem_register(map, len, extra, &ours);
	if (rc == 0)
		rc = cuda_mem_keep(map, len, addr, -1, ours, (flags & FI_XPU_IMPORT_DMABUF) != 0);
	if (rc != 0) {
		if (flags & FI_XPU_IMPORT_DMABUF)
			munmap(map, len);
		else if (ours)
			(void)cudaHostUnregister(map);
		return rc;
	}
	*dev_addr = addr;
	return 0;
}

static int cuda_mem_unimport(uint64_t device, void *dev_addr)
{
	struct cuda_mem_slot s;
	(void)device;
	if (cuda_mem_take(dev_addr, &s) != 0)
		return -FI_EINVAL;
	cuda_mem_release(&s);
	return 0;
}

static void cuda_mem_free(uint64_t device, void *addr)
{
	struct cuda_mem_slot s;
	(void)device;
	if (cuda_mem_take(addr, &s) == 0)
		cuda_mem_release(&s);
}

static int cuda_mem_export_dmabuf(uint64_t device, void *addr, uint64_t size, int *fd,
				  uint64_t *offset)
{
	int i, rc = -FI_EINVAL;
	(void)device;
	pthread_mutex_lock(&cuda_mem_lock);
	for (i = 0; i < CUDA_MEM_SLOTS; i++) {
		struct cuda_mem_slot *s = &cuda_mem_slots[i];
		if (s->map && s->fd >= 0 && (char *)addr >= s->map &&
		    (char *)addr + size <= s->map + s->len) {
			*fd = dup(s->fd);
			*offset = (uint64_t)((char *)addr - s->map);
			rc = *fd >= 0 ? 0 : -FI_EMFILE;
			break;
		}
	}
	pthread_mutex_unlock(&cuda_mem_lock);
	return rc;
}

static struct fi_xpu_mem_ops cuda_mem_ops = {
	sizeof(struct fi_xpu_mem_ops), cuda_mem_alloc, cuda_mem_import,
	cuda_mem_unimport,             cuda_mem_free,  cuda_mem_export_dmabuf,
};

#endif
