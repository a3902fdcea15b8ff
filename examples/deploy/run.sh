#!/usr/bin/env bash
# Deployment walk-through: record what a workload plans, precompile it where there is no GPU,
# ship the directory, run the workload with compilation forbidden against it. Steps 1 to 3 need no
# GPU; step 4 runs where there is one. Usage: examples/deploy/run.sh [build dir]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
cli="$build/src/cli/shapejit"
workload="$build/examples/deploy_workload"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpu_arch=$("$cli" doctor | sed -n 's/^device 0: .*(\(sm_[0-9a-z]*\),.*/\1/p')

echo "== 1. record: run the workload once with SHAPEJIT_RECORD (planning is what records)"
if [ -n "$gpu_arch" ]; then plan_only=(); else plan_only=(--plan-only); fi
SHAPEJIT_RECORD="$work/workload.manifest" SHAPEJIT_CACHE_DIR="$work/dev-cache" "$workload" "${plan_only[@]}"
echo "-- recorded manifest:"
cat "$work/workload.manifest"

echo "== 2. precompile on a build machine: needs NVRTC, not a GPU"
archs="sm_80,sm_90"
case ",$archs," in *",$gpu_arch,"*) ;; *) [ -z "$gpu_arch" ] || archs="$archs,$gpu_arch" ;; esac
"$cli" precompile --manifest "$work/workload.manifest" --arch "$archs" --out "$work/kernels"
sed -n '2,6p' "$work/kernels/index.txt"

echo "== 3. ship: the directory holds no absolute path, so it can move anywhere"
mkdir -p "$work/opt/app"
mv "$work/kernels" "$work/opt/app/kernels"
"$cli" cache verify --cache-dir "$work/opt/app/kernels"

if [ -z "$gpu_arch" ]; then
  echo "== 4. (skipped: no GPU here) on the serving machine:"
  echo "   SHAPEJIT_CACHE_PATH=/opt/app/kernels SHAPEJIT_OFFLINE=1 deploy_workload"
  exit 0
fi
offline=(env SHAPEJIT_CACHE_PATH="$work/opt/app/kernels" SHAPEJIT_OFFLINE=1 SHAPEJIT_CACHE_DIR="$work/empty-user-cache")
echo "== 4. serve: offline (NVRTC is never loaded), kernels from the shipped directory only"
"${offline[@]}" "$workload"
echo "== 5. a kernel that was never recorded: offline, the error names the manifest line to add"
if "${offline[@]}" "$workload" --head-dim 64; then
  echo "unexpected: the head-dim 64 kernels were found" >&2
  exit 1
fi
