#include "manual.hpp"

#include <fmt/format.h>

#include "compiler/env_table.hpp"
#include "core/config.hpp"

namespace kache {

namespace {

constexpr std::string_view kListSettings = "--list-settings";
constexpr std::string_view kListEnvironment = "--list-environment";

const char* effect_text(compiler::EnvEffect effect) {
  switch (effect) {
    case compiler::EnvEffect::Keyed:
      return "part of the cache key";
    case compiler::EnvEffect::Probe:
    case compiler::EnvEffect::KeyedProbe:
      return "part of the cache key (through the toolchain it selects)";
    case compiler::EnvEffect::Refused:
      return "when set, the compile runs uncached";
    case compiler::EnvEffect::RefusedNonEmpty:
      return "when set and not empty, the compile runs uncached; otherwise part of the cache key";
    case compiler::EnvEffect::Modeled:
      return "read by kache, which keys what it changes";
    case compiler::EnvEffect::Inert:
      return "cannot change a cached result";
  }
  return "?";
}

}  // namespace

bool is_manual_table_option(std::string_view arg) { return arg == kListSettings || arg == kListEnvironment; }

int print_manual_table(std::string_view option) {
  if (option == kListSettings) {
    for (const auto& row : core::setting_rows())
      fmt::print("{}\t{}\t{}\t{}\n", row.name, row.env, row.kind, row.default_value);
    return 0;
  }
  for (const auto& rule : compiler::env_rules()) {
    fmt::print("{}\t{}\t{}\n", rule.name, compiler::reader_name(rule.reader), effect_text(rule.effect));
  }
  return 0;
}

}  // namespace kache
