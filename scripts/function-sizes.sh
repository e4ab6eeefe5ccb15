#!/usr/bin/env bash
# Lists the functions in src/ longer than a threshold (80 lines by default), longest first, as clang-tidy's
# readability-function-size counts them (the body's lines, blank and comment lines included). Needs a
# configured build directory for its compile_commands.json. The flag tables (nvcc/flag_table.cpp,
# gcc/flag_table.cpp) are data and may exceed it.
#   bash scripts/function-sizes.sh [BUILD_DIR=build-test] [THRESHOLD=80] [FILES...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${1:-build-test}"
threshold="${2:-80}"
shift $(( $# > 2 ? 2 : $# ))
tidy="$(command -v clang-tidy-19 || command -v clang-tidy-14 || command -v clang-tidy)"
files=("$@")
[[ ${#files[@]} -gt 0 ]] || mapfile -t files < <(find src -name '*.cpp' | sort)
config="{CheckOptions: [{key: readability-function-size.LineThreshold, value: $threshold}]}"
printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -I{} "$tidy" --quiet --checks='-*,readability-function-size' --config="$config" -p "$build" {} 2>/dev/null |
  awk -v repo="$repo/" '
    /warning: function .* exceeds/ { match($0, /function \x27[^\x27]*\x27/); name = substr($0, RSTART + 10, RLENGTH - 11) }
    /note: [0-9]+ lines including whitespace/ {
      split($0, a, ": note: "); sub(repo, "", a[1]); split(a[2], n, " "); print n[1], a[1], name }' |
  sort -n -r || true
