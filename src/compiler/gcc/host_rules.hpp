#pragma once
// GCC knowledge another driver needs when it hands flags to a GCC-compatible host compiler: nvcc's
// -Xcompiler values are checked here. The gcc adapter's own flag table (flag_table.cpp) covers a
// direct gcc/clang command line; these rules answer the narrower question "may this flag ride
// along inside a forwarded option string".
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::compiler::gcc {

enum class Match { Exact, Prefix };

struct ForwardRule {
  std::string_view flag;
  Match match;
  std::string_view reason;
};

bool rule_matches(const ForwardRule& r, std::string_view flag);

// A token as the tool sees it: quotes a shell would remove do not hide a flag.
std::string_view unquote(std::string_view t);

// The refusal for the first offending flag, or nullopt.
struct FlagRefusal {
  std::string reason;
  std::string flag;  // the offending flag inside the value
};

// `value` is a forwarded option's value as written (one argument); it is split on commas (nvcc's list
// separator) and whitespace (the host compiler's command line is re-split by a shell). Sets
// *has_debug when a -g flag (other than -gno-...) is inside.
std::optional<FlagRefusal> check_host_options(std::string_view value, bool* has_debug = nullptr);
// "native" (-arch=native) or "…=native" (-march=native): a value resolved from the build machine.
bool is_machine_native(std::string_view value);
// Splits a forwarded option value the way it reaches the tool: on commas and whitespace.
std::vector<std::string_view> split_option_list(std::string_view value);

}  // namespace kache::compiler::gcc
