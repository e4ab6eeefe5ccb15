#!/usr/bin/env python3
"""Lists the longest function bodies in kache's C++ sources, largest first.

    python3 scripts/function-sizes.py            the 15 longest functions under src/
    python3 scripts/function-sizes.py -n 5 FILE  the 5 longest in FILE
    python3 scripts/function-sizes.py --max 80   fails (status 1) on any function under src/ longer than
                                                 80 lines, the declarative tables (TABLES) excepted;
                                                 tests/integration/test_house.py runs it in CI
    python3 scripts/function-sizes.py --max 80 --warn 60
                                                 the same, and prints (without failing) the functions
                                                 longer than 60 lines: the next to split, listed before
                                                 the bound bites

A function's size is its lines from the signature's first line to the closing brace, blanks and
comments included (what clang-tidy's readability-function-size calls LineThreshold, plus the
signature). Lambdas count towards the function they are written in. The parse is lexical: it skips
comments, string and character literals (raw strings too) and treats a '{' as a function body when it
follows a ')' (and qualifiers or a constructor's initializer list) outside any other function.
"""
import argparse
import pathlib
import re
import sys

# Functions that are data: a table of rows, one per option, read by a matcher elsewhere. Splitting them
# would only scatter the table.
TABLES = {("src/compiler/gcc/flag_table.cpp", "base_rows"), ("src/compiler/nvcc/flag_table.cpp", "build_table")}

NOT_FUNCTIONS = re.compile(r"^\s*(namespace|struct|class|union|enum|extern|template\s*<[^>]*>\s*(struct|class))\b")


def strip(text):
    """The text with comments and literals blanked, newlines kept (so line numbers stay right)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            j = text.find(")" + delim + '"', open_paren)
            j = n if j < 0 else j + len(delim) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c == "'" and is_digit_separator(text, i):
            out.append(c)
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_digit_separator(text, i):
    """Whether the ' at i separates digits of a number (C++14: 20'000, 0xFF'FF), not a character literal
    (u8'x', L'x'): the token it is in starts with a digit and a digit-like character follows."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "'._"):
        j -= 1
    return j < i and text[j].isdigit() and i + 1 < len(text) and text[i + 1].isalnum()


def is_function_head(head):
    head = head.strip()
    if not head or NOT_FUNCTIONS.match(head) or head.endswith("=") or "(" not in head:
        return False
    if re.search(r"\b(if|for|while|switch|catch|do|else|return)\b\s*\(?", head.split("(")[0]):
        return False
    # "... ) const", "... ) noexcept", "... ) -> T", "Name(args) : a_(x), b_(y)"
    tail = head[head.rfind(")") + 1:] if ")" in head else ""
    return bool(re.fullmatch(r"\s*(const|noexcept|override|final|mutable|&|&&|\s)*(->\s*[\w:<>,\s*&]+)?\s*", tail)) or \
        bool(re.match(r"\s*:\s*\w", tail))


def functions(path):
    text = strip(path.read_text(errors="replace"))
    stack = []  # one entry per open brace: (is_function, start_line)
    head_start = 0
    result = []
    for i, c in enumerate(text):
        if c == "{":
            in_function = any(f for f, _ in stack)
            head = text[head_start:i]
            if not in_function and is_function_head(head):
                first = head_start + (len(head) - len(head.lstrip()))
                name = re.findall(r"([~\w:]+)\s*\(", head)
                stack.append((True, (text.count("\n", 0, first) + 1, name[0] if name else "?")))
            else:
                stack.append((False, None))
            head_start = i + 1
        elif c == "}":
            if stack:
                is_fn, info = stack.pop()
                if is_fn:
                    start, name = info
                    end = text.count("\n", 0, i) + 1
                    result.append((end - start + 1, name, start, end))
            head_start = i + 1
        elif c == ";" or (c == ":" and text[i - 1:i + 1] != "::" and text[i:i + 2] != "::" and
                          re.search(r"\b(public|private|protected)\s*$", text[head_start:i])):
            head_start = i + 1
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="how many to list")
    ap.add_argument("--max", type=int, help="list only the functions longer than MAX lines (tables excepted); "
                    "exit status 1 when there is one")
    ap.add_argument("--warn", type=int, help="with --max: also list, without failing, the functions longer than "
                    "WARN lines (tables excepted)")
    ap.add_argument("paths", nargs="*", help="files or directories (default: src/)")
    args = ap.parse_args()
    root = pathlib.Path(__file__).resolve().parent.parent
    paths = [pathlib.Path(p) for p in args.paths] or [root / "src"]
    files = []
    for p in paths:
        files += sorted(p.rglob("*.[ch]pp")) if p.is_dir() else [p]
    rows = []
    for f in files:
        for size, name, start, end in functions(f):
            rel = f.resolve().relative_to(root) if f.resolve().is_relative_to(root) else f
            rows.append((size, f"{rel}:{start}-{end}", name))
    rows.sort(key=lambda r: (-r[0], r[1]))
    if args.max is not None:
        measured = [r for r in rows if (r[1].split(":")[0], r[2]) not in TABLES]
        over = [r for r in measured if r[0] > args.max]
        for size, where, name in over:
            print(f"{size:5d}  {name}  {where}: longer than {args.max} lines")
        if args.warn is not None:
            for size, where, name in (r for r in measured if args.warn < r[0] <= args.max):
                print(f"{size:5d}  {name}  {where}: longer than {args.warn} lines, the next to split")
        return 1 if over else 0
    for size, where, name in rows[:args.n]:
        print(f"{size:5d}  {name}  {where}")


if __name__ == "__main__":
    sys.exit(main())
