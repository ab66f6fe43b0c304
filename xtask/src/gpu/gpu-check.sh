#!/usr/bin/env bash
# gpu-check.sh: measures fi_xpu on a machine with an NVIDIA GPU, in at most
# five minutes, without Rust or network, against ceilings measured by the
# same run. Part of the bundle `cargo xtask gpu-bundle` makes; run it from
# anywhere:  bash fi_xpu-gpu/gpu-check.sh
#
# Without a GPU it prints one line and exits 0. Otherwise:
#  0. starts an MPS daemon of its own where the machine has MPS and none
#     runs (GPU_CHECK_MPS=0: do not), and gives each of the two processes
#     of every run CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 (100/ranks), so that
#     kernels that wait on each other stay resident together;
#  1. the probe (bin/fi_xpu_gpu_probe, prebuilt for sm_90; rebuilt from
#     gpu/probe.cu with this machine's nvcc for another GPU or when it does
#     not start): driver, IPC, memory-model litmus tests, costs, copy
#     bandwidth, as key=value lines;
#  2. builds examples/cuda/{hello,pingpong,world}.cu and examples/moe/moe.cu
#     with nvcc (13 or newer; $NVCC, else nvcc on PATH, $CUDA_HOME,
#     /usr/local/cuda);
#  3. runs them, two processes on one GPU, over shm and over ofi (libfabric's
#     tcp and shm); the examples verify every byte they receive;
#  4. prints `RESULT name value unit ceiling ratio verdict` lines, each
#     ceiling from this run: the 8-byte put-with-signal one-way latency
#     (p50, p99) against the probe's flag ping-pong between two blocks of one
#     process; put bandwidth at 16 and 256 MiB (one write split across a grid
#     of one block per SM, fi_xpu_coop_write_part) against the
#     device-to-device copy; the MoE dispatch and combine (128 tokens, hidden
#     7168 BF16, top-8, 8 experts per rank, 2 ranks); ofi's latency and
#     bandwidth. verdict: pass or miss against the targets for an H200
#     (BENCHMARKS.md), info where there is none;
#  5. prints the table of builds and runs (operation, provider, result,
#     latency, bandwidth).
#
# Every line goes to the terminal and, as it is measured, to
# $GPU_CHECK_OUT (default ./gpu-check-out): check.log (everything),
# probe.txt, and one log per run; a run cut off still reports what it had.
# Each step runs under `timeout` (builds: ${GPU_CHECK_BUILD_S:-180} s); the
# whole check stops after ${GPU_CHECK_LIMIT_S:-300} seconds. Exit status: 0 if every build and run
# is ok (a missed target is reported, not a failure).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
limit=${GPU_CHECK_LIMIT_S:-300}
device=${FI_XPU_CUDA_DEVICE:-0}
end=$((SECONDS + limit))

# --- no GPU: one line ---------------------------------------------------------
if ! command -v nvidia-smi >/dev/null; then
    echo "gpu-check: skipped: nvidia-smi not found (no NVIDIA driver)"
    exit 0
fi
if ! timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "gpu-check: skipped: nvidia-smi lists no usable GPU"
    exit 0
fi

out=${GPU_CHECK_OUT:-$PWD/gpu-check-out}
mkdir -p "$out" || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/fi_xpu-gpu-check.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
# Everything from here on is also written to check.log as it comes.
exec > >(tee "$out/check.log") 2>&1
rows=()
failed=0
missed=0

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
    printf '%-22s %-9s %-10s %14s %16s\n' operation provider result "latency (us)" "bandwidth (MB/s)"
    local r op prov res lat bw
    for r in "${rows[@]}"; do
        IFS='|' read -r op prov res lat bw <<<"$r"
        printf '%-22s %-9s %-10s %14s %16s\n' "$op" "$prov" "$res" "$lat" "$bw"
    done
}
finish() {
    print_table
    [ "$missed" -gt 0 ] && say "$missed target(s) missed (RESULT lines with verdict miss)"
    if [ "$failed" -eq 0 ]; then say "all builds and runs ok"; else say "FAILED (see the lines above the table)"; fi
    exit "$failed"
}
trap 'say "time limit or signal: stopping"; finish' TERM INT

