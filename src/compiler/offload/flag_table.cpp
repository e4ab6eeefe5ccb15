#include "compiler/offload/flag_table.hpp"

namespace kache::compiler::offload {

namespace {

using E = Effect;

std::vector<OffloadFlag> rows(bool with_genco) {
  std::vector<OffloadFlag> t = {
      // Targets: clang 15 takes "=T" only; the list is rebuilt as clang builds it (plan.cpp).
      {"--offload-arch", kEquals, E::Arch},
      {"--cuda-gpu-arch", kEquals, E::Arch},  // clang's older spelling of --offload-arch
      {"--no-offload-arch", kEquals, E::NoArch},
      {"--no-cuda-gpu-arch", kEquals, E::NoArch},
      // Which side is compiled: the output's kind follows (plan.cpp).
      {"--offload-device-only", 0, E::DeviceOnly},
      {"--cuda-device-only", 0, E::DeviceOnly},
      {"--offload-host-only", 0, E::HostOnly},
      {"--cuda-host-only", 0, E::HostOnly},
      // The gcc table refuses -S (output-kind); device-only, it is the device compile's assembly.
      {"-S", 0, E::Assemble},
      {"-fgpu-rdc", 0, E::Rdc},
      {"-fno-gpu-rdc", 0, E::NoRdc},
      // Where clang finds the HIP headers and the device bitcode: the adapter keys what is read there.
      {"--rocm-path", kEquals, E::RocmPath},
      {"--hip-path", kEquals, E::HipPath},
      {"--hip-device-lib-path", kEquals, E::DeviceLibPath},
      {"--rocm-device-lib-path", kEquals, E::DeviceLibPath},
      // The CUDA installation clang's CUDA mode reads (the probe keys what it finds there), and the
      // switches that leave out its headers or libdevice, or its version check: fewer inputs, keyed.
      {"--cuda-path", kEquals, E::Keyed},
      {"-nocudainc", 0, E::Keyed},
      {"-nocudalib", 0, E::Keyed},
      {"--no-cuda-version-check", 0, E::Keyed},
      // The HIP version clang defines (__HIP_VERSION_*__, hipcc passes it on Debian): code only.
      {"--hip-version", kEquals, E::Keyed},
      // Code generation and language switches of the device compile: they choose the code and which
      // bitcode libraries are linked (the whole bitcode directory is keyed), nothing is written or read.
      {"-fgpu-flush-denormals-to-zero", 0, E::Keyed},
      {"-fno-gpu-flush-denormals-to-zero", 0, E::Keyed},
      {"-fgpu-approx-transcendentals", 0, E::Keyed},
      {"-fno-gpu-approx-transcendentals", 0, E::Keyed},
      {"-fgpu-defer-diag", 0, E::Keyed},
      {"-fno-gpu-defer-diag", 0, E::Keyed},
      {"-fgpu-exclude-wrong-side-overloads", 0, E::Keyed},
      {"-fno-gpu-exclude-wrong-side-overloads", 0, E::Keyed},
      {"-fgpu-allow-device-init", 0, E::Keyed},
      {"-fno-gpu-allow-device-init", 0, E::Keyed},
      {"-fgpu-default-stream", kEquals, E::Keyed},
      {"-fhip-new-launch-api", 0, E::Keyed},
      {"-fno-hip-new-launch-api", 0, E::Keyed},
      {"-fhip-fp32-correctly-rounded-divide-sqrt", 0, E::Keyed},
      {"-fno-hip-fp32-correctly-rounded-divide-sqrt", 0, E::Keyed},
      {"--gpu-bundle-output", 0, E::Keyed},
      {"--no-gpu-bundle-output", 0, E::Keyed},
      {"--gpu-max-threads-per-block", kEquals, E::Keyed},
      // No HIP headers or bitcode libraries: fewer inputs, keyed as written.
      {"-nogpuinc", 0, E::Keyed},
      {"-nogpulib", 0, E::Keyed},
      {"-nohipwrapperinc", 0, E::Keyed},
      // Raw options, each kept for the few values that neither read nor write a file (plan.cpp); every
      // other value is refused as the gcc table refuses these options.
      {"-mllvm", kSeparate, E::Mllvm},
      {"-Xclang", kSeparate, E::Xclang},
      // The compilation unit ID (plan.cpp: without -cuid=, clang hashes the whole command line, the
      // output's path included, so a cache cannot give plain clang's bytes where the ID reaches them).
      {"-cuid", kEquals, E::Cuid},
      {"-fuse-cuid", kEquals, E::UseCuid},
  };
  if (with_genco) t.push_back({"--genco", 0, E::Genco});
  return t;
}

}  // namespace

const std::vector<OffloadFlag>& offload_rows(bool with_genco) {
  static const std::vector<OffloadFlag> clang_rows = rows(false), hipcc_rows = rows(true);
  return with_genco ? hipcc_rows : clang_rows;
}

}  // namespace kache::compiler::offload
