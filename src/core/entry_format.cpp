#include "core/entry_format.hpp"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "util/hash.hpp"

namespace kache::core {

namespace {

using namespace container;

constexpr char kZstdMagic[kMagicLen] = {'K', 'A', 'C', 'H', 'E', '\0', 'E', '1'};
constexpr char kRawMagic[kMagicLen] = {'K', 'A', 'C', 'H', 'E', '\0', 'R', '1'};
constexpr char kSplitMagic[kMagicLen] = {'K', 'A', 'C', 'H', 'E', '\0', 'B', '1'};
constexpr char kSplitZstdMagic[kMagicLen] = {'K', 'A', 'C', 'H', 'E', '\0', 'E', '2'};
constexpr std::uint64_t kBodyAlign = 4096;  // FICLONERANGE wants block-aligned offsets

bool has_magic(std::string_view data, const char (&magic)[kMagicLen]) {
  return data.size() >= kMagicLen && std::memcmp(data.data(), magic, kMagicLen) == 0;
}

void put_u64_le(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64_le(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::uint64_t split_body_offset(std::uint64_t head_size) {
  return (kSplitHeaderLen + head_size + kBodyAlign - 1) / kBodyAlign * kBodyAlign;
}

// The checksum seed of a split-zstd container: its two size fields.
std::uint64_t sizes_seed(std::uint64_t value_size, std::uint64_t head_size) {
  std::string fields;
  put_u64_le(fields, value_size);
  put_u64_le(fields, head_size);
  return util::xxh64(fields);
}

// A zstd frame matches its checksum, holds exactly `size` bytes and nothing follows it.
std::optional<FormatError> check_frame(std::string_view frame, std::string_view checksum, std::uint64_t size,
                                       std::uint64_t seed = 0) {
  if (util::xxh128_hex(frame, seed) != checksum) return FormatError::checksum;
  // The checksum does not cover the size field: cross-check it with the frame before allocating.
  const unsigned long long frame_size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (frame_size == ZSTD_CONTENTSIZE_UNKNOWN || frame_size == ZSTD_CONTENTSIZE_ERROR || frame_size != size)
    return FormatError::malformed;
  if (ZSTD_findFrameCompressedSize(frame.data(), frame.size()) != frame.size()) return FormatError::malformed;
  return std::nullopt;
}

std::string compress_frame(std::string_view value, int level) {
  level = std::clamp(level, ZSTD_minCLevel(), ZSTD_maxCLevel());
  std::string frame(ZSTD_compressBound(value.size()), '\0');
  const std::size_t n = ZSTD_compress(frame.data(), frame.size(), value.data(), value.size(), level);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
  frame.resize(n);
  return frame;
}

Decoded<std::string> decompress_frame(std::string_view frame, std::uint64_t size) {
  std::string out(static_cast<std::size_t>(size), '\0');
  const std::size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n) || n != size) return FormatError::malformed;
  return out;
}

// The raw and zstd layout: magic, the value's size, the checksum of the payload, the payload.
std::string wrap_whole(const char (&magic)[kMagicLen], std::uint64_t value_size, std::string_view payload) {
  std::string out;
  out.reserve(kRawHeaderLen + payload.size());
  out.append(magic, kMagicLen);
  put_u64_le(out, value_size);
  out += util::xxh128_hex(payload);
  out += payload;
  return out;
}

std::string concat(std::string_view head, std::string_view body) {
  std::string value;
  value.reserve(head.size() + body.size());
  value.append(head);
  value.append(body);
  return value;
}

Decoded<std::string> decode_split(std::string_view data) {
  const auto h = parse_split_header(data, data.size());
  if (!h) return data.size() < kSplitHeaderLen ? FormatError::truncated : FormatError::malformed;
  const std::string_view head = data.substr(kSplitHeaderLen, h->head_size);
  const std::string_view body = data.substr(h->body_offset);
  if (!payload_matches(head, h->head_checksum) || !payload_matches(body, h->body_checksum))
    return FormatError::checksum;
  return concat(head, body);
}

Decoded<std::string> decode_raw(std::string&& bytes) {
  const auto h = parse_raw_header(bytes);
  if (!h) return FormatError::truncated;
  const std::string_view payload = std::string_view(bytes).substr(kRawHeaderLen);
  if (payload.size() != h->size) return FormatError::truncated;
  if (!payload_matches(payload, h->checksum)) return FormatError::checksum;
  bytes.erase(0, kRawHeaderLen);  // in place: no second buffer for a manifest read on every hit
  return std::move(bytes);
}

Decoded<std::string> decode_zstd(std::string_view data) {
  if (data.size() < kRawHeaderLen) return FormatError::truncated;
  const std::uint64_t size = get_u64_le(data.data() + kMagicLen);
  if (auto bad = check_frame(data.substr(kRawHeaderLen), data.substr(kMagicLen + 8, kChecksumLen), size)) return *bad;
  return decompress_frame(data.substr(kRawHeaderLen), size);
}

}  // namespace

const char* format_error_name(FormatError e) {
  switch (e) {
    case FormatError::unknown_format:
      return "unknown format";
    case FormatError::truncated:
      return "truncated";
    case FormatError::checksum:
      return "checksum mismatch";
    case FormatError::malformed:
      return "malformed";
  }
  return "?";
}

std::string encode_raw(std::string_view value) { return wrap_whole(kRawMagic, value.size(), value); }

std::string encode_zstd(std::string_view value, int level) {
  return wrap_whole(kZstdMagic, value.size(), compress_frame(value, level));
}

std::string encode_split(std::string_view head, std::string_view body) {
  std::string out;
  const std::uint64_t body_offset = split_body_offset(head.size());
  out.reserve(body_offset + body.size());
  out.append(kSplitMagic, kMagicLen);
  put_u64_le(out, head.size());
  put_u64_le(out, body.size());
  out += util::xxh128_hex(head);
  out += util::xxh128_hex(body);
  out += head;
  out.resize(body_offset, '\0');
  out += body;
  return out;
}

std::string encode_split_zstd(std::string_view head, std::string_view body, int level) {
  const std::string value = concat(head, body);
  const std::string frame = compress_frame(value, level);
  std::string out;
  out.reserve(kSplitZstdHeaderLen + frame.size());
  out.append(kSplitZstdMagic, kMagicLen);
  put_u64_le(out, value.size());
  put_u64_le(out, head.size());
  out += util::xxh128_hex(frame, sizes_seed(value.size(), head.size()));
  out += frame;
  return out;
}

std::string encode_parts(std::string_view head, std::string_view body, const PartsEncoding& how) {
  return how.compress ? encode_split_zstd(head, body, how.level) : encode_split(head, body);
}

Decoded<std::string> decode_value(std::string&& bytes) {
  const std::string_view data = bytes;
  if (is_split(data)) return decode_split(data);
  if (is_raw(data)) return decode_raw(std::move(bytes));
  if (has_magic(data, kZstdMagic)) return decode_zstd(data);
  if (is_split_zstd(data)) {
    auto parsed = parse_split_zstd(data);
    if (!parsed) return parsed.error();
    return decompress_frame(parsed->frame, parsed->value_size);
  }
  return FormatError::unknown_format;
}

namespace container {

bool is_raw(std::string_view prefix) { return has_magic(prefix, kRawMagic); }
bool is_split(std::string_view prefix) { return has_magic(prefix, kSplitMagic); }
bool is_split_zstd(std::string_view prefix) { return has_magic(prefix, kSplitZstdMagic); }

std::optional<RawHeader> parse_raw_header(std::string_view header) {
  if (header.size() < kRawHeaderLen || !is_raw(header)) return std::nullopt;
  return RawHeader{get_u64_le(header.data() + kMagicLen), header.substr(kMagicLen + 8, kChecksumLen)};
}

bool payload_matches(std::string_view payload, std::string_view checksum) {
  return util::xxh128_hex(payload) == checksum;
}

std::optional<SplitHeader> parse_split_header(std::string_view header, std::uint64_t file_size) {
  if (header.size() < kSplitHeaderLen || !is_split(header)) return std::nullopt;
  SplitHeader h;
  h.head_size = get_u64_le(header.data() + kMagicLen);
  h.body_size = get_u64_le(header.data() + kMagicLen + 8);
  h.head_checksum = header.substr(kMagicLen + 16, kChecksumLen);
  h.body_checksum = header.substr(kMagicLen + 16 + kChecksumLen, kChecksumLen);
  if (h.head_size > file_size || h.body_size > file_size) return std::nullopt;
  h.body_offset = split_body_offset(h.head_size);
  if (h.body_offset + h.body_size != file_size) return std::nullopt;
  return h;
}

Decoded<SplitZstd> parse_split_zstd(std::string_view data) {
  if (data.size() < kSplitZstdHeaderLen) return FormatError::truncated;
  if (!is_split_zstd(data)) return FormatError::unknown_format;
  SplitZstd s;
  s.value_size = get_u64_le(data.data() + kMagicLen);
  s.head_size = get_u64_le(data.data() + kMagicLen + 8);
  s.frame = data.substr(kSplitZstdHeaderLen);
  if (s.head_size > s.value_size) return FormatError::malformed;
  const std::string_view checksum = data.substr(kMagicLen + 16, kChecksumLen);
  if (auto bad = check_frame(s.frame, checksum, s.value_size, sizes_seed(s.value_size, s.head_size))) return *bad;
  return s;
}

}  // namespace container

}  // namespace kache::core
