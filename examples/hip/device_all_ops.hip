/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * ../device_all_ops.c (a kernel that calls every device operation) as HIP
 * device code: <hip/hip_runtime.h> first, then the example unchanged.
 *
 *   hipcc -std=c++17 --offload-arch=gfx90a -I . -I include -c examples/hip/device_all_ops.hip
 */
#include <hip/hip_runtime.h>

#include "../device_all_ops.c"
