#pragma once
// GCC knowledge another driver needs when it hands flags to a GCC-compatible host compiler: nvcc's
// -Xcompiler values are checked here. The gcc adapter's own flag table (flag_table.cpp) covers a
// direct gcc/clang command line; these rules answer the narrower question "may this flag ride
// along inside a forwarded option string".
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/flag_table_format.hpp"

namespace kache::compiler::gcc {

using compiler::FlagRefusal;
using compiler::ForwardRule;
using compiler::is_machine_native;
using compiler::Match;
using compiler::rule_matches;
using compiler::split_option_list;
using compiler::unquote;

// `value` is a forwarded option's value as written (one argument); it is split on commas (nvcc's list
// separator) and whitespace (the host compiler's command line is re-split by a shell). Sets
// *has_debug when a -g flag (other than -gno-...) is inside.
std::optional<FlagRefusal> check_host_options(std::string_view value, bool* has_debug = nullptr);

}  // namespace kache::compiler::gcc
