"""Generate a synthetic but realistic CUDA project for the kache benchmark.

Layout written under ROOT:
  include/common.cuh   shared by every TU
  include/math.cuh     shared by half of the TUs (tiny and thrust alike)
  src/tiny_NNN.cu      small kernels (a kernel + a host launcher)
  src/thrust_NNN.cu    host code using thrust and cub algorithms on device data

Every other TU of each kind is compiled for two architectures (sm_75 + sm_90), the others for one
(sm_75). The build graph is written separately per tool by run.py (write_ninja), so all tools build
the very same source files, each in its own build directory.

Usable on its own:  python3 bench/genproject.py DIR [--tiny N] [--thrust N]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

ONE_ARCH = "-gencode arch=compute_75,code=sm_75"
TWO_ARCH = "-gencode arch=compute_75,code=sm_75 -gencode arch=compute_90,code=sm_90"
# Flags of a typical CMake/Ninja CUDA build (minus the per-TU architecture list).
CFLAGS = "-std=c++17 -O2"

COMMON_CUH = r"""#pragma once
// Shared project header: included by every translation unit.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#define KB_CHECK(call)                                                              \
  do {                                                                              \
    cudaError_t kb_err_ = (call);                                                   \
    if (kb_err_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                       \
                   cudaGetErrorString(kb_err_));                                    \
      return static_cast<int>(kb_err_);                                             \
    }                                                                               \
  } while (0)

namespace kb {

constexpr int kBlock = 256;

inline unsigned grid_for(std::size_t n, int block = kBlock) {
  return static_cast<unsigned>((n + block - 1) / block);
}

struct Span {
  float* data;
  std::size_t size;
};

__host__ __device__ inline std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__device__ inline std::size_t global_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

}  // namespace kb
"""

MATH_CUH_TEMPLATE = r"""#pragma once
// Shared math helpers: included by half of the translation units.
#include "common.cuh"