# A probe or example value: the last `key=value` (or `KEY ...` fields) seen.
probe_value() { sed -n "s/^$1=\([0-9.]*\)$/\1/p" "$out/probe.txt" 2>/dev/null | tail -n1; }
# RESULT name value unit ceiling ratio verdict. $5: the rule on value/ceiling
# (le:X passes when the ratio is at most X, ge:X at least X, - none); $6: an
# absolute bound on the value (le:X), or -.
result() {
    local name=$1 value=$2 unit=$3 ceiling=${4:--} rule=${5:--} bound=${6:--} ratio=- verdict=info
    if [ -z "$value" ] || [ "$value" = - ]; then
        echo "RESULT $name - $unit $ceiling - not-measured"
        return
    fi
    if [ "$ceiling" != - ] && [ -n "$ceiling" ]; then
        ratio=$(awk -v v="$value" -v c="$ceiling" 'BEGIN { if (c > 0) printf "%.3f", v / c; else print "-" }')
    else
        ceiling=-
    fi
    # Without its ceiling a ratio rule cannot be judged: only the bound is.
    [ "$ratio" = - ] && rule=-
    if [ "$rule" != - ] || [ "$bound" != - ]; then
        verdict=$(awk -v r="$ratio" -v rule="$rule" -v v="$value" -v bound="$bound" 'BEGIN {
            ok = 1
            split(rule, a, ":"); split(bound, b, ":")
            if (rule != "-") { if (a[1] == "le" && r + 0 > a[2] + 0) ok = 0; else if (a[1] == "ge" && r + 0 < a[2] + 0) ok = 0 }
            if (bound != "-" && b[1] == "le" && v + 0 > b[2] + 0) ok = 0
            print ok ? "pass" : "miss" }')
        [ "$verdict" = miss ] && missed=$((missed + 1))
    fi
    echo "RESULT $name $value $unit $ceiling $ratio $verdict"
}

say "output: $out"
timeout "$(budget 20)" nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap \
    --format=csv,noheader
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
[ -n "$nvcc" ] && say "nvcc: $nvcc ($("$nvcc" --version | tail -n1)); target $arch" ||
    say "nvcc not found (set NVCC or CUDA_HOME): only the prebuilt probe runs"

# --- 0. MPS and residency -------------------------------------------------------
# Without MPS the GPU time-slices two processes' spinning kernels (about
# 1 ms each way per round trip).
ranks=2
if [ "${GPU_CHECK_MPS:-1}" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null &&
        [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    export CUDA_MPS_PIPE_DIRECTORY="$work/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$work/mps-log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if timeout 20 nvidia-cuda-mps-control -d; then
        say "MPS daemon started (processes on one GPU run at once)"
        cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1; rm -rf "$work"; }
    else
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        say "MPS daemon could not start: processes on one GPU are time-sliced"
    fi
fi
# Each of the two processes gets its share of the SMs: kernels that wait on
# the other process's kernels need both resident.
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-$((100 / ranks))}
say "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (read only under MPS)"

# --- 1. the probe -------------------------------------------------------------------
probe="$here/bin/fi_xpu_gpu_probe"
if { [ "$arch" != sm_90 ] || [ ! -x "$probe" ]; } && [ -n "$nvcc" ]; then
    say "building the probe for $arch"
    if timeout "$(budget 120)" "$nvcc" -std=c++17 -O2 -arch="$arch" -cudart static \
            "$here/gpu/probe.cu" -o "$work/fi_xpu_gpu_probe" >"$out/probe.build.log" 2>&1; then
        probe="$work/fi_xpu_gpu_probe"
    else
        cat "$out/probe.build.log"
    fi
fi
if [ -x "$probe" ]; then
    say "probe: $probe (at most $(budget 180) s)"
    timeout -k 5 "$(budget 180)" "$probe" -d "$device" -t "$(( $(budget 180) - 5 ))" | tee "$out/probe.txt"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then row probe - ok - -; else row probe - "FAIL($rc)" - -; fi
else
    row probe - not-built - -
fi

