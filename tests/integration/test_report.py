"""`kache report` over the event log (issue 32), with the real gcc, g++, nvcc, cmake, ninja and chromium.

- examples/mixed (C, C++ and CUDA) built cold with CMake and Ninja after `kache report --mark`, then
  `kache report` in every form: the JSON's counts equal the deltas of `kache --print-stats` over the build
  and its compiles the compile steps of compile_commands.json; the Markdown's tables parse (header,
  separator, rows of as many cells) and hold no HTML; the trace parses and has one span per compile; the
  HTML page, opened in headless Chromium, renders its charts (the screenshot holds the outcome colours over
  chart-sized areas) and its own text holds the figures. The build again from a new build directory
  (another build id) is all hits, each knowing the miss time it saved.
- Planted misconfigurations are the first cause of the report and a doctor row: a volatile define
  (-DBUILD_TIME changing per build), and an absolute -I keyed per checkout (a second checkout at another
  path, whose -I names its own absolute include directory), each beside more misses of an ordinary cause
  (new sources).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import unittest
import zlib

import buildsys
import kachetest
from kachetest import KacheTestCase
from test_mixed_cmake import compile_steps

HIT_RGB = (0x2F, 0x9E, 0x44)
MISS_RGB = (0xE0, 0x31, 0x31)
NOT_COUNTERS = {"stats_schema", "stats_time", "cache_size", "max_size", "entries"}


def chromium():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def read_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def colour_area(rows, rgb, tolerance=6):
    """How many pixels have the colour, and the bounding box (x0, y0, x1, y1) they span."""
    count, box = 0, [10 ** 9, 10 ** 9, -1, -1]
    for y, row in enumerate(rows):
        for x, px in enumerate(row):
            if all(abs(px[i] - rgb[i]) <= tolerance for i in range(3)):
                count += 1
                box = [min(box[0], x), min(box[1], y), max(box[2], x), max(box[3], y)]
    return count, box


def markdown_tables(text):
    """Every Markdown table as a list of rows (lists of cells); asserts each is well formed."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
            continue
        if current:
            assert len(current) >= 3, current
            assert all(re.fullmatch(r"-+:?", c) for c in current[1]), current[1]
            assert all(len(r) == len(current[0]) for r in current), current
            tables.append([current[0]] + current[2:])
            current = []
    return tables


def print_stats(env):
    out = buildsys.run([buildsys.LAUNCHER, "--print-stats"], cwd="/", env=env).stdout
    counters = {}
    for line in out.splitlines():
        name, value = line.split(" ", 1)
        if name not in NOT_COUNTERS:
            counters[name] = int(value)
    return counters


