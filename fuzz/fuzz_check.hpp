#pragma once
// Shared by the fuzz targets: a property check that aborts (so libFuzzer saves the input as a crash)
// and the splitting of one fuzz input into several strings.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace kache::fuzz {

// A violated property is a finding like a crash: print what failed and abort.
[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz property violated at %s:%d: %s\n", file, line, what);
  std::abort();
}

#define KACHE_FUZZ_CHECK(cond) \
  do {                          \
    if (!(cond)) ::kache::fuzz::fail(#cond, __FILE__, __LINE__); \
  } while (0)

inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits on a separator byte: arguments are NUL-separated in the seed corpora (like /proc/PID/cmdline),
// so any byte but NUL can appear inside one argument. Empty pieces are kept (an empty argument is legal).
inline std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace kache::fuzz
