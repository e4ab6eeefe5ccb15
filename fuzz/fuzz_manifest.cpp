// Fuzzes the direct-mode manifest decoder with arbitrary bytes (a manifest is read from the cache on
// every direct-mode lookup, and a cache directory may hold damaged or foreign files).
// Properties: decoding either throws std::runtime_error or succeeds; what decodes re-encodes to bytes
// that decode to the same value (decode(encode(x)) == x, compared through the encoding); adding an
// entry keeps the manifest within its cap.
#include <stdexcept>
#include <string>

#include "core/manifest.hpp"
#include "fuzz_check.hpp"

using namespace kache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  core::Manifest m;
  try {
    m = core::deserialize_manifest(kache::fuzz::as_view(data, size));
  } catch (const std::runtime_error&) {
    return 0;
  }
  const std::string encoded = core::serialize_manifest(m);
  const core::Manifest again = core::deserialize_manifest(encoded);
  KACHE_FUZZ_CHECK(core::serialize_manifest(again) == encoded);
  KACHE_FUZZ_CHECK(again.entries.size() == m.entries.size());
  for (std::size_t i = 0; i < m.entries.size(); ++i) {
    const auto& a = m.entries[i];
    const auto& b = again.entries[i];
    KACHE_FUZZ_CHECK(a.result_key == b.result_key && a.absent == b.absent && a.files.size() == b.files.size());
    for (std::size_t j = 0; j < a.files.size(); ++j) KACHE_FUZZ_CHECK(a.files[j].path == b.files[j].path);
  }
  core::ManifestEntry extra;
  extra.created_ns = 1;
  core::manifest_add(m, extra);
  KACHE_FUZZ_CHECK(m.entries.size() <= core::kMaxManifestEntries);
  return 0;
}
