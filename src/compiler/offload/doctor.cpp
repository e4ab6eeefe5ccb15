#include "compiler/offload/doctor.hpp"

#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "compiler/offload/adapter.hpp"
#include "compiler/offload/toolchain.hpp"
#include "util/fs.hpp"
#include "util/process_bounded.hpp"
#include "util/text.hpp"

namespace kache::compiler::offload {

namespace {

using core::DoctorRows;
using Status = core::DoctorStatus;

// hipcc and the clang it runs, from the probe's facts.
void hipcc_and_clang_rows(DoctorRows& rows, const std::string& hipcc, const HipccFacts& f) {
  rows.add("rocm", "hipcc", Status::ok,
           fmt::format("HIP {} at {} (ROCm root {})", f.hip_version.empty() ? "version unknown" : f.hip_version,
                       hipcc, f.rocm_path.empty() ? "unknown" : f.rocm_path));
  rows.add("rocm", "clang", f.clang_version.empty() ? Status::warn : Status::ok,
           fmt::format("{} at {}", f.clang_version.empty() ? "version unknown" : f.clang_version, f.clang),
           f.clang_version.empty() ? "the clang hipcc runs did not state its version." : "",
           f.clang_version.empty() ? "check that it runs: " + f.clang + " --version" : "");
}

}  // namespace

HipccFacts read_hipcc_probe(const util::ProcessResult& r) {
  HipccFacts f;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    if (line.starts_with("hipcc-cmd: ")) f.clang_line = line.substr(11);
  }
  const auto words = util::split_quoted_words(f.clang_line);
  if (!words.empty()) f.clang = words[0];
  f.hip_version = clang_line_value(f.clang_line, "--hip-version");
  f.rocm_path = clang_line_value(f.clang_line, "--rocm-path");
  f.named_bitcode_dir = clang_line_value(f.clang_line, "--hip-device-lib-path");
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    if (f.clang_version.empty() && line.find("clang version ") != std::string::npos) f.clang_version = line;
    if (f.error.empty() && line.find("error: ") != std::string::npos) f.error = line;
    const auto job = job_words(line);
    for (std::size_t i = 1; i + 1 < job.size(); ++i) {
      if (job[i] == "-mlink-builtin-bitcode") f.bitcode.push_back(job[i + 1]);
    }
  }
  return f;
}

// The device bitcode library directory the probe's device compile links from.
void device_libs_row(DoctorRows& rows, const HipccFacts& f) {
  std::set<std::string> dirs;
  for (const auto& b : f.bitcode) dirs.insert(util::dirname(b));
  if (dirs.empty()) {
    rows.add("rocm", "device-libs", Status::warn, f.named_bitcode_dir.empty() ? "none" : f.named_bitcode_dir,
             fmt::format("a gfx90a compile through hipcc links no device bitcode library ({}), so HIP compiles "
                         "fail with 'cannot find ROCm device library'.",
                         f.error.empty() ? "clang's plan names none" : f.error),
             "install the device libraries (Debian: rocm-device-libs), or point DEVICE_LIB_PATH at them");
    return;
  }
  std::string value;
  for (const auto& d : dirs) value += (value.empty() ? "" : ", ") + d;
  rows.add("rocm", "device-libs", Status::ok,
           fmt::format("{} (a gfx90a compile links {} bitcode libraries from it)", value, f.bitcode.size()));
}

// CMake's HIP language (enable_language(HIP)) reads <rocm>/lib/cmake/hip-lang/hip-lang-config.cmake.
void cmake_hip_lang_row(DoctorRows& rows, const std::string& rocm) {
  const std::string expected = util::join_path(rocm, "lib/cmake/hip-lang/hip-lang-config.cmake");
  if (util::exists(expected)) {
    rows.add("rocm", "cmake-hip-lang", Status::ok, expected + " (CMake's HIP language finds it)");
    return;
  }
  // Debian installs it under the multiarch library directory: <rocm>/lib/<triple>/cmake/hip-lang.
  std::string elsewhere;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(util::join_path(rocm, "lib"), ec)) {
    const std::string candidate = util::join_path(e.path().string(), "cmake/hip-lang/hip-lang-config.cmake");
    if (util::exists(candidate)) elsewhere = candidate;
  }
  rows.add("rocm", "cmake-hip-lang", Status::warn,
           fmt::format("no {}{}", util::dirname(expected),
                       elsewhere.empty() ? "" : fmt::format(" (this ROCm has {})", util::dirname(elsewhere))),
           fmt::format("CMake's HIP language (enable_language(HIP)) will not configure with this ROCm: CMake looks "
                       "for {}. Build HIP with hipcc from Make, Meson custom_targets or CMake custom commands "
                       "(kache hipcc caches those).",
                       expected),
           "CMake's HIP language needs a ROCm in AMD's layout (<rocm>/lib/cmake/hip-lang and the ROCm clang, as "
           "AMD's /opt/rocm packages install it); a root of links to Debian's directories passes the lookup but "
           "fails CMake's compiler check");
}

