// Fuzzes `kache worker`'s materialization of an input root (remote_exec/input_root.hpp): arbitrary bytes
// as a serialized REAPI Tree (field 1 the root Directory, field 2 its children), decoded here with a
// small protobuf wire reader into the InputDirectory the worker's CasSource makes of each Directory.
// A child is found by its digest's size_bytes (modulo the children's count), so that any tree shape,
// cycles included, is reachable without SHA-256 matches; a file's content is size_bytes 'x' bytes (up to
// 64 KiB). Properties: materialization never throws or crashes, nothing is written outside the action's
// directory (a sibling directory and the target of a link planted inside stay empty), and every regular
// file it leaves is below the action directory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "remote_exec/input_root.hpp"
#include "util/beneath.hpp"

namespace {

using namespace kache::remote_exec;
namespace fs = std::filesystem;

// One field of a protobuf message: its number and, for length-delimited ones, its bytes (varints in value).
struct Field {
  std::uint32_t number = 0;
  std::uint64_t value = 0;
  std::string_view bytes;
};

bool read_varint(std::string_view& in, std::uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<std::uint8_t>(in.front());
    in.remove_prefix(1);
    out |= std::uint64_t(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// The fields of a message, or nullopt when the bytes are not one (wire types 0 and 2 only).
std::optional<std::vector<Field>> fields_of(std::string_view in) {
  std::vector<Field> out;
  while (!in.empty()) {
    std::uint64_t key = 0;
    if (!read_varint(in, key)) return std::nullopt;
    Field f;
    f.number = static_cast<std::uint32_t>(key >> 3);
    if ((key & 7) == 0) {
      if (!read_varint(in, f.value)) return std::nullopt;
    } else if ((key & 7) == 2) {
      std::uint64_t size = 0;
      if (!read_varint(in, size) || size > in.size()) return std::nullopt;
      f.bytes = in.substr(0, size);
      in.remove_prefix(size);
    } else {
      return std::nullopt;
    }
    out.push_back(f);
  }
  return out;
}

// Digest {1: hash, 2: size_bytes}.
BlobDigest digest_of(std::string_view bytes) {
  BlobDigest d;
  for (const Field& f : fields_of(bytes).value_or(std::vector<Field>{})) {
    if (f.number == 1) d.hash = std::string(f.bytes);
    if (f.number == 2) d.size_bytes = static_cast<std::int64_t>(f.value);
  }
  return d;
}

// Directory {1: FileNode {1: name, 2: digest, 4: is_executable}, 2: DirectoryNode {1: name, 2: digest}}.
std::optional<InputDirectory> directory_of(std::string_view bytes) {
  auto fields = fields_of(bytes);
  if (!fields) return std::nullopt;
  InputDirectory d;
  for (const Field& f : *fields) {
    if (f.number != 1 && f.number != 2) continue;
    std::string name;
    BlobDigest digest;
    bool executable = false;
    for (const Field& g : fields_of(f.bytes).value_or(std::vector<Field>{})) {
      if (g.number == 1) name = std::string(g.bytes);
      if (g.number == 2) digest = digest_of(g.bytes);
      if (g.number == 4) executable = g.value != 0;
    }
    if (f.number == 1) d.files.push_back({name, digest, executable});
    if (f.number == 2) d.directories.push_back({name, digest});
  }
  return d;
}

class TreeSource final : public InputSource {
 public:
  explicit TreeSource(std::vector<std::string_view> children) : children_(std::move(children)) {}
  std::optional<InputDirectory> directory(const BlobDigest& digest) override {
    if (children_.empty()) return std::nullopt;
    return directory_of(children_[static_cast<std::size_t>(digest.size_bytes) % children_.size()]);
  }
  std::optional<std::string> blob(const BlobDigest& digest) override {
    if (digest.size_bytes > 64 * 1024) return std::nullopt;
    return std::string(static_cast<std::size_t>(digest.size_bytes), 'x');
  }

 private:
  std::vector<std::string_view> children_;
};

const std::string& base_dir() {
  static const std::string base = [] {
    std::string tmpl = (fs::temp_directory_path() / "kache-fuzz-input-root-XXXXXX").string();
    KACHE_FUZZ_CHECK(::mkdtemp(tmpl.data()) != nullptr);
    return tmpl;
  }();
  return base;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto tree = fields_of(kache::fuzz::as_view(data, size));
  if (!tree) return 0;
  std::string_view root_bytes;
  std::vector<std::string_view> children;
  for (const Field& f : *tree) {
    if (f.number == 1) root_bytes = f.bytes;
    if (f.number == 2) children.push_back(f.bytes);
  }
  // The root is found as child 0 of a list it heads.
  children.insert(children.begin(), root_bytes);
  const std::string action = base_dir() + "/action";
  const std::string outside = base_dir() + "/outside";
  fs::remove_all(action);
  fs::remove_all(outside);
  fs::create_directories(action);
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, action + "/planted");
  TreeSource source(std::move(children));
  kache::util::Beneath dir(action);
  (void)materialize_input_root(dir, {std::string(64, '0'), 0}, source);
  KACHE_FUZZ_CHECK(fs::is_empty(outside));
  for (const auto& entry : fs::recursive_directory_iterator(base_dir())) {
    if (!entry.is_symlink() && entry.is_regular_file()) {
      KACHE_FUZZ_CHECK(entry.path().string().starts_with(action + "/"));
    }
  }
  return 0;
}
