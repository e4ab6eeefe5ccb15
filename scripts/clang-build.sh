#!/usr/bin/env bash
# Builds the kache binary and the unit tests with clang and -Werror in build-clang/, then runs the unit
# tests: the code must stay warning-free under a second compiler, not only GCC 12. clang++-19 when it is
# installed, else clang++-14 (scripts/setup.sh installs clang-14 for the fuzzers); KACHE_CLANG_CXX picks
# another. Kept cheap for CI: no integration tests (the GCC build runs those).
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
[[ -n "$cxx" ]] || { echo "clang-build: no clang++ found (install clang-14)" >&2; exit 1; }
echo "clang-build: $("$cxx" --version | head -1)"

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$cxx" \
  -DKACHE_WERROR=ON -DKACHE_TESTS=ON "${launcher[@]}" >/dev/null
cmake --build build-clang -j "${KACHE_JOBS:-$(nproc)}" --target kache kache_unit_tests
ctest --test-dir build-clang -L '^unit$' -j "${KACHE_JOBS:-$(nproc)}" --output-on-failure
