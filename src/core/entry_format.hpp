#pragma once
// The containers kache stores values in: the same bytes in a local file and a remote value,
// read by this one decoder. Every integer is little endian; every checksum is XXH3-128 in hex (32
// bytes). Version = the last two bytes of the magic; a reader knows every version it may meet.
//
//   zstd    "KACHE\0E1" u64 value-size  checksum(frame)            frame
//   raw     "KACHE\0R1" u64 value-size  checksum(value)            value
//   split   "KACHE\0B1" u64 head-size u64 body-size checksum(head) checksum(body)
//           head, zero padding, body (from the first multiple of 4096 on, to the end)
//   split-zstd "KACHE\0E2" u64 value-size u64 head-size checksum(frame, seeded with both sizes) frame
//
// raw is for records read on every hit (manifests: decompressing costs more than reading); split keeps
// the body on a block boundary so a store can clone it into place (FICLONERANGE); split-zstd names where
// the head ends so a reader can decompress the body straight into a file. What the value itself is
// (an entry record, a manifest) is for core/entry.hpp and core/manifest.hpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/result.hpp"

namespace kache::core {

enum class FormatError {
  unknown_format,  // no kache magic, or a version this kache does not read (an older entry record)
  truncated,       // shorter than its header or its size fields say
  checksum,        // the bytes do not match their checksum
  malformed,       // inconsistent fields or a damaged zstd frame
};
const char* format_error_name(FormatError e);

template <typename T>
using Decoded = util::Result<T, FormatError>;

// How a value made of a head and a body (a result entry) is stored.
struct PartsEncoding {
  bool compress = true;
  int level = 3;
};

std::string encode_zstd(std::string_view value, int level);
std::string encode_raw(std::string_view value);
std::string encode_split(std::string_view head, std::string_view body);
std::string encode_split_zstd(std::string_view head, std::string_view body, int level);
std::string encode_parts(std::string_view head, std::string_view body, const PartsEncoding& how);

// The value of any container (split ones give head + body). Never throws on bad input.
Decoded<std::string> decode_value(std::string&& bytes);

// Pieces for a reader that reads a file in parts instead of whole (the local store's hit path).
namespace container {

inline constexpr std::size_t kMagicLen = 8;
inline constexpr std::size_t kChecksumLen = 32;
inline constexpr std::size_t kRawHeaderLen = kMagicLen + 8 + kChecksumLen;
inline constexpr std::size_t kSplitHeaderLen = kMagicLen + 8 + 8 + 2 * kChecksumLen;
inline constexpr std::size_t kSplitZstdHeaderLen = kMagicLen + 8 + 8 + kChecksumLen;

bool is_raw(std::string_view prefix);
bool is_split(std::string_view prefix);
bool is_split_zstd(std::string_view prefix);

struct RawHeader {
  std::uint64_t size = 0;
  std::string_view checksum;
};
// The header of a raw container (its first kRawHeaderLen bytes); nullopt if it is not one.
std::optional<RawHeader> parse_raw_header(std::string_view header);
bool payload_matches(std::string_view payload, std::string_view checksum);

struct SplitHeader {
  std::uint64_t head_size = 0, body_size = 0, body_offset = 0;
  std::string_view head_checksum, body_checksum;
};
// The fixed header of a split container of file_size bytes; nullopt when inconsistent.
std::optional<SplitHeader> parse_split_header(std::string_view header, std::uint64_t file_size);

struct SplitZstd {
  std::uint64_t value_size = 0, head_size = 0;
  std::string_view frame;
};
// A whole split-zstd container with its checksum and frame verified (not yet decompressed).
Decoded<SplitZstd> parse_split_zstd(std::string_view data);

}  // namespace container

}  // namespace kache::core
