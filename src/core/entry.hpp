#pragma once
// What a cached compile stores: its outputs as a typed list (the object, which may be nvcc's fatbin, cubin
// or ptx; the dependency-file template and what restores it), and what the compiler printed (a hit
// replays it so a warm build shows the same diagnostics as a cold one).
//
// The record ("KEN3"; the store wraps it in a checksummed container, core/entry_format.hpp), integers
// little endian, str = u64 length + bytes:
//   u32 magic "KEN3"  str stdout  str stderr  u32 output-count
//   (u8 type, str bytes) for every output but the last
//   u8 type, u64 size of the last output (the body), then its bytes to the end
// The body comes last so a store can keep it apart (a file it can clone into place) and hand back only
// the head. Older records ("KEN2": fixed object and depfile fields) read as unknown, i.e. a miss.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/entry_format.hpp"
#include "core/path_roots.hpp"

namespace kache::core {

// Append-only numbers: a stored number never changes its meaning.
enum class OutputType : std::uint8_t {
  object = 1,
  depfile = 2,  // the dependency file, roots replaced by placeholders (PathRoots)
  // Where the object holds debug-info placeholders (PathPatch) a restore replaces by this checkout's
  // roots: u32 count, then (u64 offset, str root name) each.
  path_patches = 3,
  // How the compiler wrapped the depfile's lines ("gcc72", "clang75", "clang75-packed": core/depfile.hpp); a restore
  // re-wraps the depfile with it, as its paths' lengths may differ. Absent: restored as stored.
  depfile_layout = 4,
  // The milliseconds the miss that stored the entry took (u64), so a hit knows the time it saved (kache
  // report). Readers that predate it skip it, as they skip every type they do not know.
  miss_cost = 5,
};

std::string serialize_miss_cost(std::uint64_t ms);
// 0 when the bytes are not one.
std::uint64_t parse_miss_cost(std::string_view data);

struct Output {
  OutputType type;
  std::string data;
  bool operator==(const Output&) const = default;
};

struct CacheEntry {
  std::vector<Output> outputs;  // the last one is the body (for a compile: the object)
  std::string stdout_text;
  std::string stderr_text;
  bool operator==(const CacheEntry&) const = default;
};

struct OutputView {
  OutputType type;
  std::string_view data;
};

// The same fields as views into a serialized entry (a hit writes the object straight from the
// decompressed buffer instead of copying it first).
struct CacheEntryView {
  std::vector<OutputView> outputs;
  std::string_view stdout_text;
  std::string_view stderr_text;
  // The first output of that type; nullopt when the entry has none.
  std::optional<std::string_view> find(OutputType type) const;
  bool body_is(OutputType type) const { return !outputs.empty() && outputs.back().type == type; }
};

std::string serialize_path_patches(const std::vector<PathPatch>& patches);
// nullopt when the bytes are not such a list.
std::optional<std::vector<PathPatch>> parse_path_patches(std::string_view data);

// serialize_entry(e) == serialize_entry_head(e) + entry_body(e).
std::string serialize_entry(const CacheEntry& entry);
std::string serialize_entry_head(const CacheEntry& entry);
std::string_view entry_body(const CacheEntry& entry);
Decoded<CacheEntry> deserialize_entry(std::string_view data);
Decoded<CacheEntryView> view_entry(std::string_view data);
// A head whose body (of body_size bytes) was restored separately; the view's last output is empty.
Decoded<CacheEntryView> view_entry_head(std::string_view head, std::uint64_t body_size);

}  // namespace kache::core
