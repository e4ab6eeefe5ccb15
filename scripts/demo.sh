#!/usr/bin/env bash
# The demo: builds examples/mixed (C, C++ and CUDA, and a header generated into the build directory)
# with CMake + Ninja through kache (CMAKE_{C,CXX,CUDA}_COMPILER_LAUNCHER) twice from a fresh build
# directory, first with an empty cache (cold), then again (warm), and prints
# both build times and the statistics. Fails if the warm build missed the cache or never hit it.
# Uses a private cache (build/demo-cache) and config, so the user's cache and settings are untouched.
# nvcc is looked for on PATH, then where NVIDIA's installers put it (scripts/cuda-toolkit.sh); with no
# CUDA toolkit at all, the C and C++ half of the example is built, and one sentence says how to add CUDA.
# KACHE_DEMO_KACHE (default build/kache) and KACHE_DEMO_DIR (default build/) let the tests run the demo
# with their own kache in a private directory.
set -euo pipefail
export LC_ALL=C  # "1.23" from $EPOCHREALTIME, whatever the user's locale

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/cuda-toolkit.sh"
kache="${KACHE_DEMO_KACHE:-$repo/build/kache}"
work="${KACHE_DEMO_DIR:-$repo/build}"
if [[ ! -x "$kache" ]]; then
  echo "demo: $kache does not exist; run 'bash scripts/setup.sh' first." >&2
  exit 1
fi

# Settings from the caller's environment (KACHE_DISABLE=1, a tiny KACHE_MAX_SIZE...) would change
# the outcome; only logging and the toolkit search (scripts/cuda-toolkit.sh) are kept.
while read -r name; do
  case "$name" in KACHE_LOG | KACHE_LOG_FILE | KACHE_CUDA_SEARCH) ;; *) unset "$name" ;; esac
done < <(compgen -e | grep '^KACHE_' || true)
export KACHE_DIR="$work/demo-cache"
export KACHE_CONFIG="$work/demo-config.toml"
build_dir="$work/demo-mixed"
jobs=()
if [[ -n "${KACHE_JOBS:-}" ]]; then jobs=(-j "$KACHE_JOBS"); fi

stat() {  # stat NAME: one top-level integer of kache --show-stats --json (one "name": value per line)
  local value
  value=$("$kache" --show-stats --json | sed -n "s/^  \"$1\": \([0-9][0-9]*\),\{0,1\}\$/\1/p")
  if [[ -z "$value" ]]; then
    echo "demo: kache --show-stats --json has no $1" >&2
    exit 1
  fi
  echo "$value"
}

if nvcc=$(find_nvcc); then
  with_cuda=1
  languages="C, C++ and CUDA"
  cuda=(-DMIXED_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_COMPILER_LAUNCHER="$kache")
  echo "demo: CUDA toolkit: $nvcc"
else
  with_cuda=0
  languages="C and C++"
  cuda=(-DMIXED_CUDA=OFF)
  echo "demo: no CUDA toolkit found, so only the C and C++ half is built; to add CUDA, install NVIDIA's CUDA toolkit (https://developer.nvidia.com/cuda-downloads) or put the bin directory of one on PATH, then rerun bash scripts/demo.sh."
fi

build() {  # build LABEL: configure a fresh build dir (untimed), then time the ninja build
  rm -rf "$build_dir"
  cmake -S "$repo/examples/mixed" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER="$kache" -DCMAKE_CXX_COMPILER_LAUNCHER="$kache" "${cuda[@]}" >/dev/null
  local start=$EPOCHREALTIME
  ninja -C "$build_dir" "${jobs[@]}"
  local end=$EPOCHREALTIME
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  echo "demo: $1 build took ${elapsed} s"
}

"$kache" --zero-stats --clear

echo "=== cold build of $languages (empty cache) ==="
build cold
cold_time=$elapsed

echo "=== warm build (fresh build directory, same cache) ==="
misses_before=$(stat misses)
hits_before=$(stat hits)
build warm
warm_time=$elapsed
warm_misses=$(($(stat misses) - misses_before))
warm_hits=$(($(stat hits) - hits_before))

if ((with_cuda)) && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
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