namespace kb {

constexpr float kMathScale = {scale};

__host__ __device__ inline float clampf(float v, float lo, float hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

__host__ __device__ inline float scaled_fma(float a, float x, float y) {
  return a * x * kMathScale + y;
}

__host__ __device__ inline float smoothstep(float e0, float e1, float x) {
  float t = clampf((x - e0) / (e1 - e0), 0.0f, 1.0f);
  return t * t * (3.0f - 2.0f * t);
}

}  // namespace kb
"""

MATH_SCALE_ORIGINAL = "1.0f"
MATH_SCALE_EDITED = "1.25f"  # the "edit a shared header" scenario changes code, not just a comment


def math_cuh(scale: str = MATH_SCALE_ORIGINAL) -> str:
    return MATH_CUH_TEMPLATE.replace("{scale}", scale)


# The runtime API spellings the generated sources use, per GPU runtime: the HIP project (hipproject.py)
# writes the same headers and tiny kernels as this one with HIP's names (kernels, <<<>>> launches,
# __shared__, atomicAdd and __syncthreads are spelled alike in both).
RUNTIME_SPELLINGS = {
    "cuda": [],
    "hip": [("<cuda_runtime.h>", "<hip/hip_runtime.h>"), ("cudaError_t", "hipError_t"),
            ("cudaSuccess", "hipSuccess"), ("cudaGetErrorString", "hipGetErrorString"),
            ("cudaGetLastError", "hipGetLastError")],
}


def for_runtime(text: str, runtime: str) -> str:
    for cuda, other in RUNTIME_SPELLINGS[runtime]:
        text = text.replace(cuda, other)
    return text


def write_headers(root: str, runtime: str = "cuda") -> None:
    """include/common.cuh (every TU) and include/math.cuh (half of them) in the runtime's spelling."""
    os.makedirs(os.path.join(root, "include"), exist_ok=True)
    with open(os.path.join(root, "include", "common.cuh"), "w") as f:
        f.write(for_runtime(COMMON_CUH, runtime))
    with open(os.path.join(root, "include", "math.cuh"), "w") as f:
        f.write(math_cuh())


# Tiny kernel bodies. {i} is the TU index; {f} is the math function used (from math.cuh or local).
TINY_BODIES = [
    # saxpy
    """__global__ void k_{i}(float a, const float* x, float* y, std::size_t n) {{
  std::size_t idx = kb::global_index();
  if (idx < n) y[idx] = {fma}(a, x[idx], y[idx]);
}}""",
    # relu + clamp
    """__global__ void k_{i}(float* v, std::size_t n) {{
  std::size_t idx = kb::global_index();
  if (idx < n) v[idx] = {clamp}(v[idx] > 0.0f ? v[idx] : 0.0f, 0.0f, {i}.0f + 1.0f);
}}""",
    # 1-D stencil
    """__global__ void k_{i}(const float* in, float* out, std::size_t n) {{
  std::size_t idx = kb::global_index();
  if (idx > 0 && idx + 1 < n) out[idx] = 0.25f * in[idx - 1] + 0.5f * in[idx] + 0.25f * in[idx + 1];
}}""",
    # block reduction in shared memory
    """__global__ void k_{i}(const float* in, float* out, std::size_t n) {{
  __shared__ float s[kb::kBlock];
  std::size_t idx = kb::global_index();
  s[threadIdx.x] = idx < n ? in[idx] : 0.0f;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {{
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }}
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}}""",
    # hash fill
    """__global__ void k_{i}(std::uint32_t* v, std::size_t n, std::uint32_t seed) {{
  std::size_t idx = kb::global_index();
  if (idx < n) v[idx] = kb::hash32(static_cast<std::uint32_t>(idx) ^ (seed + {i}u));
}}""",
    # histogram with atomics
    """__global__ void k_{i}(const std::uint32_t* v, unsigned* bins, std::size_t n) {{
  std::size_t idx = kb::global_index();
  if (idx < n) atomicAdd(&bins[v[idx] % {nbins}u], 1u);
}}""",
    # matrix transpose tile
    """__global__ void k_{i}(const float* in, float* out, int w, int h) {{
  __shared__ float tile[16][17];
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[y * w + x];
  __syncthreads();
  x = blockIdx.y * 16 + threadIdx.x; y = blockIdx.x * 16 + threadIdx.y;
  if (x < h && y < w) out[y * h + x] = tile[threadIdx.x][threadIdx.y];
}}""",
    # smoothstep / polynomial
    """__global__ void k_{i}(float* v, std::size_t n) {{
  std::size_t idx = kb::global_index();
  if (idx < n) v[idx] = {smooth}(0.0f, {i}.0f + 1.0f, v[idx]) * {fma}(2.0f, v[idx], 1.0f);
}}""",
]

TINY_LAUNCH = {
    0: ("float a, const float* x, float* y, std::size_t n", "a, x, y, n", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
    1: ("float* v, std::size_t n", "v, n", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
    2: ("const float* in, float* out, std::size_t n", "in, out, n", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
    3: ("const float* in, float* out, std::size_t n", "in, out, n", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
    4: ("std::uint32_t* v, std::size_t n, std::uint32_t seed", "v, n, seed", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
    5: ("const std::uint32_t* v, unsigned* bins, std::size_t n", "v, bins, n", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
    6: ("const float* in, float* out, int w, int h", "in, out, w, h", "dim3((w + 15) / 16, (h + 15) / 16), dim3(16, 16)"),
    7: ("float* v, std::size_t n", "v, n", "dim3(kb::grid_for(n)), dim3(kb::kBlock)"),
}

LOCAL_MATH = r"""
namespace local {
__host__ __device__ inline float local_fma(float a, float x, float y) { return a * x + y; }
__host__ __device__ inline float local_clamp(float v, float lo, float hi) { return fminf(fmaxf(v, lo), hi); }
__host__ __device__ inline float local_smooth(float e0, float e1, float x) {
  float t = local_clamp((x - e0) / (e1 - e0), 0.0f, 1.0f);
  return t * t * (3.0f - 2.0f * t);
}
}  // namespace local
"""


def tiny_source(i: int, with_math: bool, runtime: str = "cuda") -> str:
    variant = i % len(TINY_BODIES)
    if with_math:
        head = '#include "common.cuh"\n#include "math.cuh"\n'
        names = {"fma": "kb::scaled_fma", "clamp": "kb::clampf", "smooth": "kb::smoothstep"}
    else:
        head = '#include "common.cuh"\n' + LOCAL_MATH
        names = {"fma": "local::local_fma", "clamp": "local::local_clamp", "smooth": "local::local_smooth"}
    body = TINY_BODIES[variant].format(i=i, nbins=16 + i, **names)
    params, args, launch = TINY_LAUNCH[variant]
    return for_runtime(
        f"// Generated tiny kernel TU #{i} (variant {variant}).\n{head}\n{body}\n\n"
        f"int launch_tiny_{i}({params}) {{\n"
        f"  k_{i}<<<{launch}>>>({args});\n"
        f"  KB_CHECK(cudaGetLastError());\n"
        f"  return 0;\n}}\n", runtime)


# thrust + cub TUs: every file uses both libraries (like the "thrust + cub file" in nvcc-facts.md).
THRUST_BODIES = [
    # thrust::sort + thrust::reduce ; cub::DeviceReduce::Sum
    (
        ["thrust/device_vector.h", "thrust/sort.h", "thrust/reduce.h", "thrust/sequence.h", "cub/device/device_reduce.cuh"],
        """  thrust::device_vector<int> v(n);
  thrust::sequence(v.begin(), v.end(), {i});
  thrust::sort(v.begin(), v.end(), thrust::greater<int>());
  long long total = thrust::reduce(v.begin(), v.end(), 0LL);
  thrust::device_vector<float> f(n, {scale});
  thrust::device_vector<float> out(1);
  std::size_t temp_bytes = 0;
  cub::DeviceReduce::Sum(nullptr, temp_bytes, thrust::raw_pointer_cast(f.data()),
                         thrust::raw_pointer_cast(out.data()), static_cast<int>(n));
  thrust::device_vector<unsigned char> temp(temp_bytes);
  cub::DeviceReduce::Sum(thrust::raw_pointer_cast(temp.data()), temp_bytes, thrust::raw_pointer_cast(f.data()),
                         thrust::raw_pointer_cast(out.data()), static_cast<int>(n));
  return static_cast<int>(total % 1000) + static_cast<int>(out[0]);""",
    ),
    # thrust::transform + inclusive_scan ; cub::DeviceRadixSort::SortKeys
    (
        ["thrust/device_vector.h", "thrust/transform.h", "thrust/scan.h", "thrust/functional.h", "cub/device/device_radix_sort.cuh"],
        """  thrust::device_vector<float> a(n, 1.5f), b(n, {scale});
  thrust::transform(a.begin(), a.end(), b.begin(), b.begin(), Axpy{{2.0f}});
  thrust::inclusive_scan(b.begin(), b.end(), b.begin());
  thrust::device_vector<unsigned> keys_in(n, {i}u), keys_out(n);
  std::size_t temp_bytes = 0;
  cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, thrust::raw_pointer_cast(keys_in.data()),
                                 thrust::raw_pointer_cast(keys_out.data()), static_cast<int>(n));
  thrust::device_vector<unsigned char> temp(temp_bytes);
  cub::DeviceRadixSort::SortKeys(thrust::raw_pointer_cast(temp.data()), temp_bytes,
                                 thrust::raw_pointer_cast(keys_in.data()),
                                 thrust::raw_pointer_cast(keys_out.data()), static_cast<int>(n));
  return static_cast<int>(b[n - 1]) + static_cast<int>(keys_out[0]);""",
    ),
    # thrust::sort_by_key + reduce_by_key ; cub::DeviceScan::ExclusiveSum
    (
        ["thrust/device_vector.h", "thrust/sort.h", "thrust/reduce.h", "thrust/sequence.h", "cub/device/device_scan.cuh"],
        """  thrust::device_vector<int> keys(n), vals(n, 1), okeys(n), ovals(n);
  thrust::sequence(keys.begin(), keys.end(), {i});
  thrust::sort_by_key(keys.begin(), keys.end(), vals.begin());
  auto ends = thrust::reduce_by_key(keys.begin(), keys.end(), vals.begin(), okeys.begin(), ovals.begin());
  thrust::device_vector<int> scanned(n);
  std::size_t temp_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, thrust::raw_pointer_cast(vals.data()),
                                thrust::raw_pointer_cast(scanned.data()), static_cast<int>(n));
  thrust::device_vector<unsigned char> temp(temp_bytes);
  cub::DeviceScan::ExclusiveSum(thrust::raw_pointer_cast(temp.data()), temp_bytes,
                                thrust::raw_pointer_cast(vals.data()),
                                thrust::raw_pointer_cast(scanned.data()), static_cast<int>(n));
  return static_cast<int>(ends.first - okeys.begin()) + scanned[n - 1];""",
    ),
    # thrust::count_if + unique ; cub::DeviceSelect::Flagged
    (
        ["thrust/device_vector.h", "thrust/count.h", "thrust/unique.h", "thrust/sort.h", "cub/device/device_select.cuh"],
        """  thrust::device_vector<float> v(n, {scale});
  long long positive = thrust::count_if(v.begin(), v.end(), Positive{{}});
  thrust::device_vector<int> w(n, {i});
  thrust::sort(w.begin(), w.end());
  auto last = thrust::unique(w.begin(), w.end());
  thrust::device_vector<char> flags(n, 1);
  thrust::device_vector<float> selected(n);
  thrust::device_vector<int> num_selected(1);
  std::size_t temp_bytes = 0;
  cub::DeviceSelect::Flagged(nullptr, temp_bytes, thrust::raw_pointer_cast(v.data()),
                             thrust::raw_pointer_cast(flags.data()), thrust::raw_pointer_cast(selected.data()),
                             thrust::raw_pointer_cast(num_selected.data()), static_cast<int>(n));
  thrust::device_vector<unsigned char> temp(temp_bytes);
  cub::DeviceSelect::Flagged(thrust::raw_pointer_cast(temp.data()), temp_bytes, thrust::raw_pointer_cast(v.data()),
                             thrust::raw_pointer_cast(flags.data()), thrust::raw_pointer_cast(selected.data()),
                             thrust::raw_pointer_cast(num_selected.data()), static_cast<int>(n));
  return static_cast<int>(positive) + static_cast<int>(last - w.begin()) + num_selected[0];""",
    ),
    # thrust::transform_reduce ; cub::DeviceReduce::Max + ArgMin-free path
    (
        ["thrust/device_vector.h", "thrust/transform_reduce.h", "thrust/functional.h", "thrust/fill.h", "cub/device/device_reduce.cuh"],
        """  thrust::device_vector<float> v(n);
  thrust::fill(v.begin(), v.end(), {scale});
  float sq = thrust::transform_reduce(v.begin(), v.end(), Square{{}}, 0.0f, thrust::plus<float>());
  thrust::device_vector<float> out(1);
  std::size_t temp_bytes = 0;
  cub::DeviceReduce::Max(nullptr, temp_bytes, thrust::raw_pointer_cast(v.data()),
                         thrust::raw_pointer_cast(out.data()), static_cast<int>(n));
  thrust::device_vector<unsigned char> temp(temp_bytes);
  cub::DeviceReduce::Max(thrust::raw_pointer_cast(temp.data()), temp_bytes, thrust::raw_pointer_cast(v.data()),
                         thrust::raw_pointer_cast(out.data()), static_cast<int>(n));
  return static_cast<int>(sq) + static_cast<int>(out[0]) + {i};""",
    ),
]

THRUST_FUNCTORS = """
struct Axpy {{
  float a;
  __host__ __device__ float operator()(float x, float y) const {{ return {fma}; }}
}};
struct Positive {{
  __host__ __device__ bool operator()(float x) const {{ return x > 0.0f; }}
}};
struct Square {{
  __host__ __device__ float operator()(float x) const {{ return x * x; }}
}};
"""


def thrust_source(i: int, with_math: bool) -> str:
    headers, body = THRUST_BODIES[i % len(THRUST_BODIES)]
    includes = "".join(f"#include <{h}>\n" for h in headers)
    if with_math:
        project = '#include "common.cuh"\n#include "math.cuh"\n'
        scale = "kb::kMathScale"
        fma = "kb::scaled_fma(a, x, y)"
    else:
        project = '#include "common.cuh"\n'
        scale = "1.0f"
        fma = "a * x + y"
    functors = THRUST_FUNCTORS.format(fma=fma)
    return (
        f"// Generated thrust+cub TU #{i} (variant {i % len(THRUST_BODIES)}).\n{project}{includes}{functors}\n"
        f"int run_thrust_{i}(std::size_t n) {{\n"
        f"  if (n == 0) return 0;\n"
        + body.format(i=i, scale=scale)
        + "\n}\n"
    )


@dataclass
class TU:
    name: str  # e.g. tiny_000
    src: str  # relative to the project root, e.g. src/tiny_000.cu
    kind: str  # "tiny" or "thrust"
    arch: str  # gencode flags
    uses_math: bool

    @property
    def obj(self) -> str:
        return f"obj/{self.name}.o"


def generate(root: str, n_tiny: int, n_thrust: int) -> list[TU]:
    write_headers(root)
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    tus: list[TU] = []
    for i in range(n_tiny):
        name = f"tiny_{i:03d}"
        uses_math = i % 2 == 0
        with open(os.path.join(root, "src", name + ".cu"), "w") as f:
            f.write(tiny_source(i, uses_math))
        # i % 4 in (1, 2): half of the TUs get two architectures, crossing the math.cuh half.
        arch = TWO_ARCH if i % 4 in (1, 2) else ONE_ARCH
        tus.append(TU(name, f"src/{name}.cu", "tiny", arch, uses_math))
    for i in range(n_thrust):
        name = f"thrust_{i:03d}"
        uses_math = i % 2 == 0
        with open(os.path.join(root, "src", name + ".cu"), "w") as f:
            f.write(thrust_source(i, uses_math))
        arch = TWO_ARCH if i % 4 in (1, 2) else ONE_ARCH
        tus.append(TU(name, f"src/{name}.cu", "thrust", arch, uses_math))
    return tus


def write_ninja(build_dir: str, tus: list[TU], launcher: str, nvcc: str, cflags: str = CFLAGS) -> None:
    """One build directory per tool; sources are referenced as ../src/... (relative, like CMake).
    `nvcc` is the compiler's command (hipproject.py passes hipcc or `clang++-15 -x hip ...`), `tu.arch` its
    per-TU target flags."""
    os.makedirs(os.path.join(build_dir, "obj"), exist_ok=True)
    lines = [
        "# Generated by bench/genproject.py",
        "ninja_required_version = 1.5",
        f"launcher = {launcher}",
        f"nvcc = {nvcc}",
        f"cflags = {cflags} -I../include",
        "",
        "rule cu",
        "  command = $launcher $nvcc $cflags $arch -c $in -o $out -MD -MF $out.d -MT $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CU $out",
        "",
    ]
    for tu in tus:
        lines.append(f"build {tu.obj}: cu ../{tu.src}")
        lines.append(f"  arch = {tu.arch}")
    lines.append("")
    lines.append("build all: phony " + " ".join(tu.obj for tu in tus))
    lines.append("default all")
    with open(os.path.join(build_dir, "build.ninja"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--tiny", type=int, default=32)
    ap.add_argument("--thrust", type=int, default=10)
    args = ap.parse_args()
    tus = generate(args.root, args.tiny, args.thrust)
    write_ninja(os.path.join(args.root, "build"), tus, "", "nvcc")
    for tu in tus:
        print(tu.kind, tu.src, "two-arch" if tu.arch == TWO_ARCH else "one-arch", "math" if tu.uses_math else "")


if __name__ == "__main__":
    main()
