#pragma once
// Make-syntax dependency files as nvcc/GCC write them ("target : dep \\\n    dep ...").
#include <string>
#include <vector>

namespace kache::core {

struct Depfile {
  std::vector<std::string> targets;
  std::vector<std::string> deps;  // unescaped, in file order, duplicates removed
};

// Throws std::runtime_error if the text is not a dependency file.
Depfile parse_depfile(const std::string& text);

// The first rule's target, as the compiler wrote it (verbatim, as -MT gives it), replaced by a
// placeholder, and the placeholder by another build's target: the target follows the output path,
// which a shared entry must not fix. Text not starting with the target is returned unchanged.
std::string templatize_target(const std::string& text, const std::string& target);
std::string instantiate_target(const std::string& text, const std::string& target);

}  // namespace kache::core
