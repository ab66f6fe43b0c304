/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The CUDA runtime names the GPU examples use, as HIP names: with it the
 * examples under ../cuda and ../moe are HIP sources too, compiled by hipcc
 * for AMD GPUs (the *.hip files here). The device code is fi_xpu's own
 * either way; fi_xpu/device_arch.h picks the AMD forms under hipcc.
 */
#ifndef FI_XPU_EXAMPLE_CUDA_NAMES_H
#define FI_XPU_EXAMPLE_CUDA_NAMES_H

#include <hip/hip_runtime.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorHostMemoryAlreadyRegistered hipErrorHostMemoryAlreadyRegistered
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaSetDevice hipSetDevice
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocMapped hipHostMallocMapped
#define cudaFreeHost hipHostFree
#define cudaHostRegister hipHostRegister
#define cudaHostRegisterMapped hipHostRegisterMapped
#define cudaHostRegisterPortable hipHostRegisterPortable
#define cudaHostRegisterIoMemory hipHostRegisterIoMemory
/* Newer HIP has the flag; older HIP registers read-only pages without it. */
#ifdef hipHostRegisterReadOnly
#define cudaHostRegisterReadOnly hipHostRegisterReadOnly
#else
#define cudaHostRegisterReadOnly 0
#endif
#define cudaHostUnregister hipHostUnregister
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemset hipMemset
#define cudaMemcpy hipMemcpy
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaGetDevice hipGetDevice
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventElapsedTime hipEventElapsedTime
/* A wavefront runs its lanes together; the barrier keeps the compiler from
 * moving memory operations across. */
#define __syncwarp() __builtin_amdgcn_wave_barrier()

#endif /* FI_XPU_EXAMPLE_CUDA_NAMES_H */
