#!/usr/bin/env bash
# The main job (./quickstart main): on a GPU, run the examples, each checked against the CPU and
# printing bandwidth; without one, plan and precompile the shipped manifest for sm_80 and sm_90.
set -euo pipefail
build=${1:-build}
cli="$build/src/cli/shapejit"
if "$cli" doctor | grep -q '^device 0:'; then
  "$cli" doctor
  run_example() {
    echo "== $(basename "$1") ${*:2}"
    "$@"
  }
  run_example "$build/examples/permute" --dtype f16 --shape 64,512,32,128 --perm 0,2,1,3
  run_example "$build/examples/permute" --dtype f32 --shape 8192,8192 --perm 1,0
  run_example "$build/examples/permute" --dtype u8 --shape 5,7,3,9,11,4 --perm 5,3,1,0,2,4
  run_example "$build/examples/permute" --elem-bytes 12 --shape 1000,3,7 --perm 2,0,1
  run_example "$build/examples/views"
  run_example "$build/examples/rope_llama"
  run_example "$build/examples/kv_rotate"
  run_example "$build/examples/rope_serving"
  # The Python examples, when the package was built and its interpreter has torch with a GPU.
  py=$(cat "$build/python/interpreter.txt" 2>/dev/null || true)
  if [ -n "$py" ] && "$py" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
    run_example "$py" examples/python/permute.py
    run_example "$py" examples/python/llama_decode.py
  else
    echo "== examples/python not run: the Python package was not built, or its interpreter has no torch with a GPU"
  fi
else
  reason=$("$cli" doctor | sed -n 's/^driver: *not usable: //p')
  echo "NO GPU FOUND (${reason:-no CUDA device}): the examples need one and are not run."
  echo "Instead, what a GPU-less build machine does for a deployment: precompile cache/llm.manifest and cache/serving.manifest for sm_80 and sm_90."
  out="$build/deploy-cache"
  "$cli" precompile --manifest cache/llm.manifest --manifest cache/serving.manifest --arch sm_80,sm_90 --out "$out"
  "$cli" cache verify --cache-dir "$out"
  echo "deployment directory: $out (index: $out/index.txt)"
  echo "serve it on a GPU machine with: SHAPEJIT_CACHE_PATH=$out SHAPEJIT_OFFLINE=1 <your program>"
  echo "(no GPU was found, so no kernel was launched)"
fi
