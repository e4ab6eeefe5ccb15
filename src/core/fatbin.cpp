#include "core/fatbin.hpp"

#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

namespace kache::core {

namespace {
// The layout below is measured on nvcc 13.0 objects (xxd on .nv_fatbin under --compress-mode=size,
// default and none) and agrees with public descriptions of the format: a 16-byte container header
// (magic, version, the header's size, the size of the entries after it), then entries, each a header
// (kind, the header's size at +4, the payload's padded size at +8, its stored size at +16, flags at
// +40, its decompressed size at +56) followed by its payload.
constexpr std::uint64_t kCompressedFlags = 0x8000 | 0x2000;  // zstd (CUDA 12.8+), the older LZ4 scheme
constexpr std::uint64_t kMaxDecompressed = std::uint64_t{1} << 30;
constexpr std::size_t kEntryHeaderMin = 64;

template <typename T>
T read_at(std::string_view b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

using Visit = std::function<void(std::string_view)>;

bool decompress(std::string_view frame, std::uint64_t size, const Visit& code) {
  if (!frame.starts_with("\x28\xb5\x2f\xfd") || size == 0 || size > kMaxDecompressed) return false;
  std::string text(size, '\0');
  const std::size_t n = ZSTD_decompress(text.data(), text.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) return false;
  code(std::string_view(text).substr(0, n));
  return true;
}

// The entries of the container whose header starts at b[0]; false when it cannot be read.
bool read_container(std::string_view b, const Visit& code) {
  if (b.size() < 16) return false;
  const std::uint16_t header = read_at<std::uint16_t>(b, 6);
  const std::uint64_t size = read_at<std::uint64_t>(b, 8);
  if (header < 16 || header > b.size() || size > b.size() - header) return false;
  std::string_view entries = b.substr(header, size);
  while (!entries.empty()) {
    if (entries.size() < kEntryHeaderMin) return false;
    const std::uint32_t entry_header = read_at<std::uint32_t>(entries, 4);
    const std::uint64_t padded = read_at<std::uint64_t>(entries, 8);
    if (entry_header < kEntryHeaderMin || entry_header > entries.size() || padded > entries.size() - entry_header) {
      return false;
    }
    const std::uint64_t flags = read_at<std::uint64_t>(entries, 40);
    const std::uint64_t decompressed = read_at<std::uint64_t>(entries, 56);
    if ((flags & kCompressedFlags) != 0 || decompressed != 0) {
      const std::uint64_t stored = std::min<std::uint64_t>(read_at<std::uint32_t>(entries, 16), padded);
      if (!decompress(entries.substr(entry_header, stored), decompressed, code)) return false;
    }
    entries.remove_prefix(entry_header + padded);
  }
  return true;
}
}  // namespace

bool read_compressed_device_code(std::string_view bytes, const Visit& code) {
  bool readable = true;
  static constexpr std::string_view kMagicBytes = "\x50\xed\x55\xba";  // 0xBA55ED50, little-endian
  const std::boyer_moore_horspool_searcher searcher(kMagicBytes.begin(), kMagicBytes.end());
  for (auto it = std::search(bytes.begin(), bytes.end(), searcher); it != bytes.end();
       it = std::search(it + 1, bytes.end(), searcher)) {
    const std::size_t at = static_cast<std::size_t>(it - bytes.begin());
    if (!read_container(bytes.substr(at), code)) readable = false;
  }
  return readable;
}

}  // namespace kache::core
