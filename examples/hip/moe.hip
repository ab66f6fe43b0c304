/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * ../moe/moe.cu (MoE dispatch and combine) for AMD GPUs: the same source,
 * built by hipcc (the CUDA runtime calls become HIP's through cuda_names.h,
 * which ../cuda/cuda_mem.h includes under hipcc). Build with
 * -ffp-contract=off: the host checks every byte with unfused arithmetic.
 *
 *   hipcc -std=c++17 --offload-arch=gfx90a -ffp-contract=off -I . -I include \
 *         examples/hip/moe.hip -L target/release -lfi_xpu -o moe_hip && ./moe_hip -n 2
 */
#include "../moe/moe.cu"
