/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * ../cuda/world.cu for AMD GPUs: the same source, built by hipcc (the CUDA
 * runtime calls become HIP's through cuda_names.h, which ../cuda/cuda_mem.h
 * includes under hipcc).
 *
 *   hipcc -std=c++17 --offload-arch=gfx90a -I . -I include examples/hip/world.hip \
 *         -L target/release -lfi_xpu -o world_hip && FI_XPU_PROVIDER=shm ./world_hip
 */
#include "../cuda/world.cu"
