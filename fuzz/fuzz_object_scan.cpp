// Fuzzes the readers of compiler output that kache scans and patches (issue 35): ELF section headers,
// nvcc fat binaries, and the debug placeholders found and replaced in an object.
// Input: the bytes of an object.
// Properties:
//  - every section elf_sections returns lies within the bytes;
//  - every placeholder found lies within the bytes; restoring them for a checkout keeps the object's
//    size, and restoring the same patches twice fails (no placeholder is left where one was).
#include <cstdint>
#include <string>
#include <string_view>

#include "core/elf.hpp"
#include "core/fatbin.hpp"
#include "core/path_roots.hpp"
#include "fuzz_check.hpp"

using namespace kache;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (const auto sections = core::elf_sections(bytes)) {
    for (const auto& s : *sections) KACHE_FUZZ_CHECK(s.offset <= size && size - s.offset >= s.size);
  }
  (void)core::has_compressed_sections(bytes);
  (void)core::is_lto_object(bytes);
  (void)core::read_compressed_device_code(bytes, [](std::string_view) {});
  const core::PathRoots roots({{"/w/proj", "/kache/build"}, {"/w/proj/src", "/kache/src"}});
  const auto found = roots.find_placeholders(bytes);
  for (const auto* list : {&found.roots, &found.siblings}) {
    for (const auto& p : *list) KACHE_FUZZ_CHECK(p.offset < size);
  }
  std::string object(bytes);
  if (core::apply_path_patches(object, found.roots, roots)) {
    KACHE_FUZZ_CHECK(object.size() == size);
    if (!found.roots.empty()) KACHE_FUZZ_CHECK(!core::apply_path_patches(object, found.roots, roots));
  }
  return 0;
}
