#!/usr/bin/env bash
# One clang build in build-clang/ serves three checks of CI: the code stays warning-free under a second
# compiler (-Werror), the unit tests and the integration tests labelled "asan" run under AddressSanitizer
# + UBSan, and the libFuzzer targets are built from the same objects (coverage instrumentation is on
# everywhere; scripts/fuzz.sh then runs them from here with KACHE_FUZZ_BUILD=build-clang). One build
# instead of three keeps CI short on two cores. The newest clang here by default, clang++-19 (its
# sanitizer and libFuzzer runtimes are libclang-rt-19-dev), so CI sees the warnings a newer compiler
# adds (clang 19 reports libstdc++ 12's std::get_temporary_buffer as deprecated; clang 14 does not);
# KACHE_CLANG_CXX picks another.
#   bash scripts/clang-build.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

cxx="${KACHE_CLANG_CXX:-}"
if [[ -z "$cxx" ]]; then
  for c in clang++-19 clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
  done
fi
[[ -n "$cxx" ]] || { echo "clang-build: no clang++ found (install clang-19 and libclang-rt-19-dev)" >&2; exit 1; }
echo "clang-build: $("$cxx" --version | head -1)"

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" \
  -DKACHE_WERROR=ON -DKACHE_TESTS=ON -DKACHE_SANITIZE=ON -DKACHE_FUZZ=ON "${launcher[@]}" >/dev/null
cmake --build build-clang -j "${KACHE_JOBS:-$(nproc)}"
# A stack trace makes a UBSan report from a CI log actionable.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
# unit and asan (integration under the sanitizers), fuzz (each target replays its corpus and kept crashes).
ctest --test-dir build-clang -L '^(unit|asan|fuzz)$' -j 2 --output-on-failure
