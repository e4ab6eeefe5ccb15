#pragma once
// What a cached compile stores: the object, the dependency-file template, and what the compiler
// printed (a hit replays it so a warm build shows the same diagnostics as a cold one).
#include <optional>
#include <string>
#include <string_view>

namespace kache::core {

struct CacheEntry {
  std::string object;
  std::optional<std::string> depfile_template;  // roots replaced by placeholders (PathRoots)
  std::string stdout_text;
  std::string stderr_text;
};

std::string serialize_entry(const CacheEntry& entry);
// Throws std::runtime_error on malformed input.
CacheEntry deserialize_entry(std::string_view data);

}  // namespace kache::core
