"""Generate the HIP project of the HIP benchmark (bench/hip.py), the HIP twin of genproject.py.

Layout written under ROOT:
  include/common.cuh, include/math.cuh   genproject.py's headers in HIP's spelling (<hip/hip_runtime.h>)
  src/tiny_NNN.hip    genproject.py's tiny kernels (a kernel + a host launcher), HIP spelling
  src/heavy_NNN.hip   rocPRIM-like block primitives: templated warp/block reduce, scan and a block-local
                      bitonic sort with unrolled items per thread, instantiated over several value types,
                      block sizes and items per thread (rocPRIM's headers are not installed here: Debian's
                      hipcc 5.2 comes without rocprim/hipcub)

Every TU is built for the same --offload-arch list (`targets`), so a whole build has one target count.
The build graph is genproject.write_ninja with hipcc or `clang++-15 -x hip` as the compiler.

Usable on its own:  python3 bench/hipproject.py DIR [--tiny N] [--heavy N] [--targets gfx90a,gfx906]
"""

from __future__ import annotations

import argparse
import os

import genproject

# The targets the benchmark cycles through: 1 target = the first, 4 targets = all of them.
ALL_TARGETS = ["gfx90a", "gfx906", "gfx908", "gfx1030"]  # Debian ROCm 5.2 has no gfx11 device library
# Flags of a typical HIP build (minus the per-TU --offload-arch list). hipcc adds its own (-std=c++11 first,
# so the user's -std wins; -isystem, --rocm-path, the bitcode dir, -mllvm -amdgpu-*).
CFLAGS = "-std=c++17 -O2"
# clang++-15 -x hip needs the ROCm layout spelled out on Debian (hipcc finds it through hipvars.pm).
ROCM_FLAGS = "--rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"

HEAVY_PRIMITIVES = r"""
namespace prim {

template <class T> struct Plus { __device__ T operator()(T a, T b) const { return a + b; } };
template <class T> struct Max { __device__ T operator()(T a, T b) const { return a < b ? b : a; } };

template <class T, unsigned Width, class Op>
__device__ inline T warp_reduce(T v, Op op) {
#pragma unroll
  for (unsigned off = Width / 2; off > 0; off /= 2) v = op(v, __shfl_down(v, off, Width));
  return v;
}

template <class T, unsigned Block, unsigned Items, class Op>
__device__ inline T block_reduce(const T (&items)[Items], T* smem, Op op) {
  T acc = items[0];
#pragma unroll
  for (unsigned i = 1; i < Items; ++i) acc = op(acc, items[i]);
  constexpr unsigned kWarp = 32;
  acc = warp_reduce<T, kWarp>(acc, op);
  if (threadIdx.x % kWarp == 0) smem[threadIdx.x / kWarp] = acc;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    acc = threadIdx.x < Block / kWarp ? smem[threadIdx.x] : smem[0];
    acc = warp_reduce<T, kWarp>(acc, op);
  }
  return acc;
}

template <class T, unsigned Block, unsigned Items, class Op>
__device__ inline void block_scan(T (&items)[Items], T* smem, Op op) {
#pragma unroll
  for (unsigned i = 1; i < Items; ++i) items[i] = op(items[i - 1], items[i]);
  smem[threadIdx.x] = items[Items - 1];
  __syncthreads();
#pragma unroll
  for (unsigned d = 1; d < Block; d *= 2) {
    T left = threadIdx.x >= d ? smem[threadIdx.x - d] : T{};
    __syncthreads();
    if (threadIdx.x >= d) smem[threadIdx.x] = op(left, smem[threadIdx.x]);
    __syncthreads();
  }
  T prefix = threadIdx.x > 0 ? smem[threadIdx.x - 1] : T{};
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) items[i] = threadIdx.x > 0 ? op(prefix, items[i]) : items[i];
}

template <class T, unsigned Block, unsigned Items>
__device__ inline void block_sort(T (&items)[Items], T* smem) {
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) smem[threadIdx.x * Items + i] = items[i];
  __syncthreads();
  constexpr unsigned kN = Block * Items;
#pragma unroll
  for (unsigned k = 2; k <= kN; k *= 2) {
#pragma unroll
    for (unsigned j = k / 2; j > 0; j /= 2) {
#pragma unroll
      for (unsigned i = 0; i < Items; ++i) {
        unsigned a = threadIdx.x * Items + i, b = a ^ j;
        if (b > a) {
          bool up = (a & k) == 0;
          T x = smem[a], y = smem[b];
          if ((x > y) == up) { smem[a] = y; smem[b] = x; }
        }
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) items[i] = smem[threadIdx.x * Items + i];
}

template <class T, unsigned Block, unsigned Items>
__global__ __launch_bounds__(Block) void reduce_scan_sort(const T* in, T* out, T* sums, std::size_t n) {
  __shared__ T smem[Block * Items];
  T items[Items];
  const std::size_t base = (static_cast<std::size_t>(blockIdx.x) * Block + threadIdx.x) * Items;
#pragma unroll
  for (unsigned i = 0; i < Items; ++i) items[i] = base + i < n ? in[base + i] : T{};
  T total = block_reduce<T, Block, Items>(items, smem, Plus<T>{});
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
  __syncthreads();
  T peak = block_reduce<T, Block, Items>(items, smem, Max<T>{});
  if (threadIdx.x == 0) sums[gridDim.x + blockIdx.x] = peak;
  __syncthreads();
  block_scan<T, Block, Items>(items, smem, Plus<T>{});
  __syncthreads();
  block_sort<T, Block, Items>(items, smem);
#pragma unroll
  for (unsigned i = 0; i < Items; ++i)
    if (base + i < n) out[base + i] = items[i];
}

template <class T, unsigned Block, unsigned Items>
int launch(const T* in, T* out, T* sums, std::size_t n) {
  unsigned grid = static_cast<unsigned>((n + Block * Items - 1) / (Block * Items));
  reduce_scan_sort<T, Block, Items><<<dim3(grid), dim3(Block)>>>(in, out, sums, n);
  KB_CHECK(hipGetLastError());
  return 0;
}

}  // namespace prim
"""

