/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The C library types the fi_xpu headers use: size_t, the fixed-width
 * integers, uintptr_t and NULL. They come from <stddef.h> and <stdint.h>,
 * except under NVRTC (__CUDACC_RTC__), NVIDIA's runtime compiler, which has
 * no C library headers: there they are defined here exactly as CCCL's
 * <cuda/std/cstdint> defines them for NVRTC, so a kernel may include both in
 * either order. size_t is built into NVRTC.
 *
 * FI_XPU_I_NULL is the headers' null pointer: nullptr in C++11 and later,
 * so that C++ projects built with -Wzero-as-null-pointer-constant include
 * them cleanly, ((void *)0) in C.
 */
#ifndef FI_XPU_INCLUDED_FREESTANDING_H
#define FI_XPU_INCLUDED_FREESTANDING_H

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef signed short int16_t;
typedef signed int int32_t;
typedef signed long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int64_t intptr_t;
typedef uint64_t uintptr_t;
#ifndef NULL
#define NULL 0
#endif
#else
#include <stddef.h>
#include <stdint.h>
#endif

#if defined(__cplusplus) && __cplusplus >= 201103L
#define FI_XPU_I_NULL nullptr
#elif defined(__cplusplus)
#define FI_XPU_I_NULL 0
#else
#define FI_XPU_I_NULL ((void *)0)
#endif

#endif /* FI_XPU_INCLUDED_FREESTANDING_H */
