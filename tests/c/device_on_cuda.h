/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Runs a shm test program on an FI_HMEM_CUDA context over the CUDA driver
 * double (tests/c/fake_cuda) in its strict mode, unchanged: compiled with
 * `-include device_on_cuda.h`, its world (shm_common.h) opens an
 * FI_HMEM_CUDA context without callbacks, whose heap (inboxes, remote CQ
 * rings, remote counter words) is then "device" memory the host cannot
 * reach, and keeps its own buffers in pinned host memory
 * (FI_XPU_ALLOC_HOST), which its host code reads and writes.
 *
 * Device code runs only inside kernels: every launch on the host launcher,
 * and every device call the program makes from a host thread (which on the
 * host XPU is a kernel of one work item), is bracketed by the double's
 * fake_cuda_kernel_begin/end, which open device memory while it runs. A
 * host access to device memory outside a kernel faults; a copy on the
 * legacy stream while a kernel runs aborts.
 */
#ifndef DEVICE_ON_CUDA_H
#define DEVICE_ON_CUDA_H

#include <fi_xpu.h>
#include <fi_xpu/device.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define SHM_WORLD_IFACE FI_HMEM_CUDA
#define SHM_WORLD_ALLOC_FLAGS FI_XPU_ALLOC_HOST

/* The double's hook `name` (begin or end of a kernel). The double is
 * loaded by the library when the first CUDA context opens; device calls
 * come later. */
static inline void doc_kernel(int begin)
{
	static void (*hook[2])(void);
	if (!hook[begin]) {
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (h)
			hook[begin] = (void (*)(void))(uintptr_t)dlsym(
				h, begin ? "fake_cuda_kernel_begin" : "fake_cuda_kernel_end");
		if (!hook[begin]) {
			fprintf(stderr, "device_on_cuda: the CUDA driver double is not loaded\n");
			abort();
		}
	}
	hook[begin]();
}

#define DOC_KERNEL(call)                              \
	__extension__({                               \
		__typeof__(call) doc_r_;              \
		doc_kernel(1);                        \
		doc_r_ = call;                        \
		doc_kernel(0);                        \
		doc_r_;                               \
	})

#define fi_xpu_host_launch(...) DOC_KERNEL((fi_xpu_host_launch)(__VA_ARGS__))
#define fi_xpu_write(...) DOC_KERNEL((fi_xpu_write)(__VA_ARGS__))
#define fi_xpu_read(...) DOC_KERNEL((fi_xpu_read)(__VA_ARGS__))
#define fi_xpu_send(...) DOC_KERNEL((fi_xpu_send)(__VA_ARGS__))
#define fi_xpu_recv(...) DOC_KERNEL((fi_xpu_recv)(__VA_ARGS__))
#define fi_xpu_tsend(...) DOC_KERNEL((fi_xpu_tsend)(__VA_ARGS__))
#define fi_xpu_trecv(...) DOC_KERNEL((fi_xpu_trecv)(__VA_ARGS__))
#define fi_xpu_atomic(...) DOC_KERNEL((fi_xpu_atomic)(__VA_ARGS__))
#define fi_xpu_fetch_atomic(...) DOC_KERNEL((fi_xpu_fetch_atomic)(__VA_ARGS__))
#define fi_xpu_compare_atomic(...) DOC_KERNEL((fi_xpu_compare_atomic)(__VA_ARGS__))
#define fi_xpu_flush(...) DOC_KERNEL((fi_xpu_flush)(__VA_ARGS__))
#define fi_xpu_cntr_read(...) DOC_KERNEL((fi_xpu_cntr_read)(__VA_ARGS__))
#define fi_xpu_cntr_readerr(...) DOC_KERNEL((fi_xpu_cntr_readerr)(__VA_ARGS__))
#define fi_xpu_cntr_wait_status(...) DOC_KERNEL((fi_xpu_cntr_wait_status)(__VA_ARGS__))
#define fi_xpu_cntr_wait(...) DOC_KERNEL((fi_xpu_cntr_wait)(__VA_ARGS__))
#define fi_xpu_cntr_add(...) DOC_KERNEL((fi_xpu_cntr_add)(__VA_ARGS__))
#define fi_xpu_cntr_set(...) DOC_KERNEL((fi_xpu_cntr_set)(__VA_ARGS__))
#define fi_xpu_cntr_adderr(...) DOC_KERNEL((fi_xpu_cntr_adderr)(__VA_ARGS__))
#define fi_xpu_cntr_seterr(...) DOC_KERNEL((fi_xpu_cntr_seterr)(__VA_ARGS__))
#define fi_xpu_cq_read(...) DOC_KERNEL((fi_xpu_cq_read)(__VA_ARGS__))
#define fi_xpu_cq_readfrom(...) DOC_KERNEL((fi_xpu_cq_readfrom)(__VA_ARGS__))
#define fi_xpu_cq_readerr(...) DOC_KERNEL((fi_xpu_cq_readerr)(__VA_ARGS__))
#define fi_xpu_cq_sread(...) DOC_KERNEL((fi_xpu_cq_sread)(__VA_ARGS__))
#define fi_xpu_cq_sreadfrom(...) DOC_KERNEL((fi_xpu_cq_sreadfrom)(__VA_ARGS__))
#define fi_xpu_coop_write(...) DOC_KERNEL((fi_xpu_coop_write)(__VA_ARGS__))
#define fi_xpu_put_signal(...) DOC_KERNEL((fi_xpu_put_signal)(__VA_ARGS__))
#define fi_xpu_fence(...) DOC_KERNEL((fi_xpu_fence)(__VA_ARGS__))
#define fi_xpu_quiet(...) DOC_KERNEL((fi_xpu_quiet)(__VA_ARGS__))
#define fi_xpu_signal_wait_until(...) DOC_KERNEL((fi_xpu_signal_wait_until)(__VA_ARGS__))
#define fi_xpu_peer_ptr(...) DOC_KERNEL((fi_xpu_peer_ptr)(__VA_ARGS__))

#endif /* DEVICE_ON_CUDA_H */