# --- 2. build the examples ----------------------------------------------------------
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FI_XPU_PROVIDER_PATH="$here/lib/fi_xpu"
if [ -z "$nvcc" ]; then
    row "build examples" nvcc FAIL - -
    finish
fi
nvcc_flags=(-std=c++17 -O2 -arch="$arch" -I "$here/include")
build_pids=()
for ex in hello pingpong world moe; do
    src="$here/examples/cuda/$ex.cu" extra=()
    # moe checks every byte against host arithmetic: no fused multiply-adds.
    [ "$ex" = moe ] && src="$here/examples/moe/moe.cu" extra=(-fmad=false)
    timeout "$(budget "${GPU_CHECK_BUILD_S:-180}")" "$nvcc" "${nvcc_flags[@]}" "${extra[@]}" -I "$here/examples/cuda" \
        "$src" -L "$here/lib" -lfi_xpu -Xlinker "-rpath=$here/lib" \
        -o "$work/${ex}_cuda" >"$out/$ex.build.log" 2>&1 &
    build_pids+=("$ex:$!")
done
# The same MoE exchange over NVSHMEM, against the wheel's headers and
# libraries ($NVSHMEM_HOME, else the nvidia-nvshmem wheel in Python's site
# directories): the peer figure.
nvshmem=${NVSHMEM_HOME:-}
if [ -z "$nvshmem" ] && command -v python3 >/dev/null; then
    for d in $(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
        [ -z "$nvshmem" ] && [ -f "$d/nvidia/nvshmem/include/nvshmem.h" ] && nvshmem="$d/nvidia/nvshmem"
    done
fi
if [ -n "$nvshmem" ]; then
    say "NVSHMEM: $nvshmem"
    timeout "$(budget "${GPU_CHECK_BUILD_S:-180}")" "$nvcc" "${nvcc_flags[@]}" -rdc=true -fmad=false \
        -I "$nvshmem/include" -I "$here/examples/moe" "$here/gpu/moe_nvshmem.cu" \
        -L "$nvshmem/lib" -l:libnvshmem_host.so.3 -lnvshmem_device \
        -Xlinker "-rpath=$nvshmem/lib" -o "$work/moe_nvshmem_cuda" >"$out/moe_nvshmem.build.log" 2>&1 &
    build_pids+=("moe_nvshmem:$!")
else
    say "NVSHMEM not found (no wheel, NVSHMEM_HOME unset): no peer figure"
fi
for b in "${build_pids[@]}"; do
    ex=${b%%:*}
    if wait "${b#*:}"; then
        row "build $ex.cu" nvcc ok - -
    else
        cat "$out/$ex.build.log"
        row "build $ex.cu" nvcc FAIL - -
    fi
done

# --- 3. run ---------------------------------------------------------------------------
run_example() { # name label provider fabric args...
    local ex=$1 label=$2 prov=$3 fabric=$4 log="$out/$1.$2.log" rc
    shift 4
    [ -x "$work/${ex}_cuda" ] || { row "$ex" "$label" "not-built" - -; return; }
    if [ $((end - SECONDS)) -lt 5 ]; then row "$ex" "$label" "no-time" - -; return; fi
    say "running $ex over $label"
    FI_XPU_PROVIDER=$prov FI_XPU_OFI_PROVIDER=$fabric FI_XPU_CUDA_DEVICE=$device \
        timeout -k 5 "$(budget 60)" "$work/${ex}_cuda" "$@" >"$log" 2>&1
    rc=$?
    local tag op p res lat bw seen=0
    while read -r tag op p res lat bw; do
        [ "$tag" = RESULT ] || continue
        row "$op" "$label" "$res" "$lat" "$bw"
        seen=1
    done <"$log"
    if [ "$rc" -ne 0 ]; then
        say "$ex over $label failed (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out")); its output:"
        tail -n 30 "$log"
        row "$ex" "$label" "FAIL($rc)" - -
    elif [ "$seen" -eq 0 ]; then
        row "$ex" "$label" "no-result" - -
    fi
}
iters=${GPU_CHECK_ITERS:-1000}
run_example hello shm shm tcp
run_example pingpong shm shm tcp -n "$iters" -B $((256 << 20))
run_example moe shm shm tcp -n 2 -p shm -T "${GPU_CHECK_MOE_TOKENS:-128}" -E 8 -K 8 -W 5 -i 20
if [ -n "$nvshmem" ]; then
    LD_LIBRARY_PATH="$nvshmem/lib:$LD_LIBRARY_PATH" NVSHMEM_REMOTE_TRANSPORT=none \
        run_example moe_nvshmem nvshmem - - -n 2 -T "${GPU_CHECK_MOE_TOKENS:-128}" -E 8 -K 8 -W 5 -i 20
