"""Checks of the house that no reviewer should have to repeat by eye: every function under src/ is at most
80 lines (the flag tables excepted), measured by scripts/function-sizes.py, which must see every
function (C++ digit separators such as 20'000 once made it stop reading a file); the shell completions
are what the option table generates and offer exactly the options each command's `--help` lists, every
subcommand and the compilers install.cmake links (in bash and, where it is installed, an interactive zsh);
the manual page lists every row of the table; and the opening comments of src/ describe the tree as it
is, as ARCHITECTURE.md does.
"""
import os
import pathlib
import pty
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from kachetest import KACHE, SOURCE_DIR

SIZES = os.path.join(SOURCE_DIR, "scripts", "function-sizes.py")
MAX_LINES = 80
WARN_LINES = 60  # listed in CI's log as the next to split, before the bound bites


def function_of(lines, name="planted", prefix=""):
    """A C++ file whose function `name` spans `lines` lines, signature and closing brace included."""
    body = "".join(f"  total += {i};\n" for i in range(lines - 3))
    return f"{prefix}int {name}(int total) {{\n{body}  return total;\n}}\n"


class FunctionSizes(unittest.TestCase):
    def sizes(self, *args):
        return subprocess.run([sys.executable, SIZES] + list(args), capture_output=True, text=True)

    def planted(self, text):
        d = tempfile.mkdtemp(prefix="kache-sizes-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        path = os.path.join(d, "planted.cpp")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_every_function_in_src_is_within_the_bound(self):
        r = self.sizes("--max", str(MAX_LINES), "--warn", str(WARN_LINES))
        self.assertEqual(r.returncode, 0, "functions longer than 80 lines (split them into steps):\n" + r.stdout)
        # The functions between the two bounds, printed to the test's log (CI's) without failing it.
        sys.stderr.write("\nfunctions over %d lines (the next to split):\n%s" % (WARN_LINES, r.stdout))

    def test_functions_over_the_warning_bound_are_listed_without_failing(self):
        r = self.sizes("--max", str(MAX_LINES), "--warn", str(WARN_LINES), self.planted(function_of(WARN_LINES + 1)))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("planted", r.stdout)
        self.assertIn("next to split", r.stdout)
        r = self.sizes("--max", str(MAX_LINES), "--warn", str(WARN_LINES), self.planted(function_of(WARN_LINES)))
        self.assertEqual((r.returncode, r.stdout), (0, ""))

    def test_a_planted_function_of_81_lines_fails_and_80_passes(self):
        self.assertEqual(self.sizes("--max", str(MAX_LINES), self.planted(function_of(MAX_LINES))).returncode, 0)
        r = self.sizes("--max", str(MAX_LINES), self.planted(function_of(MAX_LINES + 1)))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("planted", r.stdout)

    def test_digit_separators_are_not_character_literals(self):
        # `20'000` opened a "character literal" that swallowed the rest of the file (run_doctor, 81
        # lines after kDefaultRocmProbeTimeoutMs = 20'000, was never measured).
        text = "constexpr int kBig = 20'000;\nconstexpr unsigned kMask = 0xFF'FF'u;\nchar c = u8'x';\n"
        r = self.sizes("--max", str(MAX_LINES), self.planted(text + function_of(MAX_LINES + 1)))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)

    def test_run_doctor_is_measured(self):
        r = self.sizes("-n", "100000", os.path.join(SOURCE_DIR, "src", "commands", "doctor.cpp"))
        self.assertRegex(r.stdout, r"\brun_doctor\b")


def options_of_help(text):
    """The option spellings a --help lists: each line of its "Options:" section opens with them, as
    CLI11 prints them and the table prints doctor's and explain's ("  -s,--show-stats  Print ...",
    "  --nvcc PATH  The nvcc ...", "  -- COMPILER ARGS...  The compile ...")."""
    section = text.split("Options:\n", 1)[1]
    found = set()
    for line in section.splitlines():
        m = re.match(r"  (-[^\s]*)", line)
        if not line.strip() or (not m and not line.startswith("   ")):
            break  # the end of the section (a blank line, or the footer)
        if m:
            found |= set(m.group(1).split(","))
    return found


