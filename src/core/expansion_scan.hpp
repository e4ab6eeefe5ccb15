#pragma once
// Text scans of the files a compile read for what the compiler expands without a dependency list
// saying so: paths of the build (__FILE__ and its kin), and names built by token pasting (##). Each
// over-approximates: a false match costs sharing or a direct-mode record, a missed one would serve an
// object made for another path.
#include <string>
#include <string_view>
#include <vector>

namespace kache::core {

// How a file's text may make the compiler expand a path of the build into what it compiles: __FILE__,
// __BASE_FILE__, __builtin_FILE(), std::source_location, #line. The expansion's bytes may vanish from
// the object (sizeof(__FILE__), a constexpr hash, a length folded into code), so the object scan
// cannot see it; the entry is keyed by the roots of the files whose names may have been expanded
// (engine/miss.cpp add_expanded_roots says which, and why the toolchain's own headers are not scanned).
// Matched in comments and strings too, and on the text as the compiler splices its lines: a false
// match only costs sharing. __FILE_NAME__ and __builtin_FILE_NAME() are not matched: they expand to
// the file's base name, which the key holds (every closure file is keyed by its path below its root).
struct PathExpansion {
  bool here = false;  // the file's own name: __FILE__ in code, a #line directive
  bool base = false;  // the main source's name: __BASE_FILE__
  // Any file's name: __builtin_FILE / source_location (a default argument takes the caller's location),
  // or __FILE__ in a directive this scan cannot read (no plain #define; a line a comment closed on).
  bool anywhere = false;
  // Macros whose #define body holds __FILE__: they expand it where they are used (scan_macro_uses).
  std::vector<std::string> macros;
  std::string_view spelling;  // the first found, for explain ("__FILE__", "#line", ...)
  bool any() const { return here || base || anywhere || !macros.empty(); }
};
PathExpansion scan_path_expansions(std::string_view text);

// What a file's text may build with the preprocessor's paste operator (## or its digraph %:%:) out of
// pieces that no scan for a whole word sees: `#define CAT(a, b) a##b` used as CAT(__has_, include)
// or CAT(__FI, LE__). Pieces are identifiers of three characters or more that are part of a word a scan
// looks for, where a paste can take them: a ## operand, a macro argument, the first or last token of a
// #define's body (a name pasted only from pieces of one or two characters is not seen: every word here
// has 8 characters or more, so that takes four pieces or more, which no code but a test of kache
// writes). Combined over every project file of the compile with `|=`; may_build() then says whether a
// paste may have built such a word.
struct PasteScan {
  bool operand_piece = false;     // a ## operand written as a piece of a word
  bool pastes_parameter = false;  // a ## operand is a macro parameter (or the line is no plain #define)
  bool argument_piece = false;    // a piece written where it can reach a parameter: an argument, a body's end
  PasteScan& operator|=(const PasteScan& o) {
    operand_piece |= o.operand_piece;
    pastes_parameter |= o.pastes_parameter;
    argument_piece |= o.argument_piece;
    return *this;
  }
  bool may_build() const { return operand_piece || (pastes_parameter && argument_piece); }
};
struct PasteScans {
  PasteScan has_include;  // __has_include, __has_include_next, __has_embed and wrappers named *has_include
  PasteScan path;         // the words of scan_path_expansions
};
// has_include pieces count in directive lines only (__has_include works only in #if); path pieces in
// macro arguments of ordinary code too.
PasteScans scan_pastes(std::string_view text);

// Where a file uses `macros` (the path macros found so far): a use in code or an #if expands the macro
// in this file; one in another #define body makes that macro a path macro too; one in a directive this
// scan cannot read may be either. Pastes are weighed with the macros' names as the words (a paste may
// build WHERE as well as __FILE__).
struct MacroUses {
  bool uses = false;
  bool anywhere = false;
  std::vector<std::string> defines;
  PasteScan pastes;
};
MacroUses scan_macro_uses(std::string_view text, const std::vector<std::string>& macros);

// text with its lines spliced as the compiler's translation phase 2 does: a backslash followed by
// blanks and a newline (GCC and clang accept the blanks) is removed, and with `trigraphs` "??/" in
// place of the backslash as well (GCC and clang read trigraphs in the ISO modes). Names the raw text
// splits (`__FI\<newline>LE__`, `__has_\<newline>include`) read whole in the result.
std::string splice_lines(std::string_view text, bool trigraphs);
// Whether splice_lines(text, trigraphs) would change text.
bool has_line_splice(std::string_view text, bool trigraphs);

}  // namespace kache::core
