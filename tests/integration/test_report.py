"""`kache report` over the event log (issue 32), with the real gcc, g++, nvcc, cmake, ninja and chromium.

- examples/mixed (C, C++ and CUDA) built cold with CMake and Ninja, then
  `kache report` in every form: the JSON's counts equal the deltas of `kache --print-stats` over the build
  and its compiles the compile steps of compile_commands.json; the Markdown's tables parse (header,
  separator, rows of as many cells) and hold no HTML; the trace parses and has one span per compile; the
  HTML page, opened in headless Chromium, renders its charts (the screenshot holds the outcome colours over
  chart-sized areas) and its own text holds the figures. The build again from a new build directory
  (another build id) is all hits, each knowing the miss time it saved.
- Issue 42: a mark never changes what a plain `kache report` covers (the newest build; `--since-mark` is
  asked for); errors are counted as `kache -s` counts them (a remote that failed inside compiles that still
  missed); `--fail-under PERCENT` fails a job whose hit rate is below, after printing the report; each build
  has a timeline of its own, with round time ticks and a row per job running at once; every form names
  the date, kache's version and the cache dir.
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


ROUND_STEPS = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900,
               1800, 3600, 7200, 21600}


def tick_seconds(label):
    """Seconds of a timeline tick's label: "0", "250 ms", "5 s", "2 min", "1 min 30 s", "1 h"."""
    total = 0.0
    for number, unit in re.findall(r"([0-9.]+)\s*(ms|s|min|h)?", label):
        total += float(number) * {"ms": 1e-3, "s": 1, "min": 60, "h": 3600, "": 1}[unit]
    return round(total, 6)


