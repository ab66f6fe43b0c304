#!/usr/bin/env bash
# gpu-check.sh: proves fi_xpu on a machine with an NVIDIA GPU, in minutes,
# without Rust or network. Part of the bundle `cargo xtask gpu-bundle` makes;
# run it from anywhere:  bash fi_xpu-gpu/gpu-check.sh
#
#  1. capabilities: nvidia-smi (GPU, driver, P2P), then a small CUDA program
#     (compute capability, unified addressing, host memory registered with
#     cudaHostRegister and written by a kernel, peer access between GPUs);
#  2. builds examples/cuda/{hello,pingpong,world}.cu and examples/moe/moe.cu
#     with this machine's nvcc (13 or newer; $NVCC, else nvcc on PATH,
#     $CUDA_HOME, /usr/local/cuda);
#  3. runs hello and pingpong as two processes, world as four ranks, the MoE
#     dispatch/combine as two ranks, on one GPU over the shm and ofi providers,
#     then pingpong between two GPUs when the machine has two (ofi over libfabric's
#     ${GPU_CHECK_OFI_PROVIDER:-tcp}); the examples verify every byte they
#     receive;
#  4. prints one table: operation, provider, result, latency, bandwidth.
#
# Everything runs under `timeout`; the whole check stops after
# ${GPU_CHECK_LIMIT_S:-450} seconds. Exit status: 0 if every row is ok.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
limit=${GPU_CHECK_LIMIT_S:-450}
ofi_fabric=${GPU_CHECK_OFI_PROVIDER:-tcp}
device=${FI_XPU_CUDA_DEVICE:-0}
end=$((SECONDS + limit))
work=$(mktemp -d "${TMPDIR:-/tmp}/fi_xpu-gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
rows=()
failed=0

say() { printf 'gpu-check: %s\n' "$*"; }
row() { # operation provider result latency_us bandwidth_MBps
    rows+=("$1|$2|$3|$4|$5")
    [ "$3" = ok ] || failed=1
}
# Seconds left for a step: at most $1, never past the overall limit.
budget() {
    local left=$((end - SECONDS))
    [ "$left" -lt "$1" ] && echo $((left > 1 ? left : 1)) || echo "$1"
}
print_table() {
    echo
    printf '%-18s %-9s %-10s %14s %16s\n' operation provider result "latency (us)" "bandwidth (MB/s)"
    local r op prov res lat bw
    for r in "${rows[@]}"; do
        IFS='|' read -r op prov res lat bw <<<"$r"
        printf '%-18s %-9s %-10s %14s %16s\n' "$op" "$prov" "$res" "$lat" "$bw"
    done
}
finish() {
    print_table
    if [ "$failed" -eq 0 ]; then say "all ok"; else say "FAILED (see the lines above the table)"; fi
    exit "$failed"
}

# --- 1. capabilities --------------------------------------------------------
if ! command -v nvidia-smi >/dev/null; then
    say "nvidia-smi not found: no NVIDIA driver on this machine"
    row capability - FAIL - -
    finish
fi
if ! timeout "$(budget 30)" nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap \
        --format=csv,noheader; then
    say "nvidia-smi found no usable GPU"
    row capability - FAIL - -
    finish
fi
timeout "$(budget 20)" nvidia-smi topo -p2p r 2>/dev/null || say "nvidia-smi topo -p2p: not available"
cc_raw=$(timeout "$(budget 20)" nvidia-smi -i "$device" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
arch=${GPU_CHECK_ARCH:-}
if [ -z "$arch" ]; then
    case "$cc_raw" in
        [0-9][0-9]|[0-9][0-9][0-9]) arch="sm_$cc_raw" ;;
        *) arch=native ;;
    esac
fi

nvcc=${NVCC:-}
for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    [ -z "$nvcc" ] && [ -n "$c" ] && [ -x "$c" ] && nvcc=$c
done
if [ -z "$nvcc" ]; then
    say "nvcc not found (set NVCC or CUDA_HOME)"
    row "build nvcc" - FAIL - -
    finish
