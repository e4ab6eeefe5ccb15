#!/usr/bin/env bash
# README command 2: installs the test lab (scripts/setup-tests.sh: the servers, compilers and tools the
# tests use; skipped when installed), builds the test configuration and runs the test suite with CTest.
#   bash scripts/test.sh                  Debug build in build-test/, warnings are errors
#   KACHE_SANITIZE=1 bash scripts/test.sh  AddressSanitizer + UBSan build in build-asan/
# Extra arguments go to ctest, e.g. `bash scripts/test.sh -L unit` or `-R integration.test_hit`.
#   KACHE_SKIP_SETUP=1 bash scripts/test.sh  leaves the lab as it is (no apt, no BuildGrid venv): on a
#                                            machine where the lab cannot be installed, tests whose server
#                                            or tool is missing skip and say which.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [[ "${KACHE_SKIP_SETUP:-0}" != 1 ]]; then
  bash scripts/setup-tests.sh
fi

if [[ "${KACHE_SANITIZE:-0}" == 1 ]]; then
  build=build-asan
  extra=(-DKACHE_SANITIZE=ON)
  # A stack trace makes a UBSan report from a CI log actionable.
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
else
  build=build-test
  extra=()
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKACHE_WERROR=ON -DKACHE_TESTS=ON "${extra[@]}"
cmake --build "$build" -j "${KACHE_JOBS:-$(nproc)}"
ctest --test-dir "$build" --output-on-failure -j2 "$@"
