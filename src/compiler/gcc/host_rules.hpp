#pragma once
// GCC knowledge another driver needs when it hands flags to a GCC-compatible host compiler: nvcc's
// -Xcompiler values. A thin view over the gcc/clang flag table (flag_table.hpp): each forwarded flag
// is classified by the same closed table as a direct gcc/clang command line, and refused under the
// -Xcompiler reason its row maps to (host_rules.cpp).
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
// separator) and whitespace (the host compiler's command line is re-split by a shell), and each flag is
// classified through the table. The refusal for the first offending flag, or nullopt. Sets *has_debug
// when a -g flag that asks for debug info (debug_option_enables: not -g0, not -gno-...) is inside. allowlist ([cc] extra_allowlist_flags) admits a host
// flag the table does not know, never one it refuses.
std::optional<FlagRefusal> check_host_options(std::string_view value, bool* has_debug = nullptr,
                                              const std::vector<std::string>* allowlist = nullptr);

// Only the flags in `value` that hide an input from kache (include directories, forced includes,
// macros, sysroots, plugins, host response files...): what the allow-list may never admit when nvcc
// forwards an unknown flag to the host compiler (spec).
std::optional<FlagRefusal> hidden_host_input(std::string_view value);

}  // namespace kache::compiler::gcc