fi
say "nvcc: $nvcc ($("$nvcc" --version | tail -n1)); target $arch"

nvcc_flags=(-std=c++17 -O2 -arch="$arch" -I "$here/include")
cat >"$work/caps.cu" <<'CU'
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
__global__ void fill(unsigned *p, size_t n) { for (size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = 0xC0DE0000u + (unsigned)i; }
int main(int argc, char **argv) {
    int dev = argc > 1 ? atoi(argv[1]) : 0, n = 0, v = 0, bad = 0;
    cudaDeviceProp p;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { printf("CAP devices 0 FAIL\n"); return 1; }
    cudaGetDeviceProperties(&p, dev);
    int drv = 0, rt = 0; cudaDriverGetVersion(&drv); cudaRuntimeGetVersion(&rt);
    printf("CAP devices %d ok\nCAP name %s ok\nCAP compute_capability %d.%d ok\n", n, p.name, p.major, p.minor);
    printf("CAP driver/runtime %d/%d %s\n", drv, rt, drv >= rt ? "ok" : "FAIL");
    printf("CAP unified_addressing %d %s\n", p.unifiedAddressing, p.unifiedAddressing ? "ok" : "FAIL");
    cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, dev);
    printf("CAP host_pointer_for_registered_mem %d %s\n", v, v ? "ok" : "FAIL");
    cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, dev);
    printf("CAP pageable_memory_access %d info\n", v);
    for (int a = 0; a < n; a++) for (int b = 0; b < n; b++) if (a != b) {
        int can = 0; cudaDeviceCanAccessPeer(&can, a, b); printf("CAP p2p_%d_to_%d %d info\n", a, b, can);
    }
    /* What the examples' memory callbacks do: a memfd mapping, registered, written by a kernel. */
    size_t len = 1 << 20, words = len / 4;
    cudaSetDevice(dev);
    int fd = memfd_create("caps", 0);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) return 1;
    unsigned *h = (unsigned *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cudaError_t e = cudaHostRegister(h, len, cudaHostRegisterMapped | cudaHostRegisterPortable);
    void *d = NULL;
    if (e == cudaSuccess) e = cudaHostGetDevicePointer(&d, h, 0);
    if (e == cudaSuccess) { fill<<<1, 256>>>((unsigned *)d, words); e = cudaDeviceSynchronize(); }
    if (e == cudaSuccess) for (size_t i = 0; i < words; i++) bad |= h[i] != 0xC0DE0000u + (unsigned)i;
    printf("CAP host_memory_kernel_write %s %s\n", e == cudaSuccess ? (bad ? "wrong-bytes" : "verified") : cudaGetErrorString(e),
           e == cudaSuccess && !bad && d == (void *)h ? "ok" : "FAIL");
    return e == cudaSuccess && !bad ? 0 : 1;
}
CU
if timeout "$(budget 120)" "$nvcc" "${nvcc_flags[@]}" "$work/caps.cu" -o "$work/caps" >"$work/caps.log" 2>&1; then
    timeout "$(budget 30)" "$work/caps" "$device" >"$work/caps.out" 2>&1
    cat "$work/caps.out"
    while read -r tag name value verdict; do
        [ "$tag" = CAP ] || continue
        case "$verdict" in ok|FAIL) row "cap $name" - "$verdict" - - ;; esac
    done <"$work/caps.out"
    grep -q '^CAP host_memory_kernel_write .* ok$' "$work/caps.out" || row "cap run" - FAIL - -
else
    cat "$work/caps.log"
    row "build caps.cu" nvcc FAIL - -
    finish
fi

