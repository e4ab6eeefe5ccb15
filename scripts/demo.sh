#!/usr/bin/env bash
# The demo: builds examples/mixed (C, C++ and CUDA, and a header generated into the build directory)
# with CMake + Ninja through kache (CMAKE_{C,CXX,CUDA}_COMPILER_LAUNCHER) twice from a fresh build
# directory, first with an empty cache (cold), then again (warm), and prints
# both build times and the statistics. Fails if the warm build missed the cache or never hit it.
# Uses a private cache (build/demo-cache) and config, so the user's cache and settings are untouched.
set -euo pipefail
export LC_ALL=C  # "1.23" from $EPOCHREALTIME, whatever the user's locale

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kache="$repo/build/kache"
if [[ ! -x "$kache" ]]; then
  echo "demo: $kache does not exist; run 'bash scripts/setup.sh' first." >&2
  exit 1
fi

# Settings from the caller's environment (KACHE_DISABLE=1, a tiny KACHE_MAX_SIZE...) would change
# the outcome; only logging is kept.
while read -r name; do
  case "$name" in KACHE_LOG | KACHE_LOG_FILE) ;; *) unset "$name" ;; esac
done < <(compgen -e | grep '^KACHE_' || true)
export KACHE_DIR="$repo/build/demo-cache"
export KACHE_CONFIG="$repo/build/demo-config.toml"
build_dir="$repo/build/demo-mixed"
jobs=()
if [[ -n "${KACHE_JOBS:-}" ]]; then jobs=(-j "$KACHE_JOBS"); fi

stat() {  # stat NAME: one integer from kache --show-stats --json
  "$kache" --show-stats --json | python3 -c "import json, sys; print(json.load(sys.stdin)['$1'])"
}

build() {  # build LABEL: configure a fresh build dir (untimed), then time the ninja build
  rm -rf "$build_dir"
  cmake -S "$repo/examples/mixed" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER="$kache" -DCMAKE_CXX_COMPILER_LAUNCHER="$kache" \
    -DCMAKE_CUDA_COMPILER_LAUNCHER="$kache" >/dev/null
  local start=$EPOCHREALTIME
  ninja -C "$build_dir" "${jobs[@]}"
  local end=$EPOCHREALTIME
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  echo "demo: $1 build took ${elapsed} s"
}

"$kache" --zero-stats --clear

echo "=== cold build (empty cache) ==="
build cold
cold_time=$elapsed

echo "=== warm build (fresh build directory, same cache) ==="
misses_before=$(stat misses)
hits_before=$(stat hits)
build warm
warm_time=$elapsed
warm_misses=$(($(stat misses) - misses_before))
warm_hits=$(($(stat hits) - hits_before))

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "=== running the program built from the cache ==="
  "$build_dir/mixed_app"
fi

echo
"$kache" --show-stats
echo
echo "cold build: ${cold_time} s"
echo "warm build: ${warm_time} s  (${warm_hits} hits, ${warm_misses} misses)"

if ((warm_misses > 0)); then
  echo "demo: FAILED: the warm build missed the cache ${warm_misses} times." >&2
  exit 1
fi
if ((warm_hits == 0)); then
  echo "demo: FAILED: the warm build never hit the cache (were the compiles passed through?)." >&2
  exit 1
fi
echo "demo: OK"