class Report(KacheTestCase):
    def report(self, args, env=None):
        r = buildsys.run([buildsys.LAUNCHER, "report"] + args, cwd=self.ws, env=env or self.env)
        return r.stdout

    def configure_mixed(self, checkout, build, env):
        launchers = [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={buildsys.LAUNCHER}" for lang in ("C", "CXX", "CUDA")]
        buildsys.run(["cmake", "-S", checkout, "-B", build, "-G", "Ninja", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                      "-DCMAKE_C_COMPILER=gcc", "-DCMAKE_CXX_COMPILER=g++"] + launchers, cwd=checkout, env=env)

    def build_mixed(self, checkout, build, env, build_id):
        self.configure_mixed(checkout, build, env)
        before = print_stats(env)
        self.report(["--mark", "--label", build_id], env)
        buildsys.run(["ninja", "-C", build, "-j", buildsys.JOBS], cwd=build, env=dict(env, KACHE_BUILD_ID=build_id))
        after = print_stats(env)
        return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
                if after.get(k, 0) != before.get(k, 0)}

    def check_html(self, html_path, steps, outcome_rgb):
        browser = chromium()
        if browser is None:
            self.skipTest("chromium is not installed (scripts/setup-tests.sh installs it)")
        shot = os.path.join(self.ws, "report.png")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=900,2600"]
        url = "file://" + html_path
        subprocess.run([browser] + flags + ["--screenshot=" + shot, url], capture_output=True, timeout=300,
                       cwd=self.ws, env=self.env)
        dom = subprocess.run([browser] + flags + ["--dump-dom", url], capture_output=True, text=True, timeout=300,
                             cwd=self.ws, env=self.env).stdout
        width, height, rows = read_png(shot)
        count, (x0, y0, x1, y1) = colour_area(rows, outcome_rgb)
        # The outcome bars of two charts and the timeline: more than a legend swatch, and chart-sized.
        self.assertGreater(count, 3000, "the charts' bars are not in the screenshot")
        self.assertGreater(x1 - x0, 200)
        self.assertGreater(y1 - y0, 200)
        # The page's own text holds the figures the charts draw.
        for chart in ("chart-languages", "chart-compilers", "chart-time", "chart-timeline"):
            self.assertIn(f'id="{chart}"', dom)
        summary = re.search(r'<table id="summary">.*?</table>', dom, re.S).group(0)
        self.assertIn(f"<td>{len(steps)}</td>", summary)
        timeline = re.search(r'<svg[^>]*id="chart-timeline".*?</svg>', dom, re.S).group(0)
        self.assertEqual(timeline.count("<rect"), len(steps))
        for language in ("c", "c++", "cuda"):
            self.assertIn(f">{language}</text>", dom)
        return shot

    def test_mixed_build_in_every_form(self):
        if shutil.which("cmake") is None or shutil.which("ninja") is None:
            self.skipTest("cmake or ninja is not on PATH")
        root = tempfile.mkdtemp(prefix="kache-report-", dir=self.ws)
        checkout = buildsys.copy_example("mixed", os.path.join(root, "mixed"))
        build = os.path.join(checkout, "build")
        env = buildsys.clean_env(self.cache, root)
        self.env = env
        deltas = self.build_mixed(checkout, build, env, "mixed-cold")
        steps = compile_steps(build)

        report = json.loads(self.report(["--json"]))
        self.assertEqual(report["schema"], "kache-report-1")
        self.assertEqual(report["counts"], deltas)
        self.assertEqual((report["compiles"], report["misses"], report["hits"]), (len(steps), len(steps), 0))
        self.assertEqual({e["language"] for e in report["compile_events"]}, {"c", "c++", "cuda"})
        self.assertEqual(json.loads(self.report(["--json", "--build", "mixed-cold"]))["counts"], deltas)
        self.assertIn(f"{len(steps)} compiles: 0 hits, {len(steps)} misses", self.report([]))

        markdown = self.report(["--markdown"])
        self.assertNotRegex(markdown, r"<[a-zA-Z/]")
        tables = markdown_tables(markdown)
        summary = dict(zip(tables[0][0], tables[0][1]))
        self.assertEqual((summary["Compiles"], summary["Misses"]), (str(len(steps)), str(len(steps))))
        languages = next(t for t in tables if t[0][0] == "Language")
        self.assertEqual(sum(int(r[1]) for r in languages[1:]), len(steps))

        trace_path, html_path = os.path.join(self.ws, "trace.json"), os.path.join(self.ws, "report.html")
        self.report(["--trace", trace_path, "--html", html_path])
        with open(trace_path) as f:
            trace = json.load(f)
        spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        self.assertEqual(len(spans), len(steps))
        self.assertEqual({s["cat"] for s in spans}, {"miss"})
        self.assertEqual(sorted(s["args"]["source"] for s in spans),
                         sorted(os.path.relpath(os.path.join(checkout, e), build) for e in self.sources(build)))
        with open(html_path) as f:
            html = f.read()
        self.assertNotRegex(html, r"(src|href)=\"(https?:)?//", "the page loads nothing from the network")
        self.check_html(html_path, steps, MISS_RGB)

        shutil.rmtree(build)
        deltas = self.build_mixed(checkout, build, env, "mixed-warm")
        warm = json.loads(self.report(["--json", "--build", "mixed-warm"]))
        self.assertEqual(warm["counts"], deltas)
        self.assertEqual((warm["compiles"], warm["hits"], warm["misses"]), (len(steps), len(steps), 0))
        self.assertTrue(all(e.get("miss_cost_ms", 0) > 0 for e in warm["compile_events"]),
                        "every hit knows the cost of the miss that stored its entry")
        self.report(["--html", html_path, "--build", "mixed-warm"])
        self.check_html(html_path, steps, HIT_RGB)

    def sources(self, build):
        with open(os.path.join(build, "compile_commands.json")) as f:
            return [os.path.relpath(e["file"], os.path.dirname(build)) for e in json.load(f)]

    def gcc(self, cwd, args, build_id):
        buildsys.run([buildsys.LAUNCHER, "gcc"] + args, cwd=cwd, env=dict(self.env, KACHE_BUILD_ID=build_id))

    def assert_first_cause(self, build_id, cause, detail_part):
        report = json.loads(self.report(["--json", "--build", build_id]))
        causes = report["causes"]
        self.assertEqual(causes[0]["cause"], cause, causes)
        self.assertTrue(causes[0]["misconfiguration"] and causes[0]["fix"], causes[0])
        self.assertTrue(any(detail_part in e for e in causes[0]["examples"]), causes[0])
        self.assertEqual(causes[1]["cause"], "new-source", causes)
        self.assertGreater(causes[1]["count"], causes[0]["count"], "the misconfiguration leads though fewer")
        self.assertIn(f"top cause of misses: {cause}", self.report(["--build", build_id]))
        doctor = json.loads(buildsys.run([buildsys.LAUNCHER, "doctor", "--json"], cwd=self.ws, env=self.env,
                                         check=False).stdout)
        self.assertIn("misses." + cause, {r["name"] for r in doctor["rows"]})

    def test_a_ninja_build_without_a_build_id_is_one_build(self):
        """ninja runs every command in a process group of its own: without KACHE_BUILD_ID and without a
        mark, the report of the newest build still holds every compile of the ninja run, not one."""
        if shutil.which("cmake") is None or shutil.which("ninja") is None:
            self.skipTest("cmake or ninja is not on PATH")
        root = tempfile.mkdtemp(prefix="kache-report-", dir=self.ws)
        checkout = buildsys.copy_example("mixed", os.path.join(root, "mixed"))
        build = os.path.join(checkout, "build")
        env = buildsys.clean_env(self.cache, root)
        env.pop("KACHE_BUILD_ID", None)
        self.env = env
        self.configure_mixed(checkout, build, env)
        buildsys.run(["ninja", "-C", build, "-j", buildsys.JOBS], cwd=build, env=env)
        report = json.loads(self.report(["--json"]))
        self.assertEqual(len({e["build"] for e in report["compile_events"]}), 1, report["compile_events"])
        self.assertEqual(report["compiles"], len(compile_steps(build)))

    def test_a_volatile_define_is_named_first(self):
        proj = self.path("proj")
        for name in ("a", "b"):
            self.write(f"proj/src/{name}.c", f'const char* {name}_time = BUILD_TIME;\n')
        for build, stamp in (("define-1", "t1"), ("define-2", "t2")):
            for name in ("a", "b"):
                self.gcc(proj, [f'-DBUILD_TIME="{stamp}"', "-c", f"src/{name}.c", "-o", f"{name}.o"], build)
        for name in ("c", "d", "e"):  # ordinary misses of the same build, more of them
            self.write(f"proj/src/{name}.c", f"int {name}(void) {{ return 1; }}\n")
            self.gcc(proj, ["-c", f"src/{name}.c", "-o", f"{name}.o"], "define-2")
        self.assert_first_cause("define-2", "volatile-define", "-DBUILD_TIME")

    def test_an_absolute_include_keyed_per_checkout_is_named_first(self):
        # Two checkouts of one project at different paths, each built with -I<its checkout>/include (CMake's
        # ${CMAKE_SOURCE_DIR}/include) and no base dir: the absolute path keys each checkout apart.
        for checkout in ("one", "two"):
            self.write(f"{checkout}/include/h.h", "#define ANSWER 42\n")
            self.write(f"{checkout}/src/a.c", '#include "h.h"\nint a(void) { return ANSWER; }\n')
            os.makedirs(self.path(checkout, "build"))
            include = self.path(checkout, "include")
            self.gcc(self.path(checkout, "build"), ["-I", include, "-c", "../src/a.c", "-o", "a.o"], "abs-" + checkout)
        for name in ("c", "d", "e"):
            self.write(f"two/src/{name}.c", f"int {name}(void) {{ return 2; }}\n")
            self.gcc(self.path("two", "build"), ["-c", f"../src/{name}.c", "-o", f"{name}.o"], "abs-two")
        # Named by its flag: the path is an argument's value, which no report holds (issue 41).
        self.assert_first_cause("abs-two", "absolute-path", "(-I)")

if __name__ == "__main__":
    kachetest.main()
