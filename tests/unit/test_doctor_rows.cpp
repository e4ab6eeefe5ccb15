// Each adapter's rows of `kache doctor` on their own (compiler/*/doctor.hpp), from made-up toolkits,
// probes and answers: the host-compiler bound and the glibc clash of an nvcc toolkit, the CUDA driver,
// hipcc's probe, device libraries and CMake layout, and gcc's and clang's version rows.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "compiler/gcc/doctor.hpp"
#include "compiler/nvcc/doctor.hpp"
#include "compiler/nvcc/toolchain.hpp"
#include "compiler/offload/doctor.hpp"
#include "compiler/offload/toolchain.hpp"
#include "util/fs.hpp"

namespace {

using kache::core::DoctorRows;
using kache::core::DoctorStatus;
namespace nvcc = kache::compiler::nvcc;
namespace offload = kache::compiler::offload;

// A toolkit include directory holding `relative` with `text`.
std::string toolkit_with(const kache::util::TempDir& dir, const std::string& relative, const std::string& text) {
  const std::string path = kache::util::join_path(dir.path(), relative);
  std::filesystem::create_directories(kache::util::dirname(path));
  kache::util::write_file(path, text);
  return dir.path();
}

constexpr const char* kGnuBound15 =
    "#if __GNUC__ > 15\n#error -- unsupported GNU version! gcc versions later than 15 are not supported!\n#endif\n";

TEST(NvccDoctorRows, HostCompilerPastTheToolkitsBoundFails) {
  kache::util::TempDir dir("/tmp");
  const std::string include = toolkit_with(dir, "crt/host_config.h", kGnuBound15);
  DoctorRows rows;
  nvcc::host_bound_row(rows, {include}, false, 16);
  nvcc::host_bound_row(rows, {include}, false, 15);
  nvcc::host_bound_row(rows, {"/nonexistent"}, false, 12);
  ASSERT_EQ(rows.rows.size(), 3u);
  EXPECT_EQ(rows.rows[0].status, DoctorStatus::fail);
  EXPECT_NE(rows.rows[0].fix.find("-ccbin naming a gcc 15 or older"), std::string::npos) << rows.rows[0].fix;
  EXPECT_EQ(rows.rows[1].status, DoctorStatus::ok);
  EXPECT_EQ(rows.rows[2].status, DoctorStatus::warn);
  EXPECT_EQ(rows.rows[0].name, "host-compiler-bound");
}

TEST(NvccDoctorRows, MathFunctionsWithoutNoexceptFailsFromGlibc241) {
  kache::util::TempDir dir("/tmp");
  const std::string include =
      toolkit_with(dir, "crt/math_functions.h", "extern __device_builtin__ double cospi(double x);\n");
  DoctorRows rows;
  nvcc::glibc_row(rows, {include}, {{"__GLIBC__", "2"}, {"__GLIBC_MINOR__", "41"}}, {12, 8});
  nvcc::glibc_row(rows, {include}, {{"__GLIBC__", "2"}, {"__GLIBC_MINOR__", "36"}}, {12, 8});
  nvcc::glibc_row(rows, {include}, {}, {12, 8});
  ASSERT_EQ(rows.rows.size(), 3u);
  EXPECT_EQ(rows.rows[0].status, DoctorStatus::fail);
  EXPECT_NE(rows.rows[0].message.find("CUDA 12.8"), std::string::npos) << rows.rows[0].message;
  EXPECT_EQ(rows.rows[1].status, DoctorStatus::ok);
  EXPECT_NE(rows.rows[1].value.find("harmless below glibc 2.41"), std::string::npos);
  EXPECT_EQ(rows.rows[2].value, "not glibc (no __GLIBC__ from features.h)");
}

TEST(NvccDoctorRows, DriverAgainstTheToolkitsRelease) {
  auto status_of = [](std::optional<int> answer, std::optional<std::pair<int, int>> release) {
    DoctorRows rows;
    nvcc::driver_rows(rows, release, answer, "the probe died with signal 11");
    return rows.rows.at(0).status;
  };
  EXPECT_EQ(status_of(std::nullopt, std::pair{13, 0}), DoctorStatus::warn);
  EXPECT_EQ(status_of(0, std::pair{13, 0}), DoctorStatus::ok);  // no driver: compiling needs none
  EXPECT_EQ(status_of(-1, std::pair{13, 0}), DoctorStatus::warn);
  EXPECT_EQ(status_of(12080, std::pair{13, 0}), DoctorStatus::fail);
  EXPECT_EQ(status_of(13000, std::pair{13, 1}), DoctorStatus::warn);  // PTX of 13.1 cannot be JIT-compiled
  EXPECT_EQ(status_of(13010, std::pair{13, 0}), DoctorStatus::ok);
  EXPECT_EQ(status_of(13010, std::nullopt), DoctorStatus::ok);
}

TEST(OffloadDoctorRows, ReadsHipccsProbe) {
  kache::util::ProcessResult r;
  r.exit_code = 0;
  r.out = "hipcc-cmd: /usr/bin/clang-15 --hip-version=5.2.21153 --rocm-path=/usr "
          "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode -x hip probe.hip\n";
  r.err = "Debian clang version 15.0.6\n"
          " \"/usr/lib/llvm-15/bin/clang\" \"-cc1\" \"-triple\" \"amdgcn-amd-amdhsa\" \"-mlink-builtin-bitcode\" "
          "\"/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ocml.bc\" \"-mlink-builtin-bitcode\" "
          "\"/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc\" \"-o\" \"x.o\"\n";
  const offload::HipccFacts f = offload::read_hipcc_probe(r);
  EXPECT_EQ(f.clang, "/usr/bin/clang-15");
  EXPECT_EQ(f.hip_version, "5.2.21153");
  EXPECT_EQ(f.rocm_path, "/usr");
  EXPECT_EQ(f.clang_version, "Debian clang version 15.0.6");
  EXPECT_EQ(f.bitcode.size(), 2u);
  DoctorRows rows;
  offload::device_libs_row(rows, f);
  offload::device_libs_row(rows, offload::HipccFacts{});
  EXPECT_EQ(rows.rows.at(0).status, DoctorStatus::ok);
  EXPECT_NE(rows.rows[0].value.find("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode (a gfx90a compile links 2"),
            std::string::npos)
      << rows.rows[0].value;
  EXPECT_EQ(rows.rows.at(1).status, DoctorStatus::warn);
}

TEST(OffloadDoctorRows, CmakeHipLangLayout) {
  kache::util::TempDir amd("/tmp"), debian("/tmp");
  toolkit_with(amd, "lib/cmake/hip-lang/hip-lang-config.cmake", "");
  toolkit_with(debian, "lib/x86_64-linux-gnu/cmake/hip-lang/hip-lang-config.cmake", "");
  DoctorRows rows;
  offload::cmake_hip_lang_row(rows, amd.path());
  offload::cmake_hip_lang_row(rows, debian.path());
  EXPECT_EQ(rows.rows.at(0).status, DoctorStatus::ok);
  EXPECT_EQ(rows.rows.at(1).status, DoctorStatus::warn);
  EXPECT_NE(rows.rows[1].value.find("x86_64-linux-gnu/cmake/hip-lang"), std::string::npos) << rows.rows[1].value;
}

TEST(GccDoctorRows, VersionRowFromTheDriversWords) {
  kache::util::ProcessResult ok;
  ok.exit_code = 0;
  ok.out = "gcc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n";
  kache::util::ProcessResult broken;
  broken.exit_code = 1;
  DoctorRows rows;
  kache::compiler::gcc::version_row(rows, "gcc", "/usr/bin/gcc", ok);
  kache::compiler::gcc::version_row(rows, "clang", "/usr/bin/clang", broken);
  EXPECT_EQ(rows.rows.at(0).status, DoctorStatus::ok);
  EXPECT_EQ(rows.rows[0].value, "gcc (Debian 12.2.0-14) 12.2.0 at /usr/bin/gcc");
  EXPECT_EQ(rows.rows.at(1).status, DoctorStatus::warn);
  EXPECT_EQ(rows.rows[1].name, "clang");
}

// Doctor and the probe read nvcc's include directories by one rule (nvcc::dry_run_include_dirs): the
// words of INCLUDES and of SYSTEM_INCLUDES, -I values and bare directories. Doctor once read only the
// -I words of INCLUDES, so a toolkit whose crt/ headers lie in a SYSTEM_INCLUDES directory was "unknown"
// to doctor while the key's toolchain listed it.
TEST(NvccDoctorRows, DoctorLooksInTheProbesIncludeDirectories) {
  kache::util::TempDir dir("/tmp", ".kache-test-");
  const std::string system = toolkit_with(dir, "crt/host_config.h", kGnuBound15);
  const nvcc::DryRun run = nvcc::read_dry_run("#$ _HERE_=/opt/cuda/bin\n"
                                              "#$ INCLUDES=\"-I/opt/cuda/include\"\n"
                                              "#$ SYSTEM_INCLUDES=\"-isystem\" " + system + " \"-I/opt/more\"\n");
  const std::vector<std::string> dirs = nvcc::dry_run_include_dirs(run);
  EXPECT_EQ(dirs, (std::vector<std::string>{"/opt/cuda/include", system, "/opt/more"}));
  DoctorRows rows;
  nvcc::host_bound_row(rows, dirs, false, 15);
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_EQ(rows.rows[0].status, DoctorStatus::ok) << rows.rows[0].value;
  EXPECT_NE(rows.rows[0].value.find(system + "/crt/host_config.h"), std::string::npos) << rows.rows[0].value;
}

// hipcc.pl appends the user's arguments after its own flags, and clang takes the last of a repeated
// `--name=`: the probe keys the last --hip-device-lib-path, and doctor states that one (it once took
// the first), by the one reader offload::clang_line_value.
TEST(OffloadDoctorRows, DoctorTakesTheLastValueAsTheProbeDoes) {
  const std::string line = "/usr/bin/clang-15 --hip-version=5.2.21153 --rocm-path=/usr "
                           "--hip-device-lib-path=\"/usr/lib/amdgcn/bitcode\" --rocm-path=/opt/rocm -x hip probe.hip "
                           "--hip-device-lib-path=/opt/rocm/amdgcn/bitcode";
  kache::util::ProcessResult r;
  r.exit_code = 0;
  r.out = "hipcc-cmd: " + line + "\n";
  const offload::HipccFacts f = offload::read_hipcc_probe(r);
  EXPECT_EQ(offload::clang_line_value(line, "--hip-device-lib-path"), "/opt/rocm/amdgcn/bitcode");
  EXPECT_EQ(f.named_bitcode_dir, offload::clang_line_value(line, "--hip-device-lib-path"));
  EXPECT_EQ(f.rocm_path, "/opt/rocm");
  EXPECT_EQ(offload::clang_line_value(line, "--hip-version"), "5.2.21153");
  EXPECT_EQ(offload::clang_line_value("clang --hip-device-lib-path=\"/a b\" x", "--hip-device-lib-path"), "/a b");
  EXPECT_EQ(offload::clang_line_value(line, "--offload-arch"), "");
}

}  // namespace