fi
run_example world shm shm tcp
for fabric in tcp shm; do
    run_example hello "ofi-$fabric" ofi "$fabric"
    run_example pingpong "ofi-$fabric" ofi "$fabric" -n "$iters" -B $((16 << 20))
done

# --- 4. results against this run's ceilings -------------------------------------------
echo
lat() { awk -v op="$2" -v col="$3" '$1 == "LAT" && $2 == op { v = $col } END { if (v != "") print v }' "$out/$1.log" 2>/dev/null; }
bw() { awk -v op="$2" '$1 == "BW" && $2 == op { v = $5 } END { if (v != "") print v }' "$out/$1.log" 2>/dev/null; }
mem=$(awk '$1 == "LAT" { m = $4 } END { print m }' "$out/pingpong.shm.log" 2>/dev/null)
# The one-way target: 1.5 us with device-scope heaps, 3 us at system scope.
bound=le:3000
[ "$mem" = device ] && bound=le:1500
floor50=$(probe_value cost.pingpong.block.gpu.p50_ns)
floor99=$(probe_value cost.pingpong.block.gpu.p99_ns)
result shm_put_signal_8B_oneway_p50 "$(lat pingpong.shm put_signal/8B 5)" ns "$floor50" le:2 "$bound"
result shm_put_signal_8B_oneway_p99 "$(lat pingpong.shm put_signal/8B 6)" ns "$floor99" le:2
result shm_write_8B_oneway_p50 "$(lat pingpong.shm write/8B 5)" ns "$floor50" le:2 "$bound"
ceiling() { # the faster of the probe's two local copies at $1 MiB
    local a b
    a=$(probe_value "bw.copy_engine.local.$1MiB_GBps") b=$(probe_value "bw.kernel.local.$1MiB_GBps")
    awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { m = a > b ? a : b; if (m > 0) print m }'
}
c16=$(ceiling 16) c256=$(ceiling 256)
result shm_put_16MiB "$(bw pingpong.shm put/16MiB)" GB/s "$c16" ge:0.5
result shm_put_256MiB "$(bw pingpong.shm put/256MiB)" GB/s "$c256" ge:0.8
moe() { awk -v t="$1" -v k="$2" '$1 == t && $2 == k { v = $3 } END { if (v != "") print v }' "$out/$3.log" 2>/dev/null; }
nd=$(moe NVSHMEM dispatch_us moe_nvshmem.nvshmem) nc=$(moe NVSHMEM combine_us moe_nvshmem.nvshmem)
nt=$(moe NVSHMEM total_us moe_nvshmem.nvshmem)
# Against NVSHMEM's figure where it was measured: within 2x.
rule=-
[ -n "$nt" ] && rule=le:2
result shm_moe_dispatch "$(moe MOE dispatch_us moe.shm)" us "$nd" "$rule"
result shm_moe_combine "$(moe MOE combine_us moe.shm)" us "$nc" "$rule"
result shm_moe_dispatch_combine "$(moe MOE total_us moe.shm)" us "$nt" "$rule" le:150
result nvshmem_moe_dispatch_combine "$nt" us
for fabric in tcp shm; do
    result "ofi_${fabric}_write_8B_oneway_p50" "$(lat "pingpong.ofi-$fabric" write/8B 5)" ns "$floor50"
    result "ofi_${fabric}_put_signal_8B_oneway_p50" "$(lat "pingpong.ofi-$fabric" put_signal/8B 5)" ns "$floor50"
    result "ofi_${fabric}_put_16MiB" "$(bw "pingpong.ofi-$fabric" put/16MiB)" GB/s "$c16"
done
finish
