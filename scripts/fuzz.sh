#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) in build-fuzz/ with clang, ASan and UBSan, then runs each
# target in turn for SECONDS_PER_TARGET seconds (default 600: 70 minutes for the seven targets).
#   bash scripts/fuzz.sh                  the long run (documented in docs/reliability.md)
#   bash scripts/fuzz.sh 10               the short run .ci/run does
#   bash scripts/fuzz.sh 60 fuzz_depfile  one target
# Each run starts from the seed corpus fuzz/corpus/<target>/ and replays every kept crash in
# fuzz/regressions/<target>/; a new crash (or a violated property) is written there as crash-<sha1>
# and the script exits 1 after the remaining targets ran. The corpus a run grows stays in
# build-fuzz/corpus/<target>/ (not in the repository). Logs: build-fuzz/logs/<target>.log.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

seconds="${1:-600}"
shift || true
if (($# > 0)); then
  targets=("$@")
else
  targets=()
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

# The newest clang here first (as scripts/clang-build.sh, CI's build): libFuzzer comes with
# libclang-rt-19-dev (clang 14's with libclang-rt-14-dev); any clang with it works.
cxx="${KACHE_FUZZ_CXX:-}"
if [[ -z "$cxx" ]]; then
  for c in clang++-19 clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
  done
fi
[[ -n "$cxx" ]] || { echo "fuzz: no clang++ found (install clang-19 and libclang-rt-19-dev)" >&2; exit 1; }

# KACHE_FUZZ_BUILD names a build dir configured with -DKACHE_FUZZ=ON already (CI reuses
# scripts/clang-build.sh's build-clang); otherwise build-fuzz/ is configured here, optimized.
build="${KACHE_FUZZ_BUILD:-build-fuzz}"
if [[ -z "${KACHE_FUZZ_BUILD:-}" ]]; then
  # Warnings are not errors here: a newer clang's new warning must not stop the fuzz step (the GCC
  # build keeps -Werror for the code itself).
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DKACHE_FUZZ=ON -DKACHE_TESTS=OFF -DKACHE_WERROR=OFF >/dev/null
fi
cmake --build "$build" -j "${KACHE_JOBS:-$(nproc)}" --target "${targets[@]}"

export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$build/logs"
failed=()
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  mkdir -p "$work" "fuzz/regressions/$t"
  log="$build/logs/$t.log"
  echo "fuzz: $t for ${seconds}s"
  if "$build"/fuzz/"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="fuzz/regressions/$t/" "$work" "fuzz/corpus/$t" "fuzz/regressions/$t" >"$log" 2>&1; then
    # The last status line carries the coverage figures ("#123 DONE cov: 456 ft: 789 corp: ...").
    echo "fuzz: $t ok: $(grep -E '^#[0-9]+' "$log" | tail -1) $(grep -E 'stat::number_of_executed_units' "$log")"
  else
    echo "fuzz: $t FAILED; the input is in fuzz/regressions/$t/, the log in $log:" >&2
    tail -40 "$log" >&2
    failed+=("$t")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: failing targets: ${failed[*]}" >&2
  exit 1
fi
