#!/usr/bin/env bash
# README command 1: installs what building kache and running its demo need (Debian/Ubuntu, apt, without
# recommends), and builds kache into build/ (Release). Nothing it installs ships or starts a service;
# the servers and tools of the test suite are installed by scripts/setup-tests.sh (README command 2).
#   bash scripts/setup.sh                   install what is missing, then build
#   bash scripts/setup.sh --deps-only       stop after the packages
#   bash scripts/setup.sh --print-packages  print the package list, one a line (tests/integration/test_setup.py)
# Idempotent: apt is skipped when every package is already installed. No CUDA toolkit is installed here:
# scripts/demo.sh finds one off PATH too, and without one demonstrates C and C++ only.
# Left out on purpose, and built when present: remote execution's kache-reapi (gRPC and protobuf, about
# 150 MB more) and the manual page (help2man, which brings perl).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/apt-packages.sh"

# On a new Debian 12 development machine (a compiler, CMake and GoogleTest there) about 160 MB, Boost's
# headers (for Boost.Beast) 135 MB of it; on a bare minimal Debian 12 also the compilers and CMake, about
# 485 MB. tests/integration/test_setup.py measures both with apt's resolver.
packages=(
  gcc g++ libc6-dev cmake ninja-build pkg-config
  libtomlplusplus-dev libcli11-dev libfmt-dev libspdlog-dev libzstd-dev libxxhash-dev libssl-dev libc-ares-dev
  nlohmann-json3-dev libhiredis-dev libboost-dev
  file  # cpack -G DEB (README's Debian package): CPackDeb's debug-info package needs file(1)
)

case "${1:-}" in
  --print-packages)
    printf '%s\n' "${packages[@]}"
    exit 0
    ;;
  "" | --deps-only) ;;
  *)
    echo "setup: unknown option $1 (--deps-only, --print-packages)" >&2
    exit 2
    ;;
esac

install_missing setup --no-install-recommends "${packages[@]}"

if [[ "${1:-}" == "--deps-only" ]]; then
  exit 0
fi

# The Release binary (the demo and the benchmark use it; scripts/test.sh builds its own Debug one).
# Warnings do not fail this build: GCC's -O3 flow warnings vary by version; scripts/test.sh keeps -Werror.
cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKACHE_TESTS=OFF -DKACHE_WERROR=OFF
# The default target: kache, and kache-reapi and the manual page where their tools are installed.
cmake --build "$repo/build" -j "${KACHE_JOBS:-$(nproc)}"
echo "setup: built $repo/build/kache"
