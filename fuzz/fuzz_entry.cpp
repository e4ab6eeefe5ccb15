// Fuzzes result entries: the entry record (core/entry.cpp) and the stored containers
// (core/entry_format.cpp: "KACHE\0E1" zstd, "KACHE\0R1" raw, "KACHE\0E2" zstd with a head size,
// "KACHE\0B1" split head/body), decoded as a remote value is (decode_value) and read through
// LocalStorage::read_value and read_parts exactly as a local lookup reads them.
// Input: byte 0 chooses what the rest is and what is done with it:
//   bit 0 clear: the entry file as is (damaged files, foreign files, truncated writes);
//   bit 0 set:   an entry file whose checksums are fixed up first, so the fuzzer reaches the size
//                fields, the zstd frames and the entry records behind the checksums;
//   bit 1 set:   also put the rest through every container and read it back (slow: file I/O).
// Properties: a damaged file is a miss (nullopt, never a failure, an exception or a crash); the decoder
// agrees with the local store's hit path; what a lookup returns decodes as an entry or gives a typed
// failure; a decoded entry re-encodes to the same bytes (decode(encode(x)) == x); a value put through
// each container comes back byte for byte.
// An entry names no path: the pipeline writes its object to the -o path and its dependency file to
// the -MF path of the command line, so no decoded bytes can redirect a write.
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/entry.hpp"
#include "core/entry_format.hpp"
#include "fuzz_check.hpp"
#include "storage/local/local_storage.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

using namespace kache;

namespace {

constexpr char kKey[] = "0123456789abcdef0123456789abcdef";

void put_u64_le(std::string& out, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint64_t get_u64_le(const std::string& s, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}
void set_hex(std::string& out, std::size_t at, const std::string& hex) { out.replace(at, hex.size(), hex); }

// Rewrites the checksum fields of a container so that they match its contents (layouts in
// core/entry_format.hpp). Sizes and frames stay as the fuzzer wrote them.
void fix_checksums(std::string& f) {
  if (f.size() < 8 || std::memcmp(f.data(), "KACHE\0", 6) != 0) return;
  const std::string_view kind(f.data() + 6, 2);
  if ((kind == "E1" || kind == "R1") && f.size() >= 48) {
    set_hex(f, 16, util::xxh128_hex(std::string_view(f).substr(48)));
  } else if (kind == "E2" && f.size() >= 56) {
    std::string sizes(16, '\0');
    put_u64_le(sizes, 0, get_u64_le(f, 8));
    put_u64_le(sizes, 8, get_u64_le(f, 16));
    set_hex(f, 24, util::xxh128_hex(std::string_view(f).substr(56), util::xxh64(sizes)));
  } else if (kind == "B1" && f.size() >= 88) {
    const std::uint64_t head = get_u64_le(f, 8);
    const std::uint64_t body_offset = (88 + head + 4095) / 4096 * 4096;
    if (head > f.size() - 88 || body_offset > f.size()) return;
    set_hex(f, 24, util::xxh128_hex(std::string_view(f).substr(88, head)));
    set_hex(f, 56, util::xxh128_hex(std::string_view(f).substr(body_offset)));
  }
}

// A value a lookup returned: an entry record, or (for manifests) anything else.
void check_value(std::string_view value) {
  const auto decoded = core::deserialize_entry(value);
  if (!decoded) return;
  const core::CacheEntry& e = *decoded;
  const std::string encoded = core::serialize_entry(e);
  KACHE_FUZZ_CHECK(encoded == value);
  const auto again = core::deserialize_entry(encoded);
  KACHE_FUZZ_CHECK(again && *again == e);
  // The head alone with the body kept apart gives the same fields.
  const std::string head = core::serialize_entry_head(e);
  const auto v = core::view_entry_head(head, core::entry_body(e).size());
  KACHE_FUZZ_CHECK(v && v->outputs.size() == e.outputs.size() && v->stdout_text == e.stdout_text &&
                   v->stderr_text == e.stderr_text);
  KACHE_FUZZ_CHECK(v->outputs.empty() || v->outputs.back().data.empty());
  // A path-patch list (issue 27) parses or is refused, and re-encodes to the same bytes.
  for (const auto& o : e.outputs) {
    if (o.type != core::OutputType::path_patches) continue;
    if (const auto patches = core::parse_path_patches(o.data)) {
      KACHE_FUZZ_CHECK(core::serialize_path_patches(*patches) == o.data);
    }
  }
}

template <typename T>
T must(storage::StorageResult<T> r) {
  KACHE_FUZZ_CHECK(r.ok());  // damage is a miss, never a store failure
  return std::move(*r);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    // tmpfs: the store syncs what it writes, which on a disk would bound the fuzzer to ~30 runs/s.
    const bool shm = ::access("/dev/shm", W_OK) == 0;
    std::string d = (shm ? "/dev/shm" : "/tmp") + std::string("/kache-fuzz-entry.") + std::to_string(::getpid());
    util::create_directories(d);
    return d;
  }();
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) fix_checksums(file);

  // The record decoder on the raw bytes, and the container decoder (as a remote value is checked).
  check_value(file);
  const core::Decoded<std::string> decoded = core::decode_value(std::string(file));
  if (decoded) check_value(*decoded);

  const std::string entry_dir = dir + "/0/12";
  const std::string path = entry_dir + "/" + kKey;
  const std::string body_dir = dir + "/out";
  util::create_directories(entry_dir);
  util::create_directories(body_dir);
  storage::LocalStorage store({dir, 1ull << 40});
  for (bool compress : {true, false}) {
    util::write_file(path, file);
    const std::optional<std::string> v = must(store.read_value(kKey));
    KACHE_FUZZ_CHECK(v.has_value() == decoded.ok());  // the hit path and the decoder agree
    if (v) check_value(*v);
    util::write_file(path, file);
    if (auto parts = must(store.read_parts(kKey, body_dir))) {
      if (!parts->body_file.empty()) {
        KACHE_FUZZ_CHECK(util::read_file(parts->body_file).size() == parts->body_size);
        ::unlink(parts->body_file.c_str());
      }
    }
    if (!(data[0] & 2)) continue;
    // Round trips through every container with the input as the value (split in the middle).
    const std::string_view value(file);
    KACHE_FUZZ_CHECK(store.put(kKey, core::encode_zstd(value, 1)).ok());
    KACHE_FUZZ_CHECK(must(store.read_value(kKey)) == std::string(value));
    KACHE_FUZZ_CHECK(store.put(kKey, core::encode_raw(value)).ok());
    KACHE_FUZZ_CHECK(must(store.read_value(kKey)) == std::string(value));
    const std::string_view head = value.substr(0, value.size() / 2), body = value.substr(value.size() / 2);
    KACHE_FUZZ_CHECK(store.put(kKey, core::encode_parts(head, body, {compress, 1})).ok());
    auto parts = must(store.read_parts(kKey, body_dir));
    KACHE_FUZZ_CHECK(parts.has_value());
    std::string whole = parts->value;
    if (!parts->body_file.empty()) {
      whole += util::read_file(parts->body_file);
      ::unlink(parts->body_file.c_str());
    }
    KACHE_FUZZ_CHECK(whole == std::string(value));
  }
  return 0;
}
