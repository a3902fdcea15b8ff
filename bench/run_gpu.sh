#!/usr/bin/env bash
# Runs the rearrange examples, the JIT benchmark and the rearrange benchmark on a GPU machine,
# from the repository root of a built tree: `bash bench/run_gpu.sh [build-dir]`. All output goes
# to $OUT/run_gpu.log (default bench-out/), the benchmarks' markdown beside it. Each program
# starts with an empty kernel cache, so the rearrange benchmark counts every kernel its suites
# compile.
set -uo pipefail
build=${1:-build}
export OUT=${OUT:-bench-out}
mkdir -p "$OUT"
status=0

run() {
  local name=$1
  shift
  local cache
  cache=$(mktemp -d)
  echo "== $name: $*" | tee -a "$OUT/run_gpu.log"
  SHAPEJIT_CACHE_DIR=$cache "$@" 2>&1 | tee -a "$OUT/run_gpu.log"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    echo "== $name FAILED" | tee -a "$OUT/run_gpu.log"
    status=1
  fi
  rm -rf "$cache"
}

run permute_attention "$build/examples/permute" --shape 64,512,32,128 --perm 0,2,1,3 --dtype f16
run permute_transpose "$build/examples/permute" --shape 8192,8192 --perm 1,0 --dtype f32
run permute_rank6_u8 "$build/examples/permute" --shape 5,7,3,9,11,4 --perm 5,3,1,0,2,4 --dtype u8
run permute_12byte "$build/examples/permute" --shape 1000,3,7 --perm 2,0,1 --elem-bytes 12
run views "$build/examples/views"
run jit_bench "$build/bench/jit_bench"
run rearrange_bench "$build/bench/rearrange_bench"
exit $status
