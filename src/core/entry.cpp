#include "core/entry.hpp"

#include <stdexcept>

#include "util/serial.hpp"

namespace kache::core {

namespace {
constexpr std::uint32_t kEntryMagic = 0x4b454e33;  // "KEN3": typed outputs, the body last
constexpr std::size_t kMinOutputSize = 1 + 8;      // a type and a length

// Everything up to the body's size; the body's bytes follow it. Throws std::runtime_error (from the
// Reader) on truncated input; the callers turn that into a FormatError.
CacheEntryView read_head(util::Reader& r, std::uint64_t& body_size) {
  CacheEntryView e;
  e.stdout_text = r.str_view();
  e.stderr_text = r.str_view();
  const std::uint32_t n = r.count(kMinOutputSize);
  e.outputs.reserve(n);
  for (std::uint32_t i = 0; i + 1 < n; ++i) {
    const auto type = static_cast<OutputType>(r.u8());
    e.outputs.push_back({type, r.str_view()});
  }
  body_size = 0;
  if (n > 0) {
    e.outputs.push_back({static_cast<OutputType>(r.u8()), {}});
    body_size = r.u64();
  }
  return e;
}

// Parses a head, then lets `finish` check what follows it; any malformed input is a FormatError.
template <typename Finish>
Decoded<CacheEntryView> parse(std::string_view data, Finish finish) {
  try {
    util::Reader r(data);
    if (data.size() < 4 || r.u32() != kEntryMagic) return FormatError::unknown_format;
    std::uint64_t body_size = 0;
    CacheEntryView e = read_head(r, body_size);
    if (!finish(r, e, body_size)) return FormatError::malformed;
    return e;
  } catch (const std::runtime_error&) {
    return FormatError::truncated;
  }
}
}  // namespace

std::optional<std::string_view> CacheEntryView::find(OutputType type) const {
  for (const auto& o : outputs) {
    if (o.type == type) return o.data;
  }
  return std::nullopt;
}

std::string serialize_miss_cost(std::uint64_t ms) {
  util::Writer w;
  w.u64(ms);
  return w.take();
}

std::uint64_t parse_miss_cost(std::string_view data) {
  try {
    util::Reader r(data);
    const std::uint64_t ms = r.u64();
    return r.done() ? ms : 0;
  } catch (const std::runtime_error&) {
    return 0;
  }
}

std::string serialize_path_patches(const std::vector<PathPatch>& patches) {
  util::Writer w;
  w.u32(static_cast<std::uint32_t>(patches.size()));
  for (const auto& p : patches) {
    w.u64(p.offset);
    w.str(p.root_name);
    w.u64(p.string_size);
  }
  return w.take();
}

std::optional<std::vector<PathPatch>> parse_path_patches(std::string_view data) {
  try {
    util::Reader r(data);
    const std::uint32_t n = r.count(8 + 8 + 8);
    std::vector<PathPatch> patches(n);
    for (auto& p : patches) {
      p.offset = r.u64();
      p.root_name = r.str();
      p.string_size = r.u64();
    }
    if (!r.done()) return std::nullopt;
    return patches;
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

std::string serialize_entry_head(const CacheEntry& e) {
  util::Writer w;
  w.u32(kEntryMagic);
  w.str(e.stdout_text);
  w.str(e.stderr_text);
  w.u32(static_cast<std::uint32_t>(e.outputs.size()));
  for (std::size_t i = 0; i + 1 < e.outputs.size(); ++i) {
    w.u8(static_cast<std::uint8_t>(e.outputs[i].type));
    w.str(e.outputs[i].data);
  }
  if (!e.outputs.empty()) {
    w.u8(static_cast<std::uint8_t>(e.outputs.back().type));
    w.u64(e.outputs.back().data.size());
  }
  return w.take();
}

std::string_view entry_body(const CacheEntry& e) {
  return e.outputs.empty() ? std::string_view() : std::string_view(e.outputs.back().data);
}

std::string serialize_entry(const CacheEntry& e) {
  std::string out = serialize_entry_head(e);
  out += entry_body(e);
  return out;
}

Decoded<CacheEntryView> view_entry(std::string_view data) {
  return parse(data, [&](util::Reader& r, CacheEntryView& e, std::uint64_t body_size) {
    if (r.remaining() != body_size) return false;
    if (!e.outputs.empty()) e.outputs.back().data = data.substr(data.size() - r.remaining());
    return true;
  });
}

Decoded<CacheEntryView> view_entry_head(std::string_view head, std::uint64_t body_size) {
  return parse(head, [&](util::Reader& r, CacheEntryView&, std::uint64_t recorded) {
    return r.done() && recorded == body_size;
  });
}

Decoded<CacheEntry> deserialize_entry(std::string_view data) {
  auto v = view_entry(data);
  if (!v) return v.error();
  CacheEntry e;
  for (const auto& o : v->outputs) e.outputs.push_back({o.type, std::string(o.data)});
  e.stdout_text = std::string(v->stdout_text);
  e.stderr_text = std::string(v->stderr_text);
  return e;
}

}  // namespace kache::core
