"""The documentation against the code, so that neither can drift from the other.

Each check reads a table from where the code keeps it, at test time, and the page that documents it:
- docs/configuration.md against `kache --list-settings` (core/config.cpp's settings table) and every
  KACHE_* variable named in src/: a setting without a row, or a row for no setting, fails;
- docs/soundness.md against `kache --reasons` (src/core/reasons.cpp) and `kache --list-environment`
  (src/compiler/env_table.cpp): a reason or a variable without a line fails, and so does a reason name
  anywhere in the docs that the table does not have;
- docs/command-line.md against the options of `kache --help`;
- ARCHITECTURE.md against the folders under src/ (a new folder without a line fails);
- docs/benchmarks.md against the reports in bench/results it cites (a figure not in its report fails);
- README.md: its shape (title, the two commands CI runs, at most 200 lines) and every relative link of
  the docs resolving to a file.
No compiler runs: the binary only prints its own tables.
"""
import os
import re
import subprocess
import unittest

import kachetest

ROOT = kachetest.SOURCE_DIR
KACHE = kachetest.KACHE

# The two commands the README opens with, byte for byte: CI (.ci/run) and users run them as written.
README_COMMANDS = "```sh\nbash scripts/setup.sh && bash scripts/demo.sh\nbash scripts/test.sh\n```\n"
README_MAX_LINES = 200
REASON_CATEGORIES = ("passthrough", "compile_failed", "error", "not_stored")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def kache_lines(option):
    out = subprocess.run([KACHE, option], capture_output=True, text=True, timeout=60, check=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def section(text, heading):
    """The text of a Markdown section, from its heading to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1:]
    end = re.search(r"^#{1,%d} " % level, rest, re.M)
    return rest[: end.start()] if end else rest


def doc_pages():
    docs = os.path.join(ROOT, "docs")
    return sorted(os.path.join("docs", f) for f in os.listdir(docs) if f.endswith(".md"))


class Readme(unittest.TestCase):
    def test_opens_with_title_line_and_the_two_commands(self):
        text = read("README.md")
        lines = text.splitlines()
        self.assertEqual(lines[0], "# kache")
        block = text.find("```")
        self.assertLess(block, text.find("\n## "), "the two commands come before the first section")
        self.assertEqual(text[block:block + len(README_COMMANDS)], README_COMMANDS)
        intro = text[len("# kache\n"):block].strip()
        self.assertTrue(intro, "one line on what kache is, between the title and the commands")
        self.assertNotIn("\n\n", intro, "a single sentence, not paragraphs")

    def test_is_short(self):
        self.assertLessEqual(len(read("README.md").splitlines()), README_MAX_LINES)

    def test_links_every_docs_page(self):
        text = read("README.md")
        for page in doc_pages():
            self.assertIn("(%s)" % page, text, "README.md does not link %s" % page)

    def test_relative_links_resolve(self):
        for page in ["README.md", "ARCHITECTURE.md"] + doc_pages():
            base = os.path.dirname(os.path.join(ROOT, page))
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read(page)):
                if re.match(r"[a-z]+://", target):
                    continue
                self.assertTrue(os.path.exists(os.path.join(base, target)), "%s links to missing %s" % (page, target))


class Citations(unittest.TestCase):
    """The documents cite only what a reader of the repository can open: no numbered specifications,
    design notes or issue files of the project's workspace, no Markdown file that is not in the tree."""

    def test_cite_only_documents_in_the_repository(self):
        pages = ["README.md", "ARCHITECTURE.md"] + doc_pages() + sorted(
            os.path.join("docs", "dev", f) for f in os.listdir(os.path.join(ROOT, "docs", "dev")) if f.endswith(".md"))
        for page in pages:
            text = read(page)
            base = os.path.dirname(os.path.join(ROOT, page))
            for pattern in (r"(?i)\bspec \d{3}\b", r"\bdesign (notes|documents)\b", r"/work/\S*\.md", r"\bdesign/\S+"):
                self.assertIsNone(re.search(pattern, text), f"{page} cites what the repository does not hold: "
                                  f"{re.search(pattern, text) and re.search(pattern, text).group(0)}")
            for cited in re.findall(r"(?<![\w/.-])([\w.-]+(?:/[\w.-]+)*\.md)\b", text):
                self.assertTrue(os.path.exists(os.path.join(base, cited)) or os.path.exists(os.path.join(ROOT, cited)),
                                f"{page} cites {cited}, which is not in the repository")


class ConfigurationReference(unittest.TestCase):
    """docs/configuration.md's settings table has exactly the rows of the binary's settings table."""

    def documented_settings(self):
        text = read("docs", "configuration.md")
        return set(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \| `(KACHE_[A-Z0-9_]+)` \|", text, re.M))

    def test_every_setting_has_one_row_and_every_row_a_setting(self):
        code = set(tuple(line.split("\t")[:2]) for line in kache_lines("--list-settings"))
        self.assertGreater(len(code), 10, "kache --list-settings printed the settings table")
        documented = self.documented_settings()
        self.assertEqual(sorted(code - documented), [], "settings without a row in docs/configuration.md")
        self.assertEqual(sorted(documented - code), [], "rows in docs/configuration.md for no setting")

    def test_every_kache_variable_in_src_is_documented(self):
        # Compile definitions (KACHE_VERSION) are macros, not variables.
        macros = set(re.findall(r"\b(KACHE_[A-Z0-9_]+)=", read("CMakeLists.txt")))
        in_src = set()
        for dirpath, _, files in os.walk(os.path.join(ROOT, "src")):
            for name in files:
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    in_src |= set(re.findall(r"\b(KACHE_[A-Z0-9_]+)\b", f.read()))
        variables = in_src - macros
        self.assertIn("KACHE_DIR", variables)
        text = read("docs", "configuration.md")
        named = set(re.findall(r"`(KACHE_[A-Z0-9_]+)`", text))
        self.assertEqual(sorted(variables - named), [], "KACHE_* variables of src/ not in docs/configuration.md")
        settings_env = set(line.split("\t")[1] for line in kache_lines("--list-settings"))
        self.assertEqual(sorted(named - variables - settings_env), [],
                         "docs/configuration.md names KACHE_* variables kache does not read")


class SoundnessModel(unittest.TestCase):
    """Every reason of src/core/reasons.cpp has a line in docs/soundness.md, and no other reason does."""

    def code_reasons(self):
        reasons = set()
        for line in kache_lines("--reasons"):
            category, name = line.split()[:2]
            self.assertIn(category, REASON_CATEGORIES)
            reasons.add("%s.%s" % (category, name))
        self.assertGreater(len(reasons), 30, "kache --reasons printed the reason table")
        return reasons

    def test_every_reason_has_a_line(self):
        listed = section(read("docs", "soundness.md"), "## Every reason")
        documented = set(re.findall(r"^- `([a-z_]+\.[a-z0-9_-]+)`:", listed, re.M))
        code = self.code_reasons()
        self.assertEqual(sorted(code - documented), [], "reasons without a line in docs/soundness.md")
        self.assertEqual(sorted(documented - code), [], "lines in docs/soundness.md for no reason")

    def test_reason_names_in_the_docs_exist(self):
        code = self.code_reasons()
        names = {r.split(".", 1)[1] for r in code}
        pattern = re.compile(r"\b(passthrough|not_stored|error|stored_per_checkout)\.([a-z][a-z0-9_-]*[a-z0-9])")
        for page in ["README.md"] + doc_pages():
            for category, name in pattern.findall(read(page)):
                if category == "stored_per_checkout":
                    self.assertTrue(name in names, "%s: stored_per_checkout.%s is no reason" % (page, name))
                else:
                    reason = "%s.%s" % (category, name)
                    self.assertTrue(reason in code, "%s names %s, which is no reason" % (page, reason))

    def test_every_environment_variable_is_named(self):
        text = read("docs", "soundness.md")
        variables = [line.split("\t")[0] for line in kache_lines("--list-environment")]
        self.assertGreater(len(variables), 30, "kache --list-environment printed the environment table")
        missing = [v for v in variables if "`%s`" % v not in text]
        self.assertEqual(missing, [], "variables of the environment table not named in docs/soundness.md")


class CommandLine(unittest.TestCase):
    def test_every_option_of_help_is_documented(self):
        out = subprocess.run([KACHE, "--help"], capture_output=True, text=True, timeout=60).stdout
        options = section(out.replace("Options:", "# Options:"), "# Options:")
        longs = re.findall(r"^\s+(?:-\w,)?(--[a-z-]+)", options, re.M)
        self.assertIn("--show-stats", longs)
        text = read("docs", "command-line.md")
        missing = [o for o in longs if not re.search(r"`%s\b" % re.escape(o), text)]
        self.assertEqual(missing, [], "options of kache --help not in docs/command-line.md")


class Architecture(unittest.TestCase):
    def test_names_every_src_folder(self):
        text = read("ARCHITECTURE.md")
        src = os.path.join(ROOT, "src")
        folders = sorted(os.path.relpath(d, ROOT) for d, _, _ in os.walk(src) if d != src)
        self.assertIn("src/core", folders)
        missing = [f for f in folders if "`%s/`" % f not in text]
        self.assertEqual(missing, [], "src/ folders ARCHITECTURE.md does not name (as `src/x/`)")


class Benchmarks(unittest.TestCase):
    def test_figures_come_from_the_reports_they_cite(self):
        figures = section(read("docs", "benchmarks.md"), "## Figures from the last runs")
        rows = [r for r in figures.splitlines() if r.startswith("| ") and "bench/results/" in r]
        self.assertGreater(len(rows), 5)
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            report = re.search(r"`(bench/results/[^`]+)`", cells[-1]).group(1)
            numbers_in_report = set(re.findall(r"\d+(?:\.\d+)?", read(report)))
            for number in re.findall(r"\d+(?:\.\d+)?", " ".join(cells[1:-1])):
                self.assertTrue(number in numbers_in_report, "%s is not in %s (row: %s)" % (number, report, cells[0]))


if __name__ == "__main__":
    kachetest.main()
