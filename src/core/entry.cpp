#include "core/entry.hpp"

#include <stdexcept>

#include "util/serial.hpp"

namespace kache::core {

namespace {
constexpr std::uint32_t kEntryMagic = 0x4b454e32;  // "KEN2": the object last, so it can be stored apart

// Everything up to the object's size; the object's bytes follow it.
CacheEntryView read_head(util::Reader& r, std::uint64_t& object_size) {
  if (r.u32() != kEntryMagic) throw std::runtime_error("not a kache entry");
  CacheEntryView e;
  const bool has_dep = r.u8() != 0;
  std::string_view dep = r.str_view();
  if (has_dep) e.depfile_template = dep;
  e.stdout_text = r.str_view();
  e.stderr_text = r.str_view();
  object_size = r.u64();
  return e;
}
}  // namespace

std::string serialize_entry_head(const CacheEntry& e) {
  util::Writer w;
  w.u32(kEntryMagic);
  w.u8(e.depfile_template ? 1 : 0);
  w.str(e.depfile_template.value_or(""));
  w.str(e.stdout_text);
  w.str(e.stderr_text);
  w.u64(e.object.size());
  return w.take();
}

std::string serialize_entry(const CacheEntry& e) { return serialize_entry_head(e) + e.object; }

CacheEntryView view_entry(std::string_view data) {
  util::Reader r(data);
  std::uint64_t object_size = 0;
  CacheEntryView e = read_head(r, object_size);
  const std::size_t head_size = data.size() - r.remaining();
  if (r.remaining() != object_size) throw std::runtime_error("entry object size mismatch");
  e.object = data.substr(head_size);
  return e;
}

CacheEntryView view_entry_head(std::string_view head, std::uint64_t object_size) {
  util::Reader r(head);
  std::uint64_t recorded = 0;
  CacheEntryView e = read_head(r, recorded);
  if (!r.done()) throw std::runtime_error("trailing bytes in entry head");
  if (recorded != object_size) throw std::runtime_error("entry object size mismatch");
  return e;
}

CacheEntry deserialize_entry(std::string_view data) {
  const CacheEntryView v = view_entry(data);
  CacheEntry e;
  e.object = std::string(v.object);
  if (v.depfile_template) e.depfile_template = std::string(*v.depfile_template);
  e.stdout_text = std::string(v.stdout_text);
  e.stderr_text = std::string(v.stderr_text);
  return e;
}

}  // namespace kache::core
