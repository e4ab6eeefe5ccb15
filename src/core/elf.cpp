#include "core/elf.hpp"

#include <elf.h>

#include <cstring>

namespace kache::core {

namespace {
// The section headers of an ELF file of class C (Elf32_/Elf64_ types).
template <typename Ehdr, typename Shdr>
std::optional<std::vector<ElfSection>> sections_of(std::string_view f) {
  Ehdr eh;
  if (f.size() < sizeof eh) return std::nullopt;
  std::memcpy(&eh, f.data(), sizeof eh);
  if (eh.e_shoff == 0) return std::vector<ElfSection>{};
  if (eh.e_shentsize != sizeof(Shdr) || eh.e_shoff > f.size()) return std::nullopt;
  auto header = [&](std::uint64_t i, Shdr& sh) {
    if (i > (f.size() - eh.e_shoff) / sizeof(Shdr)) return false;
    const std::uint64_t at = eh.e_shoff + i * sizeof(Shdr);
    if (f.size() - at < sizeof(Shdr)) return false;
    std::memcpy(&sh, f.data() + at, sizeof sh);
    return true;
  };
  Shdr first;
  if (!header(0, first)) return std::nullopt;
  // More than SHN_LORESERVE sections: the count and the name table's index live in section 0.
  const std::uint64_t count = eh.e_shnum != 0 ? eh.e_shnum : first.sh_size;
  const std::uint64_t names_index = eh.e_shstrndx == SHN_XINDEX ? first.sh_link : eh.e_shstrndx;
  if (count > (f.size() - eh.e_shoff) / sizeof(Shdr)) return std::nullopt;
  std::string_view names;
  Shdr table;
  if (header(names_index, table) && table.sh_offset <= f.size() && f.size() - table.sh_offset >= table.sh_size) {
    names = f.substr(table.sh_offset, table.sh_size);
  }
  std::vector<ElfSection> out;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    Shdr sh;
    if (!header(i, sh)) return std::nullopt;
    ElfSection s;
    s.type = sh.sh_type;
    s.flags = sh.sh_flags;
    // SHT_NOBITS (.bss) occupies no bytes of the file, wherever its offset points.
    s.offset = sh.sh_type == SHT_NOBITS ? 0 : sh.sh_offset;
    s.size = sh.sh_type == SHT_NOBITS ? 0 : sh.sh_size;
    s.entry_size = sh.sh_entsize;
    if (s.offset > f.size() || f.size() - s.offset < s.size) return std::nullopt;
    if (sh.sh_name < names.size()) {
      const std::string_view rest = names.substr(sh.sh_name);
      s.name = rest.substr(0, rest.find('\0'));
    }
    out.push_back(s);
  }
  return out;
}
}  // namespace

std::optional<std::vector<ElfSection>> elf_sections(std::string_view file) {
  if (file.size() < EI_NIDENT || std::memcmp(file.data(), ELFMAG, SELFMAG) != 0) return std::nullopt;
  // Objects of this machine's byte order only (kache compiles for the machine it runs on).
  if (file[EI_DATA] != ELFDATA2LSB) return std::nullopt;
  if (file[EI_CLASS] == ELFCLASS64) return sections_of<Elf64_Ehdr, Elf64_Shdr>(file);
  if (file[EI_CLASS] == ELFCLASS32) return sections_of<Elf32_Ehdr, Elf32_Shdr>(file);
  return std::nullopt;
}

bool is_debug_section(const ElfSection& section) { return section.name.starts_with(".debug_"); }

bool holds_strings(const ElfSection& section) { return (section.flags & SHF_STRINGS) != 0; }

std::vector<std::string_view> offload_bundle_entries(std::string_view bundle) {
  static constexpr std::string_view kMagic = "__CLANG_OFFLOAD_BUNDLE__";
  std::vector<std::string_view> entries;
  if (!bundle.starts_with(kMagic)) return entries;
  std::size_t at = kMagic.size();
  auto u64 = [&](std::uint64_t& v) {
    if (bundle.size() - at < sizeof v) return false;
    std::memcpy(&v, bundle.data() + at, sizeof v);
    at += sizeof v;
    return true;
  };
  std::uint64_t count = 0;
  if (!u64(count) || count > bundle.size()) return {};
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t offset = 0, size = 0, id_size = 0;
    if (!u64(offset) || !u64(size) || !u64(id_size) || id_size > bundle.size() - at) return {};
    at += id_size;
    if (offset > bundle.size() || size > bundle.size() - offset) return {};
    entries.push_back(bundle.substr(offset, size));
  }
  return entries;
}

bool has_compressed_sections(std::string_view object) {
  const auto sections = elf_sections(object);
  if (!sections) return false;
  for (const auto& s : *sections) {
    if ((s.flags & SHF_COMPRESSED) || s.name.starts_with(".zdebug")) return true;
  }
  return false;
}

bool is_lto_object(std::string_view object) {
  // A bitcode file ('BC' 0xC0DE), or one in the bitcode wrapper (0x0B17C0DE, little-endian).
  if (object.starts_with("BC\xC0\xDE") || object.starts_with("\xDE\xC0\x17\x0B")) return true;
  const auto sections = elf_sections(object);
  if (!sections) return false;
  for (const auto& s : *sections) {
    if (s.name.starts_with(".gnu.lto_") || s.name == ".llvmbc" || s.name.starts_with(".llvm.lto")) return true;
  }
  return false;
}

}  // namespace kache::core
