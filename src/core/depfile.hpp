#pragma once
// Make-syntax dependency files as nvcc/GCC write them ("target : dep \\\n    dep ...").
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

struct Depfile {
  std::vector<std::string> targets;
  std::vector<std::string> deps;  // unescaped, in file order, duplicates removed
};

// Throws std::runtime_error if the text is not a dependency file. Only the first rule's deps are read
// (later rules are -MP's phony targets), unless all_rules: then every rule's, for a listing with one
// rule per compile (clang -M over HIP offload targets writes one rule per target and one for the host).
Depfile parse_depfile(const std::string& text, bool all_rules = false);

// The first rule's target, as the compiler wrote it (verbatim, as -MT gives it), replaced by a
// placeholder, and the placeholder by another build's target: the target follows the output path,
// which a shared entry must not fix. Text not starting with the target is returned unchanged.
std::string templatize_target(const std::string& text, const std::string& target);
std::string instantiate_target(const std::string& text, const std::string& target);

// How a compiler wraps a dependency file's lines: GCC (libcpp mkdeps) at 72 columns counting escaped
// names, clang (DependencyFile.cpp) at 75 counting unescaped ones, each with its own continuation
// indent. -MP rules follow one a line (GCC, clang 19: clang75_packed) or each after a blank line
// (clang 14). A restore elsewhere re-wraps with it, as the compiler there would: the roots' lengths
// differ, and tools other than make may compare the text.
enum class DepfileLayout { gcc72, clang75, clang75_packed };
std::string_view layout_name(DepfileLayout layout);
std::optional<DepfileLayout> parse_layout_name(std::string_view name);

struct DepfileWord {
  std::string text;            // as written, escapes kept
  std::size_t unescaped_size;  // its length once make's escapes ("\ ", "\#", "$$") are undone
  bool operator==(const DepfileWord&) const = default;
};

// One rule ("targets: deps") and the empty rules -MP adds ("dep:"), in file order.
struct DepfileRules {
  std::vector<DepfileWord> targets;
  std::vector<DepfileWord> deps;
  std::vector<std::string> phony_targets;
  bool operator==(const DepfileRules&) const = default;
};

// nullopt when the text is not one rule followed only by empty rules.
std::optional<DepfileRules> tokenize_depfile(std::string_view text);
std::string render_depfile(const DepfileRules& rules, DepfileLayout layout);
// Whether render(tokenize(text), layout) == text.
bool layout_reproduces(std::string_view text, DepfileLayout layout);
// The first of the candidates that reproduces the text exactly, or nullopt. A short file with no
// wrapped line and no -MP rules is reproduced by every layout: the compiler names the candidates.
std::optional<DepfileLayout> depfile_layout_of(std::string_view text, const std::vector<DepfileLayout>& candidates);
// The text re-wrapped with the layout; unchanged when it cannot be tokenized.
std::string rewrap_depfile(const std::string& text, DepfileLayout layout);

}  // namespace kache::core
