#include "core/entry.hpp"

#include <stdexcept>

#include "util/serial.hpp"

namespace kache::core {

namespace {
constexpr std::uint32_t kEntryMagic = 0x4b454e31;  // "KEN1"
}

std::string serialize_entry(const CacheEntry& e) {
  util::Writer w;
  w.u32(kEntryMagic);
  w.str(e.object);
  w.u8(e.depfile_template ? 1 : 0);
  w.str(e.depfile_template.value_or(""));
  w.str(e.stdout_text);
  w.str(e.stderr_text);
  return w.take();
}

CacheEntry deserialize_entry(std::string_view data) {
  util::Reader r(data);
  if (r.u32() != kEntryMagic) throw std::runtime_error("not a kache entry");
  CacheEntry e;
  e.object = r.str();
  const bool has_dep = r.u8() != 0;
  std::string dep = r.str();
  if (has_dep) e.depfile_template = std::move(dep);
  e.stdout_text = r.str();
  e.stderr_text = r.str();
  if (!r.done()) throw std::runtime_error("trailing bytes in entry");
  return e;
}

}  // namespace kache::core
