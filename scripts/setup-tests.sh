#!/usr/bin/env bash
# The test lab (scripts/test.sh runs it first, so README command 2 needs nothing else): what
# scripts/setup.sh installs, plus the servers, compilers and tools the test suite uses: Redis, nginx,
# OpenStack Swift (S3), PostgreSQL and BuildGrid (remote execution), chromium (the HTML report), clang 14
# and 19, hipcc, gRPC, ccache/sccache, help2man... Several of these packages start services (redis-server,
# nginx, postgresql, swift); the tests start their own private servers on loopback (tests/integration/servers.py).
# Idempotent: apt is skipped when every package is installed; the BuildGrid venv is made once.
# Needs nvcc (the CUDA toolkit) on PATH for the CUDA tests; it is not installed here.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/apt-packages.sh"

mapfile -t kache_packages < <(bash "$repo/scripts/setup.sh" --print-packages)
packages=(
  "${kache_packages[@]}"
  build-essential libgtest-dev libgmock-dev libbenchmark-dev
  ccache sccache redis-server nginx hyperfine strace gdb meson python3 python3-matplotlib python3-yaml binutils make
  help2man man-db file dpkg-dev  # the manual page (cmake/man.cmake), the install and package tests
  zsh  # tests/integration/test_house.py runs the generated zsh completion in a real interactive zsh
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

install_missing setup-tests "${packages[@]}"
install_missing setup-tests --no-install-recommends "${lean_packages[@]}"

if ! command -v nvcc >/dev/null 2>&1; then
  echo "setup-tests: warning: nvcc is not on PATH; the CUDA tests need it" >&2
fi

# BuildGrid, the REAPI server of the remote execution tests (tests/integration/test_remote_exec.py), is on
# PyPI only: a venv of Debian's python3, pinned. psycopg2 is its scheduler's PostgreSQL driver.
# A venv whose bgd does not start (an interrupted install, a Python upgraded under it) is made again: the
# tests skip (77) only when BuildGrid is absent, and fail when it is there and broken.
buildgrid_venv="${KACHE_BUILDGRID_VENV:-$HOME/.cache/kache-buildgrid}"
if ! "$buildgrid_venv/bin/bgd" --help >/dev/null 2>&1; then
  if [[ -e "$buildgrid_venv" && ! -f "$buildgrid_venv/pyvenv.cfg" ]]; then
    echo "setup-tests: $buildgrid_venv exists and is not a venv; remove it or set KACHE_BUILDGRID_VENV" >&2
    exit 1
  fi
  /usr/bin/python3 -m venv --clear "$buildgrid_venv"
  "$buildgrid_venv/bin/pip" install --quiet "buildgrid[database]==0.4.4"
  "$buildgrid_venv/bin/bgd" --help >/dev/null
fi
