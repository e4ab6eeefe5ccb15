#pragma once
// The tables the manual page is generated from (cmake/man.cmake), printed by the binary itself so the
// page cannot drift from the code: `kache --list-settings` (src/core/config.cpp's rows) and
// `kache --list-environment` (src/compiler/env_table.cpp's rows), one tab-separated row per line.
// Hidden options: not in --help, meant for the build.
#include <string_view>

namespace kache {

bool is_manual_table_option(std::string_view arg);
// Prints the table the option names; returns the exit code.
int print_manual_table(std::string_view option);

}  // namespace kache
