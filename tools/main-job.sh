#!/usr/bin/env bash
# The main job (./quickstart main): on a GPU, run the examples, each checked against the CPU and
# printing bandwidth; without one, plan and precompile the shipped manifest for sm_80 and sm_90.
set -euo pipefail
build=${1:-build}
if "$build/src/cli/shapejit" doctor | grep -q '^device 0:'; then
  "$build/src/cli/shapejit" doctor
  for example in "$build"/examples/*; do
    [ -x "$example" ] && [ -f "$example" ] || continue
    echo "== $(basename "$example")"
    "$example"
  done
else
  echo "no GPU found: planning and precompiling cache/llm.manifest for sm_80 and sm_90 instead"
  "$build/src/cli/shapejit" precompile --manifest cache/llm.manifest --arch sm_80,sm_90 --out "$build/deploy-cache"
fi