def event_line(t_ms, build, source, outcome, wall_us, miss_cost_ms=0):
    """One record of events/events.jsonl (core/events.hpp), as a compile appends it."""
    counts = {"hit": {"hits": 1}, "miss": {"misses": 1}, "passthrough": {"passthrough": 1}}[outcome]
    record = {"v": 1, "t": t_ms, "build": build, "pid": 1, "tool": "gcc", "lang": "c", "src": source,
              "outcome": outcome, "wall_us": wall_us, "cpu_us": wall_us, "counts": counts}
    if miss_cost_ms:
        record["miss_cost_ms"] = miss_cost_ms
    return json.dumps(record) + "\n"


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
        for chart in ("chart-languages", "chart-compilers", "chart-time", "chart-timeline-1"):
            self.assertIn(f'id="{chart}"', dom)
        summary = re.search(r'<table id="summary">.*?</table>', dom, re.S).group(0)
        self.assertIn(f"<td>{len(steps)}</td>", summary)
        timelines = self.timelines(dom)
        self.assertEqual(len(timelines), 1, "one build, one timeline")
        self.assertEqual(timelines[0].count("<rect"), len(steps))
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

        shutil.rmtree(build)
        deltas = self.build_mixed(checkout, build, env, "mixed-warm")
        warm = json.loads(self.report(["--json", "--build", "mixed-warm"]))
        self.assertEqual(warm["counts"], deltas)
        self.assertEqual((warm["compiles"], warm["hits"], warm["misses"]), (len(steps), len(steps), 0))
        self.assertTrue(all(e.get("miss_cost_ms", 0) > 0 for e in warm["compile_events"]),
                        "every hit knows the cost of the miss that stored its entry")
        warm_path = os.path.join(self.ws, "report-warm.html")
        self.report(["--html", warm_path, "--build", "mixed-warm"])
        # Last: only what a browser renders needs chromium (check_html skips without it).
        self.check_html(html_path, steps, MISS_RGB)
        self.check_html(warm_path, steps, HIT_RGB)

    def timelines(self, dom):
        """The page's timeline charts, each checked: its tick labels increase from 0 in round steps."""
        charts = re.findall(r'<svg[^>]*class="chart timeline".*?</svg>', dom, re.S)
        for chart in charts:
            labels = re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', chart)
            self.assertGreaterEqual(len(labels), 2, chart[:300])
            values = [tick_seconds(label) for label in labels]
            self.assertEqual(values[0], 0)
            self.assertEqual(values, sorted(set(values)), labels)
            steps = {round(b - a, 6) for a, b in zip(values, values[1:])}
            self.assertEqual(len(steps), 1, labels)
            self.assertIn(steps.pop(), ROUND_STEPS, labels)
        return charts

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

    def sources_to(self, names, text="int {name}(void) {{ return 1; }}\n"):
        for name in names:
            self.write(f"proj/{name}.c", text.format(name=name))

    def test_a_mark_does_not_change_what_report_covers(self):
        """Issue 42: one `--mark` made every later plain `kache report` mean "since that mark"."""
        self.sources_to(["a", "b", "c", "d"])
        proj = self.path("proj")
        self.gcc(proj, ["-c", "a.c", "-o", "a.o"], "before")
        self.kache(["report", "--mark", "--label", "nightly"])
        for name in ("b", "c"):
            self.gcc(proj, ["-c", f"{name}.c", "-o", f"{name}.o"], "one")
        self.gcc(proj, ["-c", "d.c", "-o", "d.o"], "two")
        plain = json.loads(self.report(["--json"]))
        self.assertEqual((plain["selection"]["build"], plain["compiles"]), ("two", 1), plain["selection"])
        self.assertIn("build two (the newest)", self.report([]))
        since = json.loads(self.report(["--json", "--since-mark"]))
        self.assertEqual(since["compiles"], 3)
        self.assertIn("since the last mark, nightly", since["selection"]["description"])
        self.assertIn("since the last mark, nightly", self.report(["--since-mark"]).splitlines()[0])

    def test_without_a_mark_since_mark_says_so(self):
        r = self.kache(["report", "--since-mark"], check=False)
        self.assertEqual(r.returncode, 2, "a wrong command line, not a failed gate")
        self.assertIn("no mark was set", r.stderr)

    def test_a_wrong_command_line_exits_2(self):
        """A command line kache report cannot carry out exits 2 (1 is a gate that failed): an age that is
        not one, and two ranges at once (--build silently won over the others)."""
        self.write_events([event_line(1_765_000_000_000, "b1", "a.c", "hit", 1000, 5)])
        for args in (["--since", "10x"], ["--build", "b1", "--since", "1h"], ["--build", "b1", "--all"],
                     ["--all", "--since-mark"], ["--since", "1h", "--all", "--fail-under", "0"]):
            r = self.kache(["report"] + args, check=False)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("--help", r.stderr)

    def write_events(self, lines):
        os.makedirs(os.path.join(self.cache, "events"), exist_ok=True)
        with open(os.path.join(self.cache, "events", "events.jsonl"), "w") as f:
            f.writelines(lines)

    def test_a_job_that_recorded_no_compile_fails_the_gate(self):
        """A CI job restores the cache dir, events/ included, then records no compile (its launcher
        dropped, its build dead early): the gate judged the restored, newest build, all hits, and passed.
        With KACHE_BUILD_ID set, a plain report covers that job's build, and an empty one fails."""
        t0 = 1_765_000_000_000
        self.write_events([event_line(t0 + i, "job-1", f"{n}.c", "hit", 1000, 50) for i, n in enumerate("abcd")])
        job = {"KACHE_BUILD_ID": "job-2"}
        r = self.kache(["report", "--fail-under", "80"], env=job, check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("kache report: build job-2 (this job's KACHE_BUILD_ID)", r.stdout)
        self.assertIn("No compile of build job-2 was recorded.", r.stdout)
        self.assertIn("no compile of build job-2 was recorded", r.stderr)
        self.assertIn("No compile of build job-2 was recorded.", self.kache(["report", "--markdown"], env=job).stdout)
        self.assertEqual(json.loads(self.kache(["report", "--json"], env=job).stdout)["selection"]["build"], "job-2")
        # The job's own compiles, once recorded, are what it is judged by; without the variable, the newest.
        self.assertEqual(self.kache(["report", "--fail-under", "80"], env={"KACHE_BUILD_ID": "job-1"}).returncode, 0)
        self.assertEqual(self.kache(["report", "--fail-under", "80"], env={"KACHE_BUILD_ID": None}).returncode, 0)

    def test_fail_under_0_fails_a_build_with_no_cacheable_compile(self):
        """docs/ci.md: `--fail-under 0` fails only a job where kache looked up no compile at all; it passed."""
        t0 = 1_765_000_000_000
        self.write_events([event_line(t0, "links", "a.o", "passthrough", 1000)])
        r = self.kache(["report", "--fail-under", "0"], env={"KACHE_BUILD_ID": None}, check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no cacheable compile was recorded", r.stderr)
        self.assertIn("hit rate n/a", r.stdout)
        self.assertIsNone(json.loads(self.report(["--json"]))["hit_rate"])
        summary = dict(zip(*markdown_tables(self.report(["--markdown"]))[0]))
        self.assertEqual(summary["Hit rate"], "n/a")
        self.write_events([event_line(t0, "cold", "a.c", "miss", 1000)])
        self.assertEqual(self.kache(["report", "--fail-under", "0"], env={"KACHE_BUILD_ID": None}).returncode, 0)

    def test_errors_are_counted_as_kache_dash_s_counts_them(self):
        """A remote that refuses every connection: each compile still misses (and is stored locally), and
        kache -s counts kache's own errors; the report said "0 errors" for the same compiles."""
        self.sources_to(["a", "b", "c"])
        proj = self.path("proj")
        for name in ("a", "b", "c"):
            buildsys.run([buildsys.LAUNCHER, "gcc", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=proj,
                         env=dict(self.env, KACHE_BUILD_ID="remote-down", KACHE_REMOTE_STORAGE="redis://127.0.0.1:1"))
        dash_s = self.stats()
        self.assertGreater(dash_s["errors"], 0, dash_s)
        report = json.loads(self.report(["--json", "--build", "remote-down"]))
        self.assertEqual((report["errors"], report["misses"], report["hits"]),
                         (dash_s["errors"], dash_s["misses"], dash_s["hits"]))
        self.assertEqual(report["counts"]["errors"], dash_s["errors"])
        text = self.report(["--build", "remote-down"])
        self.assertIn(f"{dash_s['errors']} errors", text)
        markdown = dict(zip(*markdown_tables(self.report(["--markdown", "--build", "remote-down"]))[0]))
        self.assertEqual(markdown["Errors"], str(dash_s["errors"]))

    def test_fail_under_gates_a_ci_job_on_the_hit_rate(self):
        self.sources_to(["a", "b", "c", "d"])
        proj = self.path("proj")
        for build in ("cold", "warm"):
            for name in ("a", "b", "c", "d"):
                self.gcc(proj, ["-c", f"{name}.c", "-o", f"{name}.o"], build)
        cold = self.kache(["report", "--build", "cold", "--fail-under", "80"], check=False)
        self.assertEqual(cold.returncode, 1, cold.stderr)
        self.assertIn("4 compiles: 0 hits, 4 misses", cold.stdout, "the report is printed all the same")
        self.assertEqual(len(cold.stderr.strip().splitlines()), 1, cold.stderr)
        self.assertIn("below --fail-under 80", cold.stderr)
        warm = self.kache(["report", "--fail-under", "80"], check=False)
        self.assertEqual((warm.returncode, warm.stderr), (0, ""))
        self.assertEqual(self.kache(["report", "--markdown", "--fail-under", "100"], check=False).returncode, 0)
        for bad in ("abc", "101", "-5", "80%"):
            r = self.kache(["report", "--fail-under", bad], check=False)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))
            self.assertIn("--help", r.stderr)
        empty = self.kache(["report", "--build", "no-such-build", "--fail-under", "50"], check=False)
        self.assertEqual(empty.returncode, 1)
        self.assertIn("no compile of build no-such-build was recorded", empty.stderr)

    def test_each_build_has_its_own_timeline_with_ticks_and_job_rows(self):
        """Two builds an hour apart: each its own timeline (the gap is not drawn), the first's three
        parallel jobs on three rows, round ticks along each; every form says when, which kache and which
        cache dir."""
        os.makedirs(os.path.join(self.cache, "events"))
        t0 = 1_765_000_000_000
        lines = [event_line(t0, "ci-1", "a.c", "miss", 4_000_000), event_line(t0 + 100, "ci-1", "b.c", "miss", 3_000_000),
                 event_line(t0 + 200, "ci-1", "c.c", "miss", 2_000_000), event_line(t0 + 4_500, "ci-1", "d.c", "miss", 9_000_000),
                 event_line(t0 + 3_600_000, "ci-2", "a.c", "hit", 20_000, 4000),
                 event_line(t0 + 3_600_005, "ci-2", "b.c", "hit", 20_000, 3000),
                 event_line(t0 + 3_600_040, "ci-2", "c.c", "passthrough", 1_000)]
        with open(os.path.join(self.cache, "events", "events.jsonl"), "w") as f:
            f.writelines(lines)
        html_path, trace_path = self.path("two-builds.html"), self.path("two-builds.json")
        self.kache(["report", "--all", "--html", html_path, "--trace", trace_path])
        with open(trace_path) as f:
            trace = json.load(f)
        self.assertEqual(len({e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"}), 2, "a process per build")
        self.assertEqual(trace["otherData"]["cache_dir"], self.cache)
        version = self.kache(["--version"]).stdout.split()[1]
        self.assertEqual(trace["otherData"]["version"], version)
        made = trace["otherData"]["made"]
        self.assertRegex(made, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
        start = "2025-12-06 05:46:40"  # t0 in UTC
        report = json.loads(self.report(["--all", "--json"]))
        self.assertEqual((report["version"], report["cache_dir"], report["start"]), (version, self.cache, start + " UTC"))
        self.assertEqual([b["lanes"] for b in report["builds"]], [3, 2])
        with open(html_path) as f:
            html = f.read()
        for text in (self.report(["--all"]), self.report(["--all", "--markdown"]), html):
            for fact in (start, f"kache {version}", self.cache, made[:10]):
                self.assertIn(fact, text)
        self.assertEqual(len(self.timelines(html)), 2, "one timeline per build")

        # What a browser renders of the page: only this part needs chromium.
        browser = chromium()
        if browser is None:
            self.skipTest("chromium is not installed (scripts/setup-tests.sh installs it)")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=900,2600"]
        dom = subprocess.run([browser] + flags + ["--dump-dom", "file://" + html_path], capture_output=True, text=True,
                             timeout=300, cwd=self.ws, env=self.env).stdout
        charts = self.timelines(dom)
        self.assertEqual(len(charts), 2, "one timeline per build")
        first, second = charts
        rows = {int(y) for y in re.findall(r'<rect class="miss"[^>]*\by="(\d+)"', first)}
        self.assertEqual(len(rows), 3, "three jobs ran at once: three rows; d.c reuses a free row")
        self.assertEqual(first.count("<rect"), 4)
        self.assertEqual(second.count('<rect class="hit"'), 2)
        self.assertEqual(second.count('<rect class="passthrough"'), 1)
        self.assertIn('aria-label="Timeline of build ci-1: 4 compiles', first)
        # The second build's axis is its own 40 ms, not the hour since the first build.
        self.assertNotIn(" min", " ".join(re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', second)))
        self.assertIn(" s<", first)
        for fact in (start, f"kache {version}", self.cache, made[:10]):
            self.assertIn(fact, dom)

    def test_time_saved_is_cpu_time_with_a_wall_clock_estimate(self):
        """Four hits at once, each saving 0.9 s: 3.6 s of CPU time, about 0.9 s of wall clock."""
        os.makedirs(os.path.join(self.cache, "events"))
        t0 = 1_765_000_000_000
        with open(os.path.join(self.cache, "events", "events.jsonl"), "w") as f:
            f.writelines(event_line(t0, "par", f"{n}.c", "hit", 100_000, 1000) for n in "abcd")
        report = json.loads(self.report(["--json"]))
        self.assertAlmostEqual(report["time"]["saved_s"], 3.6)
        self.assertAlmostEqual(report["time"]["saved_wall_s"], 0.9)
        text = self.report([])
        self.assertIn("time saved by hits 3.6 s CPU time (summed over parallel jobs), about 900 ms of wall-clock time",
                      text)
        summary = dict(zip(*markdown_tables(self.report(["--markdown"]))[0]))
        self.assertEqual((summary["Time saved (CPU)"], summary["Time saved (wall, est.)"]), ("3.6 s", "900 ms"))


if __name__ == "__main__":
    kachetest.main()
