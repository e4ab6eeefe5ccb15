#pragma once
// The one format of kache's flag tables. A compiler's table is a list of rows; each row names the
// spellings of one option, the ways its value may be written (the forms below), what it means for
// caching (an effect of that compiler's own) and, when refused, the stable passthrough reason. The
// matching is the same for every table (match_row), so a driver that extends another's flags (nvcc and
// clang's offload modes build on the GCC-compatible flags, as sccache's tables do) adds rows and
// effects, never a parser.
//
// Also here: the pieces shared by the checks of option lists one driver forwards to another tool
// (nvcc -Xcompiler, -Xptxas): how such a value is split, quotes, machine-resolved values.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kache::compiler {

// How a spelling may meet an argument (bit set). No bit: the argument is exactly the spelling.
enum Form : unsigned {
  kSeparate = 1u << 0,  // the spelling alone, its value in the next argument ("-o out.o")
  kEquals = 1u << 1,    // "spelling=value" ("--param=x=1", nvcc's "--output-file=out.o")
  kAttached = 1u << 2,  // the value glued on ("-Iinclude", "-O3"); single-dash spellings only
  kWhole = 1u << 3,     // the spelling starts the argument, which is one argument whatever follows
};

// The shapes GCC-compatible rows are written in (one spelling each), as form bits.
enum class Shape {
  Exact,     // the argument is exactly the name
  Prefix,    // the name starts the argument; nothing else is consumed. Kept (not refused) only for
             // "name=value" and "name,list" spellings (the name ends in '=' or ',')
  Family,    // like Prefix, for a documented open family of options (-W..., -m..., -fno-...)
  Value,     // the name with its value attached, or the name alone and the value in the next argument
  Separate,  // the name alone, its value in the next argument ("--param" also takes "--param=v")
};

constexpr unsigned forms_of(Shape s) {
  switch (s) {
    case Shape::Exact: return 0;
    case Shape::Prefix:
    case Shape::Family: return kWhole;
    case Shape::Value: return kSeparate | kAttached;
    case Shape::Separate: return kSeparate | kEquals;
  }
  return 0;
}

// How one argument matched a row. Row: any type with spellings() (its names) and match_forms() (Form bits).
template <typename Row>
struct RowMatch {
  const Row* row = nullptr;
  std::string_view name;  // the spelling that matched
  // kSeparate: the argument is exactly the spelling (its value, if it takes one, is the next argument);
  // kEquals / kAttached: the value is in `value`; kWhole: the argument is the whole option.
  Form form = kSeparate;
  std::optional<std::string_view> value;
};

// The one matching rule: an exact spelling first (the first row naming it); otherwise the longest
// spelling that starts the argument and accepts what follows it ('=' for kEquals, anything for kAttached
// on a single-dash spelling or kWhole), so "-fprofile-use=x" meets -fprofile-use, "-include-pch" is not
// "-include" with the value "-pch", "-lineinfo" is not "-l ineinfo" and "-Ofc" is not "-O fc".
template <typename Row>
std::optional<RowMatch<Row>> match_row(const std::vector<Row>& table, std::string_view arg) {
  for (const Row& row : table) {
    for (std::string_view n : row.spellings()) {
      if (arg == n) return RowMatch<Row>{&row, n, row.match_forms() & kWhole ? kWhole : kSeparate, std::nullopt};
    }
  }
  std::optional<RowMatch<Row>> best;
  for (const Row& row : table) {
    const unsigned forms = row.match_forms();
    for (std::string_view n : row.spellings()) {
      if (arg.size() <= n.size() || !arg.starts_with(n) || (best && n.size() <= best->name.size())) continue;
      if ((forms & kEquals) && arg[n.size()] == '=') {
        best = RowMatch<Row>{&row, n, kEquals, arg.substr(n.size() + 1)};
      } else if ((forms & kAttached) && !n.starts_with("--")) {
        best = RowMatch<Row>{&row, n, kAttached, arg.substr(n.size())};
      } else if (forms & kWhole) {
        best = RowMatch<Row>{&row, n, kWhole, std::nullopt};
      }
    }
  }
  return best;
}

// ---- Option lists forwarded to another tool --------------------------------------------------------

// The refusal for the first offending flag inside a forwarded value.
struct FlagRefusal {
  std::string reason;
  std::string flag;  // the offending flag inside the value
};

// A deny rule for a tool kache has no table for (ptxas): the flag exactly, or every flag it starts.
enum class Match { Exact, Prefix };
struct ForwardRule {
  std::string_view flag;
  Match match;
  std::string_view reason;
};
bool rule_matches(const ForwardRule& r, std::string_view flag);

// A token as the tool sees it: quotes a shell would remove do not hide a flag.
std::string_view unquote(std::string_view t);
// "native" (-arch=native) or "…=native" (-march=native): a value resolved from the build machine.
bool is_machine_native(std::string_view value);
// Splits a forwarded option value the way it reaches the tool: on commas (nvcc's list separator) and
// whitespace (the tool's command line is re-split by a shell).
std::vector<std::string_view> split_option_list(std::string_view value);

}  // namespace kache::compiler
