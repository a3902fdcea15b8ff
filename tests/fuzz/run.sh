#!/usr/bin/env bash
# Fuzzes the cache entry parser for a bounded time (default 20 s) with libFuzzer and
# AddressSanitizer. Seeds come from tests/fuzz/corpus/ (kept in the repository, never written to);
# what the fuzzer finds goes to a scratch directory. Without clang++ and libFuzzer it says so and
# succeeds. Usage: tests/fuzz/run.sh [build dir] [seconds]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
seconds=${2:-${SHAPEJIT_FUZZ_SECONDS:-20}}
out="$build/fuzz"
mkdir -p "$out"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Isrc -Iinclude)
if ! command -v clang++ >/dev/null 2>&1 ||
   ! clang++ "${flags[@]}" tests/fuzz/fuzz_entry.cpp src/jit/cache_entry.cpp -o "$out/fuzz_entry" 2>"$out/build.log"; then
  echo "fuzz: skipped (needs clang++ with libFuzzer: the Debian package clang)"
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "fuzz: decode_entry for ${seconds} s"
if "$out/fuzz_entry" -max_total_time="$seconds" -max_len=4096 -artifact_prefix="$out/" \
     "$scratch" tests/fuzz/corpus >"$out/fuzz.log" 2>&1; then
  grep -a '^Done' "$out/fuzz.log" | sed 's/^/fuzz: /' || true
else
  tail -40 "$out/fuzz.log" | cat -v
  echo "fuzz: FAILED; the input that broke the parser is in $out/ (crash-*)"
  exit 1
fi
