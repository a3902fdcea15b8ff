#!/usr/bin/env bash
# Runs every test suite of a build directory and prints the totals of doctest's summaries.
# Exit status is non-zero when any suite failed.
set -uo pipefail
build=${1:-build}
passed=0 failed=0 skipped=0 status=0
for suite in host compile gpu; do
  echo "== $suite tests"
  log=$(mktemp)
  "$build/tests/test_$suite" 2>&1 | tee "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  line=$(grep '\[doctest\] test cases:' "$log" | tail -1)
  rm -f "$log"
  if [ -z "$line" ]; then echo "$suite: no doctest summary"; status=1; continue; fi
  read -r p f s < <(echo "$line" | sed -E 's/.*\| *([0-9]+) passed \| *([0-9]+) failed \| *([0-9]+) skipped.*/\1 \2 \3/')
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if [ "$s" -gt 0 ]; then
    echo "$suite: $s skipped (no usable GPU, or fewer devices than the case needs):"
    names() { "$build/tests/test_$suite" --list-test-cases "$@" 2>/dev/null | grep -v '^\[doctest\]' | grep -v '^=' | sort; }
    comm -23 <(names --no-skip) <(names) | sed 's/^/  skipped: /' | head -200
  fi
done
echo "== python tests"
if [ -f "$build/python/interpreter.txt" ] && [ -f "$build/python/shapejit/__init__.py" ]; then
  py=$(cat "$build/python/interpreter.txt")
  log=$(mktemp)
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest -v -rs -p no:cacheprovider \
    "$(dirname "$0")/python" 2>&1 | tee "$log" | grep -vE "^[^ ]+::[^ ]+ (PASSED|SKIPPED)"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  line=$(grep -E '^=+ .*(passed|failed|skipped|error).* in [0-9.]+s' "$log" | tail -1)
  if [ -z "$line" ]; then
    echo "python: no pytest summary"; status=1
  else
    count() { echo "$line" | grep -oE "[0-9]+ $1" | grep -oE '[0-9]+' || echo 0; }
    p=$(count passed) f=$(count failed) e=$(count error) s=$(count skipped)
    passed=$((passed + p)) failed=$((failed + f + e)) skipped=$((skipped + s))
    if [ "$s" -gt 0 ]; then
      echo "python: $s skipped (no GPU, or no torch, CuPy or JAX):"
      grep -E '^[^ ]+::[^ ]+ SKIPPED' "$log" | sed -E 's/^([^ ]+) SKIPPED.*/  skipped: \1/' | head -300
      grep -E '^SKIPPED \[' "$log" | sed -E 's/^SKIPPED \[[0-9]+\] [^ ]+: //' | sort | uniq -c |
        sed -E 's/^ *([0-9]+) (.*)/  why: \2 (\1 places)/'
    fi
  fi
  rm -f "$log"
else
  echo "python: the package was not built in $build (meson found no nanobind or Python headers; see"
  echo "        'Python extension' in meson's output, or configure with -Dpython=enabled): not run"
fi
echo "== fuzz (cache entry parser, bounded time)"
bash "$(dirname "$0")/fuzz/run.sh" "$build" || status=1
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
