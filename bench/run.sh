#!/usr/bin/env bash
# Build kache (Release) if needed, then run the benchmark: bash bench/run.sh [--quick] [run.py options]
# bash bench/run.sh --hip [--quick] [hip.py options] runs the HIP benchmark (bench/hip.py) instead.
# KACHE_BENCH_BUILD selects the build directory (default build/); --kache PATH overrides the binary.
set -euo pipefail
script=run.py
if [ "${1:-}" = "--hip" ]; then
  script=hip.py
  shift
fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KACHE_BENCH_BUILD:-$repo/build}"
case " $* " in
  *" --kache "*|*" --kache="*) ;;
  *)
    if [ ! -f "$build/CMakeCache.txt" ]; then
      # KACHE_WERROR=OFF as in scripts/setup.sh: GCC 12 at -O3 emits a false -Wrestrict in src/compiler/nvcc/plan.cpp.
      cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKACHE_TESTS=OFF -DKACHE_WERROR=OFF
    fi
    type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
    if [ "$type" != "Release" ]; then
      echo "bench: $build is configured as '$type', not Release; set KACHE_BENCH_BUILD to a Release build dir" >&2
      exit 1
    fi
    ninja -C "$build" kache
    set -- --kache "$build/kache" "$@"
    ;;
esac
# Debian's python3 has matplotlib (python3-matplotlib); a pyenv python3 earlier on PATH may not.
exec /usr/bin/python3 "$repo/bench/$script" "$@"
