#pragma once
// The section headers of an ELF object, read from its bytes with every offset checked (objects come
// from compilers kache runs, and from entries another machine stored): which sections the compiler
// wrote, where they lie, and whether a path could be hidden inside one (compressed, LTO, bitcode).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kache::core {

struct ElfSection {
  std::string_view name;  // into the file's bytes; empty when the name table does not hold it
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t offset = 0;  // in the file; offset + size lies within it (SHT_NOBITS: size 0)
  std::uint64_t size = 0;
  std::uint64_t entry_size = 0;
};

// Every section of an ELF file of this machine's byte order (32 or 64 bits), in header order; nullopt
// for anything else, or when a header or a section's bytes lie outside the file.
std::optional<std::vector<ElfSection>> elf_sections(std::string_view file);

// Whether the section is DWARF debug information (".debug_*"; ".zdebug_*" are compressed).
bool is_debug_section(const ElfSection& section);
// Whether the section holds NUL-terminated strings referred to by offset (SHF_STRINGS: .debug_str,
// .debug_line_str), so a string there may end before the NUL it had and be followed by more NULs.
bool holds_strings(const ElfSection& section);

// The code objects of a clang offload bundle (hipcc's .hip_fatbin: "__CLANG_OFFLOAD_BUNDLE__", the
// number of entries, then each entry's offset and size within the bundle and its target's name, as
// clang's ClangOffloadBundler documentation describes it), as views into bundle; empty for anything
// else (a compressed bundle, "CCOB", included) or when an entry lies outside the bytes.
std::vector<std::string_view> offload_bundle_entries(std::string_view bundle);

// Whether an ELF object has a compressed section (SHF_COMPRESSED, or a .zdebug* section of the older
// GNU scheme): a placeholder in it cannot be replaced in place, nor a root in it found by a scan.
// False for anything that is not ELF.
bool has_compressed_sections(std::string_view object);

// Whether the object carries link-time-optimization code: GCC's .gnu.lto_* sections (zstd/zlib
// compressed), LLVM bitcode (a raw or wrapped bitcode file, clang -flto; or .llvmbc/.llvm.lto sections
// in an ELF object). Paths inside (__FILE__, the IR's locations) are invisible to a byte scan and
// cannot be replaced in place.
bool is_lto_object(std::string_view object);

}  // namespace kache::core
