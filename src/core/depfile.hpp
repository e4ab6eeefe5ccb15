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

}  // namespace kache::core
