// nvcc's doctor readers of toolkit headers (compiler/nvcc/doctor.hpp): the host-compiler bound of crt/host_config.h and the
// exception specification of crt/math_functions.h's cospi, on the shapes real toolkits ship.
#include <gtest/gtest.h>

#include "commands/cli.hpp"
#include "compiler/nvcc/doctor.hpp"

namespace {

using kache::compiler::nvcc::math_functions_lacks_noexcept;
using kache::compiler::nvcc::newest_host_major;

// As CUDA 13.0's crt/host_config.h spells both bounds.
constexpr const char* kHostConfig13 = R"(
#if defined(__GNUC__)

#if __GNUC__ > 15

#error -- unsupported GNU version! gcc versions later than 15 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check.

#endif /* __GNUC__ > 15 */

#if defined(__clang__) && !defined(__ibmxl_vrm__) && !defined(__ICC) && !defined(__HORIZON__)

#if (__clang_major__ >= 21) || (__clang_major__ < 3) || ((__clang_major__ == 3) &&  (__clang_minor__ < 3))
#error -- unsupported clang version! clang version must be less than 21 and greater than 3.2 .

#endif
#endif /* __GNUC__ */
)";

TEST(DoctorHostConfig, ReadsTheGnuAndClangBounds) {
  EXPECT_EQ(newest_host_major(kHostConfig13, false), 15);
  EXPECT_EQ(newest_host_major(kHostConfig13, true), 20);
}

TEST(DoctorHostConfig, GreaterOrEqualMeansOneBelow) {
  EXPECT_EQ(newest_host_major("#if __GNUC__ >= 14\n#error -- unsupported GNU version! no\n#endif\n", false), 13);
}

TEST(DoctorHostConfig, NoBoundStated) {
  EXPECT_EQ(newest_host_major("#pragma once\n", false), std::nullopt);
  EXPECT_EQ(newest_host_major("#if __GNUC__ > 15\n#endif\n", false), std::nullopt);  // no #error
}

TEST(DoctorMathFunctions, DeclarationWithoutExceptionSpecificationClashes) {
  // CUDA 12.x before the fix.
  EXPECT_EQ(math_functions_lacks_noexcept(
                "extern __DEVICE_FUNCTIONS_DECL__ __device_builtin__ double                 cospi(double x);\n"),
            true);
  // CUDA 13.0.
  EXPECT_EQ(math_functions_lacks_noexcept("extern __DEVICE_FUNCTIONS_DECL__ __device_builtin__ double "
                                          "cospi(double x) __NV_IEC_60559_FUNCS_EXCEPTION_SPECIFIER;\n"),
            false);
  EXPECT_EQ(math_functions_lacks_noexcept("double cospi(double x) noexcept (true);"), false);
  EXPECT_EQ(math_functions_lacks_noexcept("float cospif(float x);"), std::nullopt);
}

TEST(DoctorCli, SubcommandsAreKacheOptions) {
  auto is_kache = [](std::string word) {
    std::string self = "kache";
    char* argv[] = {self.data(), word.data()};
    return kache::commands::is_kache_invocation(2, argv);
  };
  EXPECT_TRUE(is_kache("doctor"));
  EXPECT_TRUE(is_kache("explain"));
  EXPECT_FALSE(is_kache("nvcc"));
}

}  // namespace