// hipcc's version and path, the clang it runs, the device libraries and CMake's HIP-language layout.
// Absent hipcc is one row and no error: HIP is optional. Every probe is bounded by timeout_ms.
void doctor_rows(DoctorRows& rows, const std::string& hipcc_arg, const util::Environment& env,
                 const std::string& scratch, int timeout_ms) {
  auto hipcc = util::find_executable(hipcc_arg, util::env_get(env, "PATH").value_or(""), util::self_executable());
  if (!hipcc) {
    rows.add("rocm", "hipcc", Status::ok, "not found",
             fmt::format("there is no executable '{}'{}, so kache hipcc does not apply (C, C++ and CUDA "
                         "compiles are unaffected).",
                         hipcc_arg, hipcc_arg.find('/') == std::string::npos ? " on PATH" : ""));
    return;
  }
  *hipcc = util::absolute_path(*hipcc, util::current_dir());
  const std::string source = util::join_path(scratch, "probe.hip");
  util::write_file(source, "");
  util::Environment probe_env = env;
  util::env_set(probe_env, "HIPCC_VERBOSE", "1");  // hipcc prints its clang line ("hipcc-cmd: ")
  const std::vector<std::string> argv = {*hipcc, "--genco", "--offload-arch=gfx90a", "-###", source,
                                         "-o", util::join_path(scratch, "probe.hsaco")};
  const auto r = util::run_capture_bounded(*hipcc, argv, probe_env, timeout_ms);
  const HipccFacts f = read_hipcc_probe(r);
  if (r.timed_out || f.clang_line.empty()) {
    const std::string output = r.err + r.out;
    rows.add("rocm", "hipcc", Status::warn, *hipcc,
             r.timed_out ? fmt::format("hipcc did not answer within {} s, so what it runs is unknown.",
                                       timeout_ms / 1000.0)
                         : fmt::format("hipcc did not say which compiler it runs ({}).",
                                       f.error.empty() ? output.substr(0, output.find('\n')) : f.error),
             fmt::format("run HIPCC_VERBOSE=1 {} --genco --offload-arch=gfx90a -### x.hip by hand to see why", *hipcc));
    return;
  }
  hipcc_and_clang_rows(rows, *hipcc, f);
  device_libs_row(rows, f);
  if (!f.rocm_path.empty()) cmake_hip_lang_row(rows, f.rocm_path);
}

void quiet_unasked_hipcc_rows(core::DoctorRows& rows, bool asked, bool cuda_machine) {
  if (asked || !cuda_machine) return;
  for (auto& row : rows.rows) {
    if (row.status != Status::warn) continue;
    row.status = Status::ok;
    row.message = fmt::format("{} (matters to HIP builds only: kache doctor --hipcc hipcc gives the fix.)", row.message);
    row.fix.clear();
  }
}

// A hipcc that doctor was not asked about (no --hipcc) but found on PATH of a CUDA machine (nvcc there)
// is reported without warnings: a ROCm someone installed is no problem of that machine's builds. Its
// rows keep their facts and messages; `kache doctor --hipcc hipcc` gives them their warnings and advice
// back. Without nvcc, ROCm is the machine's toolkit: its warnings stay.
void HipccAdapter::doctor_rows(DoctorRows& rows, DoctorSection section, const DoctorQuery& query) {
  if (section != DoctorSection::toolchain) return;
  const auto named = query.named_programs.find("hipcc");
  const bool asked = named != query.named_programs.end();
  DoctorRows found;
  try {
    util::TempDir scratch("/tmp", ".kache-doctor-");
    offload::doctor_rows(found, asked ? named->second : "hipcc", query.env, scratch.path(), query.probe_timeout_ms);
  } catch (const std::exception& e) {
    found.add("rocm", "probe", Status::warn, "", fmt::format("probing hipcc failed: {}.", e.what()),
              "run HIPCC_VERBOSE=1 hipcc --genco --offload-arch=gfx90a -### x.hip by hand to see why");
  }
  bool cuda_machine = query.named_programs.contains("nvcc");
  if (!cuda_machine) {
    try {
      cuda_machine = util::find_executable("nvcc", util::env_get(query.env, "PATH").value_or(""),
                                           util::self_executable())
                         .has_value();
    } catch (const std::exception&) {
    }
  }
  quiet_unasked_hipcc_rows(found, asked, cuda_machine);
  for (auto& row : found.rows) rows.rows.push_back(std::move(row));
}

}  // namespace kache::compiler::offload