# --- 2. build the examples ---------------------------------------------------
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FI_XPU_PROVIDER_PATH="$here/lib/fi_xpu"
for ex in hello pingpong world moe; do
    src="$here/examples/cuda/$ex.cu" extra=()
    # moe checks every byte against host arithmetic: no fused multiply-adds.
    [ "$ex" = moe ] && src="$here/examples/moe/moe.cu" extra=(-fmad=false)
    if timeout "$(budget 180)" "$nvcc" "${nvcc_flags[@]}" "${extra[@]}" -I "$here/examples/cuda" \
            "$src" -L "$here/lib" -lfi_xpu -Xlinker "-rpath=$here/lib" \
            -o "$work/${ex}_cuda" >"$work/$ex.build.log" 2>&1; then
        row "build $ex.cu" nvcc ok - -
    else
        cat "$work/$ex.build.log"
        row "build $ex.cu" nvcc FAIL - -
    fi
done

# --- 3. run: two processes on one GPU per provider -------------------------
# Without MPS the GPU time-slices the two processes' spinning kernels
# (about 1 ms each way per round trip), so start an MPS daemon of our own
# where the machine has one and none runs (GPU_CHECK_MPS=0: do not).
mps_started=0
if [ "${GPU_CHECK_MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null &&
        [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    export CUDA_MPS_PIPE_DIRECTORY="$work/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$work/mps-log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if timeout 20 nvidia-cuda-mps-control -d; then
        mps_started=1
        say "MPS daemon started (processes on one GPU run at once)"
        trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; rm -rf "$work"' EXIT
    else
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        say "MPS daemon could not start: processes on one GPU are time-sliced"
    fi
fi
[ "$mps_started" = 1 ] || say "no MPS: two processes on one GPU are time-sliced (latency includes it)"
# The second process's GPU (pingpong across two GPUs) and the prefix of its rows.
peer_device=$device
label=
run_example() { # name provider args...
    local ex=$1 prov=$2 log="$work/$1.$2.$peer_device.log" rc
    shift 2
    [ -x "$work/${ex}_cuda" ] || { row "$label$ex" "$prov" "not-built" - -; return; }
    if [ $((end - SECONDS)) -lt 5 ]; then row "$label$ex" "$prov" "no-time" - -; return; fi
    FI_XPU_PROVIDER=$prov FI_XPU_OFI_PROVIDER=$ofi_fabric FI_XPU_CUDA_DEVICE=$device \
        FI_XPU_CUDA_PEER_DEVICE=$peer_device \
        timeout -k 5 "$(budget 120)" "$work/${ex}_cuda" "$@" >"$log" 2>&1
    rc=$?
    local op p res lat bw seen=0
    while read -r tag op p res lat bw; do
        [ "$tag" = RESULT ] || continue
        row "$label$op" "$p" "$res" "$lat" "$bw"
        seen=1
    done <"$log"
    if [ "$rc" -ne 0 ]; then
        say "$ex over $prov failed (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out")); its output:"
        tail -n 30 "$log"
        row "$label$ex" "$prov" "FAIL($rc)" - -
    elif [ "$seen" -eq 0 ]; then
        row "$label$ex" "$prov" "no-result" - -
    fi
}
for prov in shm ofi; do
    run_example hello "$prov"
    run_example pingpong "$prov" -n "${GPU_CHECK_ITERS:-1000}"
    run_example world "$prov"
    # MoE dispatch and combine, two ranks on the GPU, every byte verified.
    run_example moe "$prov" -n 2 -p "$prov" -f "$ofi_fabric" -T "${GPU_CHECK_MOE_TOKENS:-32}" -i 3
done
# Across two GPUs when there are two: pingpong with its peer on the next one.
ngpus=$(timeout "$(budget 20)" nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [ "${ngpus:-0}" -ge 2 ]; then
    peer_device=$(( (device + 1) % ngpus )) label="2gpu:"
    say "two GPUs: pingpong between GPU $device and GPU $peer_device"
    for prov in shm ofi; do
        run_example pingpong "$prov" -n "${GPU_CHECK_ITERS:-1000}"
    done
else
    say "one GPU: no run across two GPUs"
fi
finish