namespace {

DoctorRows one_hipcc_warning() {
  DoctorRows rows;
  rows.add("rocm", "hipcc", DoctorStatus::warn, "/usr/bin/hipcc", "hipcc did not say which compiler it runs (x).",
           "run it by hand");
  return rows;
}

}  // namespace

// A hipcc doctor was not asked about is quieted on a CUDA machine only, keeping its message; on a
// machine without nvcc ROCm is the toolkit, and its warnings stay.
TEST(OffloadDoctorRows, UnaskedHipccIsQuietOnlyWhereNvccIs) {
  DoctorRows cuda = one_hipcc_warning();
  offload::quiet_unasked_hipcc_rows(cuda, false, true);
  EXPECT_EQ(cuda.rows[0].status, DoctorStatus::ok);
  EXPECT_NE(cuda.rows[0].message.find("hipcc did not say which compiler it runs (x)."), std::string::npos)
      << cuda.rows[0].message;
  DoctorRows rocm = one_hipcc_warning();
  offload::quiet_unasked_hipcc_rows(rocm, false, false);
  EXPECT_EQ(rocm.rows[0].status, DoctorStatus::warn);
  EXPECT_EQ(rocm.rows[0].fix, "run it by hand");
  DoctorRows asked = one_hipcc_warning();
  offload::quiet_unasked_hipcc_rows(asked, true, true);
  EXPECT_EQ(asked.rows[0].status, DoctorStatus::warn);
}