# Each heavy TU instantiates the primitives over its own (types x block sizes x items per thread).
HEAVY_VARIANTS = [
    (["int", "float"], [64, 256], [1, 2, 4]),
    (["unsigned", "double"], [128, 256], [2, 4]),
    (["float", "long long"], [64, 128], [1, 4]),
]


def heavy_source(i: int, with_math: bool) -> str:
    types, blocks, items = HEAVY_VARIANTS[i % len(HEAVY_VARIANTS)]
    head = '#include "common.cuh"\n' + ('#include "math.cuh"\n' if with_math else "")
    calls = []
    for t in types:
        for b in blocks:
            for k in items:
                calls.append(f"  rc |= prim::launch<{t}, {b}, {k}>(static_cast<const {t}*>(in), "
                             f"static_cast<{t}*>(out), static_cast<{t}*>(sums), n);")
    body = "\n".join(calls)
    return (f"// Generated heavy TU #{i} (variant {i % len(HEAVY_VARIANTS)}): rocPRIM-like block primitives.\n"
            f"{head}{HEAVY_PRIMITIVES}\n"
            f"int run_heavy_{i}(const void* in, void* out, void* sums, std::size_t n) {{\n"
            f"  int rc = 0;\n{body}\n  return rc;\n}}\n")


def arch_flags(targets: list[str]) -> str:
    return " ".join(f"--offload-arch={t}" for t in targets)


def generate(root: str, n_tiny: int, n_heavy: int, targets: list[str]) -> list[genproject.TU]:
    genproject.write_headers(root, runtime="hip")
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    arch = arch_flags(targets)
    tus = []
    for kind, count, source in (("tiny", n_tiny, lambda i, m: genproject.tiny_source(i, m, runtime="hip")),
                                ("heavy", n_heavy, heavy_source)):
        for i in range(count):
            name = f"{kind}_{i:03d}"
            uses_math = i % 2 == 0
            with open(os.path.join(root, "src", name + ".hip"), "w") as f:
                f.write(source(i, uses_math))
            tus.append(genproject.TU(name, f"src/{name}.hip", kind, arch, uses_math))
    return tus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--tiny", type=int, default=8)
    ap.add_argument("--heavy", type=int, default=2)
    ap.add_argument("--targets", default=ALL_TARGETS[0])
    args = ap.parse_args()
    tus = generate(args.root, args.tiny, args.heavy, args.targets.split(","))
    genproject.write_ninja(os.path.join(args.root, "build"), tus, "", "hipcc", CFLAGS)
    for tu in tus:
        print(tu.kind, tu.src, tu.arch)


if __name__ == "__main__":
    main()
