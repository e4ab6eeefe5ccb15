// Fuzzes the reading of a compiler's -Wdate-time report (gcc/adapter.cpp reported_time_macros): the
// stderr and stdout of a preprocessing run, bytes kache did not write.
// Input: "0" or "1" (clang or not), then the diagnostics, a NUL, then the preprocessed text.
// Properties:
//  - clang's reports never give "__DATE__ alone" (its warning does not name the macro);
//  - preprocessed text with no "#pragma" is always believed (a value, not unknown);
//  - a report of __TIME__ added to any diagnostics makes the answer __TIME__ (or unknown);
//  - without "-Wdate-time]" in the diagnostics the answer is "none" (or unknown).
#include <string>

#include "compiler/gcc/adapter.hpp"
#include "fuzz_check.hpp"

using namespace kache;
using compiler::TimeMacros;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in = fuzz::as_view(data, size);
  if (in.empty()) return 0;
  const bool clang = in[0] == '1';
  in.remove_prefix(1);
  const std::size_t nul = in.find('\0');
  const std::string diagnostics(in.substr(0, nul));
  const std::string preprocessed(nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1));

  const auto got = compiler::gcc::reported_time_macros(diagnostics, preprocessed, clang);
  if (clang) KACHE_FUZZ_CHECK(got != TimeMacros::date);
  if (preprocessed.find("#pragma") == std::string::npos) KACHE_FUZZ_CHECK(got.has_value());
  if (diagnostics.find("-Wdate-time]") == std::string::npos) KACHE_FUZZ_CHECK(!got || *got == TimeMacros::none);
  const std::string with_time =
      diagnostics + "\na.c:1:1: warning: macro \"__TIME__\" might prevent reproducible builds [-Wdate-time]\n";
  const auto more = compiler::gcc::reported_time_macros(with_time, preprocessed, clang);
  KACHE_FUZZ_CHECK(!more || *more == TimeMacros::time);
  return 0;
}