def subcommands_of_help(text):
    """The subcommands `kache --help` shows under "Diagnostics:" ("  kache doctor [--json]  ...")."""
    section = text.split("Diagnostics:\n", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\s+kache (\w+)", section, re.M))


class Completions(unittest.TestCase):
    """The completions in completions/ are generated from the option table (`kache --print-completion
    SHELL`), which also gives every command's parser and --help: the checked-in files must be what the
    binary writes, and what they offer must be what each --help lists."""
    SHELLS = {"bash": "kache.bash", "zsh": "_kache"}

    def kache(self, *args):
        r = subprocess.run([KACHE] + list(args), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def expected(self):
        """What each completion context must offer: kache's and each subcommand's --help, install.cmake."""
        top = self.kache("--help")
        with open(os.path.join(SOURCE_DIR, "cmake", "install.cmake")) as f:
            compilers = set(re.search(r"set\(KACHE_MASQUERADE_NAMES ([^)]*)\)", f.read()).group(1).split())
        subcommands = subcommands_of_help(top)
        self.assertEqual(subcommands, {"doctor", "explain", "report", "worker"})
        options = {name: options_of_help(self.kache(name, "--help")) for name in subcommands}
        return options_of_help(top), compilers, options

    def test_checked_in_completions_are_what_the_table_generates(self):
        for shell, name in self.SHELLS.items():
            with open(os.path.join(SOURCE_DIR, "completions", name)) as f:
                checked_in = f.read()
            self.assertEqual(checked_in, self.kache("--print-completion", shell),
                             f"completions/{name} is not what the option table gives: regenerate it with "
                             f"`kache --print-completion {shell} > completions/{name}`")

    def test_every_help_lists_the_options_of_its_command(self):
        top, _, options = self.expected()
        self.assertGreater(len(top), 20, "kache --help lists its options")
        self.assertIn("--recompress", top)
        self.assertTrue({"--server", "--work-dir", "--nvcc", "--property"} <= options["worker"], options["worker"])
        self.assertTrue({"-ccbin", "--probe-timeout", "--hipcc"} <= options["doctor"], options["doctor"])
        self.assertTrue({"--", "--closure", "--last"} <= options["explain"], options["explain"])

    def test_every_row_of_the_option_table_is_in_help_and_both_completions(self):
        # Issue 42: `kache worker`'s options were once missing from the completions. Each row of the
        # table (`kache --list-options`) is checked where a person meets it: its command's --help, what
        # bash offers after the command, and the command's block of the zsh script.
        with open(os.path.join(SOURCE_DIR, "completions", "_kache")) as f:
            zsh = f.read()
        rows = [line.split("\t") for line in self.kache("--list-options").splitlines()]
        self.assertTrue({"worker", "report", "doctor", "explain", ""} <= {row[0] for row in rows})
        helps, bash, zsh_blocks = {}, {}, {}
        for command, spellings, _, _ in rows:
            if command not in helps:
                helps[command] = options_of_help(self.kache(*([command] if command else []), "--help"))
                bash[command] = self.complete_bash(*([command, ""] if command else ["-s", ""]))
                block = re.search(rf"\n    {re.escape(command or '-*')}\) [^\n]*?_arguments (.*?) ;;", zsh, re.S)
                zsh_blocks[command] = set(re.findall(r"'\*?(--?[\w-]*)\[", block.group(1)))
            for name in spellings.split(","):
                where = f"kache {command} {name}".replace("  ", " ")
                self.assertIn(name, helps[command], f"{where}: not in --help")
                self.assertIn(name, bash[command], f"{where}: not in the bash completion")
                self.assertIn(name, zsh_blocks[command], f"{where}: not in the zsh completion")

    def complete_bash(self, *words, cwd=None):
        """What bash offers for `kache WORDS...` (the last word being the one completed), with the
        checked-in script and bash's completion variables set as readline sets them."""
        line = " ".join(shlex.quote(w) for w in ("kache",) + words)
        script = (f"source {shlex.quote(os.path.join(SOURCE_DIR, 'completions', 'kache.bash'))}\n"
                  f"COMP_WORDS=({line}); COMP_CWORD={len(words)}\n"
                  '_kache; printf "%s\\n" "${COMPREPLY[@]}"\n')
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True,
                           cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        return set(r.stdout.split())

    def test_bash_completion_offers_what_help_lists(self):
        top, compilers, options = self.expected()
        self.assertEqual(self.complete_bash(""), top | compilers | set(options))
        self.assertEqual(self.complete_bash("-s", ""), top)
        for name, listed in options.items():
            self.assertEqual(self.complete_bash(name, ""), listed, name)
            self.assertEqual(self.complete_bash(name, "--json" if name != "worker" else "--instance", "x", ""),
                             listed, name)

    def test_bash_completes_paths_after_a_path_option_and_nothing_after_a_value(self):
        d = tempfile.mkdtemp(prefix="kache-complete-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        pathlib.Path(d, "build.html").write_text("")
        for words in (("report", "--html", "bu"), ("worker", "--work-dir", "bu"), ("doctor", "--nvcc", "bu")):
            self.assertEqual(self.complete_bash(*words, cwd=d), {"build.html"}, words)
        for words in (("-M", ""), ("-s", "--set-config", ""), ("worker", "--server", ""), ("report", "--since", "")):
            self.assertEqual(self.complete_bash(*words, cwd=d), set(), words)
        # After explain's --, and after a compiler's name, the words are the compile's.
        self.assertEqual(self.complete_bash("explain", "--", "nvcc", "bu", cwd=d), {"build.html"})
        self.assertEqual(self.complete_bash("g++", "bu", cwd=d), {"build.html"})

    def test_zsh_completion_offers_what_help_lists(self):
        with open(os.path.join(SOURCE_DIR, "completions", "_kache")) as f:
            text = f.read()
        top, compilers, options = self.expected()
        self.assertEqual(set(re.search(r"'options:kache option:\(([^)]*)\)'", text).group(1).split()), top)
        self.assertEqual(set(re.search(r"'compilers:compiler:\(([^)]*)\)'", text).group(1).split()), compilers)
        self.assertEqual(set(re.search(r"'subcommands:subcommand:\(([^)]*)\)'", text).group(1).split()),
                         set(options))
        blocks = dict(options, **{"-*": top})
        for name, want in blocks.items():
            block = re.search(rf"\n    {re.escape(name)}\) [^\n]*?_arguments (.*?) ;;", text, re.S).group(1)
            self.assertEqual(set(re.findall(r"'\*?(--?[\w-]*)\[", block)), want, name)
        if shutil.which("zsh"):
            r = subprocess.run(["zsh", "-n", os.path.join(SOURCE_DIR, "completions", "_kache")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)


class ManualPage(unittest.TestCase):
    def test_the_built_manual_page_lists_every_row_of_the_option_table(self):
        # cmake/man.cmake makes its COMMANDS section from `kache --list-options`; OPTIONS is help2man's
        # reading of `kache --help`. The page is built beside kache unless KACHE_MAN is off.
        page = os.path.join(os.path.dirname(KACHE), "man", "kache.1")
        if not os.path.exists(page) or not shutil.which("man"):
            self.skipTest("no manual page built beside kache")
        r = subprocess.run(["man", "-E", "ascii", "-l", page], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="200", LC_ALL="C"))
        self.assertEqual(r.returncode, 0, r.stderr)
        commands = r.stdout.split("\nCOMMANDS\n", 1)[1]
        rows = subprocess.run([KACHE, "--list-options"], capture_output=True, text=True, check=True).stdout
        self.assertGreater(len(rows.splitlines()), 40)
        for row in rows.splitlines():
            command, spellings, value, _ = row.split("\t")
            # A subcommand's rows stand under its own heading ("   kache doctor"), before the next one.
            where = r.stdout if command == "" else commands.split(f"kache {command}\n", 1)[1].split("\n   kache ")[0]
            for name in spellings.split(","):
                self.assertRegex(where, rf"(?<![\w-]){re.escape(name)}(?![\w-])", f"kache {command} {name}")


class RemoteKinds(unittest.TestCase):
    """Every kind of remote store is named where a new user looks (issue 42): --help, --version, the
    manual page and the Debian package's description."""
    KINDS = ("redis://", "http://", "https://", "s3://", "file://")

    def assert_names_every_kind(self, text, where):
        for kind in self.KINDS:
            self.assertIn(kind, text, f"{where} does not name {kind} remotes")

    def test_help_and_version(self):
        for option in ("--help", "--version"):
            r = subprocess.run([KACHE, option], capture_output=True, text=True, check=True)
            self.assert_names_every_kind(r.stdout, f"kache {option}")

    def test_manual_page_source_and_built_page(self):
        with open(os.path.join(SOURCE_DIR, "man", "kache.h2m")) as f:
            self.assert_names_every_kind(f.read(), "man/kache.h2m")
        page = os.path.join(os.path.dirname(KACHE), "man", "kache.1")
        if os.path.exists(page):
            with open(page) as f:
                self.assert_names_every_kind(f.read().replace("\\-", "-"), page)

    def test_debian_package_description(self):
        with open(os.path.join(SOURCE_DIR, "cmake", "install.cmake")) as f:
            text = f.read()
        description = re.search(r'set\(CPACK_PACKAGE_DESCRIPTION "(.*?)"\)', text, re.S).group(1)
        self.assert_names_every_kind(description, "the .deb description")


class ZshCompletion(unittest.TestCase):
    """The zsh completion as zsh runs it, in an interactive zsh on a pseudo-terminal (skipped without
    zsh): the subcommands' options are offered after the subcommand's name (the completion once handed
    `doctor` to _arguments as an argument, which then offered nothing)."""

    def typed(self, line, want):
        """What an interactive zsh shows after `line` and a tab, read until `want` appears (or 30 s)."""
        pid, fd = pty.fork()
        if pid == 0:
            os.execvpe("zsh", ["zsh", "-f", "-i"], dict(os.environ, TERM="dumb", PS1="> "))
        setup = (f"fpath=({shlex.quote(os.path.join(SOURCE_DIR, 'completions'))} $fpath); autoload -Uz compinit; "
                 "compinit -u -D; setopt autolist nolistambiguous; kache() {}; print READY\n")
        os.write(fd, setup.encode())
        text = self.read_until(fd, "READY\r\n")
        os.write(fd, (line + "\t").encode())
        text = self.read_until(fd, want)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
        return text

    def read_until(self, fd, want):
        text, deadline = "", time.monotonic() + 30
        while want not in text and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    text += os.read(fd, 65536).decode(errors="replace")
                except OSError:
                    break
        return text

    def setUp(self):
        if not shutil.which("zsh"):
            self.skipTest("no zsh")

    def test_zsh_offers_a_subcommands_options_and_paths(self):
        self.assertIn("--probe-timeout", self.typed("kache doctor --", "--probe-timeout"))
        self.assertIn("--work-dir", self.typed("kache worker --wo", "--work-dir"))
        self.assertIn("--show-config", self.typed("kache -s --show-c", "--show-config"))
        self.assertIn("/usr/", self.typed("kache report --html /us", "/usr/"))


def opening_comment(path):
    """The comment lines a source file opens with (after #pragma once)."""
    out = []
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("//"):
            out.append(line[2:].strip())
        elif line.startswith("#pragma") or (not line.strip() and not out):
            continue
        else:
            break
    return " ".join(out)


class Rooms(unittest.TestCase):
    def test_app_reads_no_dry_run_of_its_own(self):
        # nvcc's dry run has one reader, compiler/nvcc/toolchain.hpp's: doctor used to keep a second
        # (read_dry_run in commands/doctor.cpp, a namesake) with its own idea of the lines.
        for path in sorted(pathlib.Path(SOURCE_DIR, "src", "app").glob("*.[ch]pp")):
            text = path.read_text()
            self.assertNotIn('"#$ "', text, f"{path.name} reads nvcc's dry-run lines itself")
            self.assertIsNone(re.search(r"\bread_dry_run\s*\(const", text), f"{path.name} defines a dry-run reader")


class OpeningComments(unittest.TestCase):
    def test_no_opening_comment_speaks_of_a_future_the_tree_has_reached(self):
        # ARCHITECTURE.md describes the tree as it is; so do the files' first words ("local disk today,
        # remote servers later" stayed in storage.hpp long after the remotes came).
        stale = {}
        for path in sorted(pathlib.Path(SOURCE_DIR, "src").rglob("*.[ch]pp")):
            words = re.findall(r"\b(later|not yet|for now|today|will be|in the future)\b", opening_comment(path), re.I)
            if words:
                stale[str(path.relative_to(SOURCE_DIR))] = words
        self.assertEqual(stale, {})

    def test_main_names_every_compiler_family_of_the_architecture(self):
        # Each src/compiler/<family>/ paragraph of ARCHITECTURE.md is a kind of user main.cpp speaks to.
        with open(os.path.join(SOURCE_DIR, "ARCHITECTURE.md")) as f:
            families = re.findall(r"\*\*`src/compiler/(\w+)/`\*\*", f.read())
        named_by = {"nvcc": "nvcc", "gcc": "gcc", "offload": "hipcc"}
        self.assertEqual(set(families), set(named_by), "a new compiler family: say which word main.cpp must use")
        head = opening_comment(os.path.join(SOURCE_DIR, "src", "main.cpp"))
        for family in families:
            self.assertIn(named_by[family], head, f"main.cpp's opening comment does not name {family}")


if __name__ == "__main__":
    unittest.main()
