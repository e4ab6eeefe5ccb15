#pragma once
// What a cached compile stores: the object, the dependency-file template, and what the compiler
// printed (a hit replays it so a warm build shows the same diagnostics as a cold one).
#include <cstdint>
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

// The same fields as views into a serialized entry (a hit writes the object straight from the
// decompressed buffer instead of copying it first).
struct CacheEntryView {
  std::string_view object;
  std::optional<std::string_view> depfile_template;
  std::string_view stdout_text;
  std::string_view stderr_text;
};

// serialize_entry(e) == serialize_entry_head(e) + e.object: a store may keep the object apart (a
// file it can clone into place) and hand back only the head.
std::string serialize_entry(const CacheEntry& entry);
std::string serialize_entry_head(const CacheEntry& entry);
// Throw std::runtime_error on malformed input.
CacheEntry deserialize_entry(std::string_view data);
CacheEntryView view_entry(std::string_view data);
// A head whose object (of object_size bytes) was restored separately; the view's object is empty.
CacheEntryView view_entry_head(std::string_view head, std::uint64_t object_size);

}  // namespace kache::core
