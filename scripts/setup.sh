#!/usr/bin/env bash
# Installs the build and test dependencies (Debian/Ubuntu) and builds kache into build/ (Release).
# `--deps-only` stops after the packages. Idempotent: apt is skipped when every package is already installed.
# Needs nvcc (the CUDA toolkit) on PATH for the tests and the demo; it is not installed here.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake ninja-build pkg-config
  libtomlplusplus-dev libcli11-dev libfmt-dev libspdlog-dev libzstd-dev libxxhash-dev libssl-dev libc-ares-dev
  nlohmann-json3-dev libhiredis-dev libboost-dev libgtest-dev libgmock-dev libbenchmark-dev
  ccache sccache redis-server nginx hyperfine strace gdb meson python3 python3-matplotlib binutils make
  help2man man-db file dpkg-dev  # the manual page (cmake/man.cmake), the install and package tests
  xfsprogs e2fsprogs
  faketime dosfstools  # clock-fault and 2 s-timestamp tests (tests/stress)
  chromium  # tests/integration/test_report.py opens kache report --html headless: screenshot and DOM
  clang-14 libclang-rt-14-dev  # libFuzzer for scripts/fuzz.sh
  clang-19 libclang-rt-19-dev  # the second clang of tests/integration/test_gcc.py; CI's scripts/clang-build.sh
  # ROCm (HIP): clang 19 reads the HIP version file (/usr/share/hip/version) of an installation it finds;
  # a GPU developer's machine has one, and the C/C++ input audit (test_gcc_input_audit.py) checks clang
  # with it. Pulls clang-15/llvm-15, the HSA runtime and rocminfo: 28 packages, 103 MB, 656 MB installed.
  hipcc libamdhip64-dev rocm-device-libs
  # Remote execution (docs/remote-execution.md): gRPC and protobuf, linked statically (cmake/reapi.cmake);
  # the REAPI .proto files as Bazel vendors them (bazel-bootstrap-source's third_party/); the tests'
  # BuildGrid needs PostgreSQL for its scheduler and a venv for itself (below).
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc bazel-bootstrap-source
  postgresql python3-venv
)
# Installed without their recommends (a second apt call): OpenStack Swift with its s3api middleware, the
# real S3 server of the S3 remote's tests (tests/integration/servers.py: Swift; test_s3.py). With its
# recommends apt adds ~100 packages more (a desktop keyring, keystone, ...); without, 63 (measured on
# Debian 12, /work/shared/design/swift-s3-facts.md). Its python modules need Debian's /usr/bin/python3.
lean_packages=(swift swift-proxy swift-account swift-container swift-object python3-swift)

not_installed() {
  local pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      echo "$pkg"
    fi
  done
}
mapfile -t missing < <(not_installed "${packages[@]}")
mapfile -t missing_lean < <(not_installed "${lean_packages[@]}")

if ((${#missing[@]} + ${#missing_lean[@]} > 0)); then
  echo "setup: installing ${missing[*]} ${missing_lean[*]}"
  sudo=()
  if [[ "$(id -u)" != 0 ]]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update
  # env inside sudo: sudo drops the caller's environment.
  if ((${#missing[@]} > 0)); then
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
  fi
  if ((${#missing_lean[@]} > 0)); then
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing_lean[@]}"
  fi
else
  echo "setup: all $((${#packages[@]} + ${#lean_packages[@]})) packages are already installed"
fi

if ! command -v nvcc >/dev/null 2>&1; then
  echo "setup: warning: nvcc is not on PATH; kache builds, but the demo and integration tests need it" >&2
fi

# BuildGrid, the REAPI server of the remote execution tests (tests/integration/test_remote_exec.py), is on
# PyPI only: a venv of Debian's python3, pinned. psycopg2 is its scheduler's PostgreSQL driver.
# A venv whose bgd does not start (an interrupted install, a Python upgraded under it) is made again: the
# tests skip (77) only when BuildGrid is absent, and fail when it is there and broken.
buildgrid_venv="${KACHE_BUILDGRID_VENV:-$HOME/.cache/kache-buildgrid}"
if ! "$buildgrid_venv/bin/bgd" --help >/dev/null 2>&1; then
  if [[ -e "$buildgrid_venv" && ! -f "$buildgrid_venv/pyvenv.cfg" ]]; then
    echo "setup: $buildgrid_venv exists and is not a venv; remove it or set KACHE_BUILDGRID_VENV" >&2
    exit 1
  fi
  /usr/bin/python3 -m venv --clear "$buildgrid_venv"
  "$buildgrid_venv/bin/pip" install --quiet "buildgrid[database]==0.4.4"
  "$buildgrid_venv/bin/bgd" --help >/dev/null
fi

if [[ "${1:-}" == "--deps-only" ]]; then
  exit 0  # CI: the test script builds its own configurations
fi

# The Release binary (the demo and the benchmark use it; scripts/test.sh builds its own Debug one).
# Warnings do not fail this build: GCC's -O3 flow warnings vary by version; scripts/test.sh keeps -Werror.
cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKACHE_TESTS=OFF -DKACHE_WERROR=OFF
# The default target: kache and its manual page (what `cmake --install build` and `cpack` ship).
cmake --build "$repo/build" -j "${KACHE_JOBS:-$(nproc)}"
echo "setup: built $repo/build/kache"
