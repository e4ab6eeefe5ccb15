#pragma once
// The preprocessed-mode fallback's reading of a compiler's preprocessed output (issue 39). A compile
// whose closure direct mode cannot record (a computed #include) is keyed by what its preprocessor
// printed. GCC's and clang's line markers (`# 12 "/w/p/src/h.h" 1 3`) name the files read, by the
// absolute path they were found at where a search directory or the source was absolute: those names
// are keyed by the path roots' fixed names, as the direct key names paths, so another build directory
// or checkout keys alike where direct mode would. Every other byte is keyed as printed: a __FILE__
// expansion, even one whose bytes the object does not keep (sizeof), keys the entry to its path.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/path_roots.hpp"

namespace kache::core {

// text with the name of each line marker that is an absolute path written in its key form
// (PathRoots::key_form: "/kache/src/h.h"); relative names and "<built-in>" are kept.
std::string keyed_line_markers(std::string_view text, const PathRoots& roots);

// The files the line markers say the preprocessor read, as it printed them, in order of first
// appearance: the main file (the output's first marker) and every file entered (flag 1). Not "<...>"
// names, nor a marker without flags (a #line directive's name, -g's working directory). nullopt when a
// name holds a '\\' (GCC's escape of a backslash, a quote or an unprintable byte), which this reader
// does not undo.
std::optional<std::vector<std::string>> line_marker_files(std::string_view text);

}  // namespace kache::core
