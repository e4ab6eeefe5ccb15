#pragma once
// The offload route's own options, as rows of the shared flag-table format (compiler/flag_table_format.hpp).
// They extend the gcc table (compiler/gcc/flag_table.cpp): the planner matches these rows first and
// hands every other argument to the gcc table, so an offload row wins over the gcc row that refuses
// the same spelling (--offload-arch, -fgpu-, -mllvm, -Xclang) and nothing else changes.
#include <span>
#include <string_view>
#include <vector>

#include "compiler/flag_table_format.hpp"

namespace kache::compiler::offload {

enum class Effect {
  Keyed,          // keyed verbatim (the whole command line is), no further meaning
  Arch,           // --offload-arch=T: one more offload target
  NoArch,         // --no-offload-arch=T: one target less ("all": none)
  DeviceOnly,     // --offload-device-only / --cuda-device-only
  HostOnly,       // --offload-host-only / --cuda-host-only
  Genco,          // hipcc --genco: device code only, bundled
  Assemble,       // -S: device assembly (AMDGPU text, PTX), cached only device-only for one target
  Rdc,            // -fgpu-rdc
  NoRdc,          // -fno-gpu-rdc
  RocmPath,       // --rocm-path=: the ROCm installation clang reads the HIP headers and bitcode from
  HipPath,        // --hip-path=
  DeviceLibPath,  // --hip-device-lib-path= / --rocm-device-lib-path=: the bitcode libraries' directory
  Mllvm,          // -mllvm V: an LLVM option, kept only for the AMDGPU backend's (-amdgpu-...)
  Xclang,         // -Xclang V: kept only for spec 003's -dependency-file / -MT pairs
  Cuid,           // -cuid=X: the compilation unit ID, which names externalized device symbols
  UseCuid,        // -fuse-cuid=hash|none|random: how clang makes one when -cuid= is not given
};

struct OffloadFlag {
  std::string_view name;
  unsigned forms;  // Form bits (flag_table_format.hpp); 0: exactly the name
  Effect effect;

  std::span<const std::string_view> spellings() const { return {&name, 1}; }
  unsigned match_forms() const { return forms; }
};

// The rows clang's HIP route adds; with_genco adds hipcc's --genco.
const std::vector<OffloadFlag>& offload_rows(bool with_genco);

}  // namespace kache::compiler::offload
