#include "core/manifest.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "util/serial.hpp"

namespace kache::core {

namespace {
constexpr std::uint32_t kManifestMagic = 0x4b4d4e37;  // "KMN7": entries name the roots their object names
// "KMN8": the same, with preprocessed entries (ManifestEntry::preprocessed), which a kache reading KMN7
// would serve as direct entries without files; so only a manifest holding one is written as KMN8.
constexpr std::uint32_t kManifestMagicPreprocessed = 0x4b4d4e38;
// The fewest bytes each record takes, for Reader::count: a path is a u32 root and a u64 length, an
// identity five 8-byte fields and a flag.
constexpr std::size_t kPathMin = 4 + 8;
constexpr std::size_t kIdentityMin = 5 * 8 + 1;
constexpr std::size_t kFileMin = kPathMin + 32 + kIdentityMin + 1;
constexpr std::size_t kAbsentMin = kPathMin + 1 + kIdentityMin + 4 + 1;
constexpr std::size_t kNameMin = 8;

void write_path(util::Writer& w, const RootedPath& p) {
  w.u32(static_cast<std::uint32_t>(p.root + 1));
  w.str(p.rest);
}
RootedPath read_path(util::Reader& r) {
  RootedPath p;
  const std::uint32_t root = r.u32();
  // Stored as index + 1; beyond INT_MAX it cannot have been written and would overflow the int.
  if (root > static_cast<std::uint32_t>(std::numeric_limits<int>::max())) throw std::runtime_error("bad root index");
  p.root = static_cast<int>(root) - 1;
  p.rest = r.str();
  return p;
}
void write_identity(util::Writer& w, const util::FileIdentity& id) { util::write_identity(w, id, true); }
util::FileIdentity read_identity(util::Reader& r) { return util::read_identity(r, true); }
void write_file(util::Writer& w, const ManifestFile& f) {
  write_path(w, f.path);
  w.bytes(f.hash.bytes.data(), 32);
  write_identity(w, f.identity);
  w.u8(f.racy ? 1 : 0);
}
ManifestFile read_file(util::Reader& r) {
  ManifestFile f;
  f.path = read_path(r);
  r.bytes(f.hash.bytes.data(), 32);
  f.identity = read_identity(r);
  f.racy = r.u8() != 0;
  return f;
}
}  // namespace

std::string serialize_manifest(const Manifest& m) {
  util::Writer w;
  const bool preprocessed =
      std::any_of(m.entries.begin(), m.entries.end(), [](const ManifestEntry& e) { return e.preprocessed; });
  w.u32(preprocessed ? kManifestMagicPreprocessed : kManifestMagic);
  w.u32(static_cast<std::uint32_t>(m.entries.size()));
  for (const auto& e : m.entries) {
    w.bytes(e.result_key.bytes.data(), 32);
    w.u8((e.path_specific ? 1 : 0) | (e.date_keyed ? 2 : 0) | (e.preprocessed ? 4 : 0));
    w.u8(e.checkout_specific ? 1 : 0);
    w.u32(static_cast<std::uint32_t>(e.object_roots.size()));
    for (const auto& name : e.object_roots) w.str(name);
    w.i64(e.created_ns);
    w.u32(static_cast<std::uint32_t>(e.files.size()));
    for (const auto& f : e.files) write_file(w, f);
    w.u32(static_cast<std::uint32_t>(e.absent.size()));
    for (const auto& a : e.absent) {
      write_path(w, a.dir);
      w.u8(a.guarded ? 1 : 0);
      write_identity(w, a.identity);
      w.u32(static_cast<std::uint32_t>(a.names.size()));
      for (const auto& n : a.names) w.str(n);
      w.u8(a.listing ? 1 : 0);
      if (a.listing) w.bytes(a.listing->bytes.data(), 32);
    }
  }
  return w.take();
}

Manifest deserialize_manifest(std::string_view data) {
  util::Reader r(data);
  const std::uint32_t magic = r.u32();
  if (magic != kManifestMagic && magic != kManifestMagicPreprocessed) throw std::runtime_error("not a kache manifest");
  Manifest m;
  const std::uint32_t n = r.u32();
  if (n > kMaxManifestEntries * 4) throw std::runtime_error("manifest too large");
  m.entries.resize(n);
  for (auto& e : m.entries) {
    r.bytes(e.result_key.bytes.data(), 32);
    const std::uint8_t specific = r.u8();
    e.path_specific = (specific & 1) != 0;
    e.date_keyed = (specific & 2) != 0;
    e.preprocessed = magic == kManifestMagicPreprocessed && (specific & 4) != 0;
    e.checkout_specific = r.u8() != 0;
    e.object_roots.resize(r.count(kNameMin));
    for (auto& name : e.object_roots) name = r.str();
    e.created_ns = r.i64();
    e.files.resize(r.count(kFileMin));
    for (auto& f : e.files) f = read_file(r);
    e.absent.resize(r.count(kAbsentMin));
    for (auto& a : e.absent) {
      a.dir = read_path(r);
      a.guarded = r.u8() != 0;
      a.identity = read_identity(r);
      a.names.resize(r.count(kNameMin));
      for (auto& n : a.names) n = r.str();
      if (r.u8() != 0) {
        a.listing.emplace();
        r.bytes(a.listing->bytes.data(), 32);
      }
    }
  }
  if (!r.done()) throw std::runtime_error("trailing bytes in manifest");
  return m;
}

bool is_older_manifest(std::string_view data) {
  if (data.size() < 4) return false;
  util::Reader r(data.substr(0, 4));
  const std::uint32_t magic = r.u32();
  return magic >= 0x4b4d4e31 && magic < kManifestMagic;
}

void manifest_add(Manifest& m, ManifestEntry e) {
  std::erase_if(m.entries, [&](const ManifestEntry& x) { return x.result_key == e.result_key; });
  m.entries.insert(m.entries.begin(), std::move(e));
  if (m.entries.size() > kMaxManifestEntries) m.entries.resize(kMaxManifestEntries);
}

}  // namespace kache::core
