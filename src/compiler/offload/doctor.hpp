#pragma once
// hipcc's rows of `kache doctor`: hipcc and the clang it runs, the device bitcode libraries a gfx90a
// compile links, and whether CMake's HIP language finds this ROCm (its layout). Read from one
// `HIPCC_VERBOSE=1 hipcc --genco --offload-arch=gfx90a -###` (no compile), bounded in time.
#include <string>
#include <vector>

#include "core/doctor_rows.hpp"
#include "util/process.hpp"

namespace kache::compiler::offload {

// hipcc_arg: `hipcc` on PATH or a path (--hipcc); scratch: a private directory for the probe's files.
// An absent hipcc is one ok row: HIP is optional.
void doctor_rows(core::DoctorRows& rows, const std::string& hipcc_arg, const util::Environment& env,
                 const std::string& scratch, int timeout_ms);

// What the probe says (stdout: hipcc's clang line; stderr: clang's version and plan).
struct HipccFacts {
  std::string clang_line;  // after "hipcc-cmd: "
  std::string clang;
  std::string clang_version;  // "Debian clang version 15.0.6"
  std::string hip_version;
  std::string rocm_path;
  std::string named_bitcode_dir;     // --hip-device-lib-path= of the clang line
  std::vector<std::string> bitcode;  // -mlink-builtin-bitcode files of the gfx90a device job
  std::string error;                 // the first "error:" line of stderr
};
HipccFacts read_hipcc_probe(const util::ProcessResult& r);

// The rows doctor_rows builds from what it read, on their own (the unit tests give them made-up facts
// and a made-up ROCm root).
void device_libs_row(core::DoctorRows& rows, const HipccFacts& f);
void cmake_hip_lang_row(core::DoctorRows& rows, const std::string& rocm);
// hipcc's warnings when doctor was not asked about it (no --hipcc) on a CUDA machine (nvcc found): ok
// rows that keep their message and say it matters to HIP builds only. Asked, or no nvcc: unchanged.
void quiet_unasked_hipcc_rows(core::DoctorRows& rows, bool asked, bool cuda_machine);

}  // namespace kache::compiler::offload
