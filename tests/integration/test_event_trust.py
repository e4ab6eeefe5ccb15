"""The event log and the reports against whoever shares the cache dir (issue 41, item 2).

- No argument value reaches the cache dir or a report: a define given as `-D 'API_KEY="..."'`,
  `-DAPI_KEY=...` and another flag's value are named by the flag alone ("-DAPI_KEY"), in events.jsonl,
  the explain records, and the text, JSON, Markdown, trace and HTML reports and `kache explain`.
- A cache dir's kache.toml cannot widen what is recorded (events.command_line, log.file, log.filter):
  ignored with a warning naming the setting and where it belongs; the user's own environment still can.
- A FIFO, a symbolic link or a directory planted at events/events.jsonl, events/mark, stats.journal,
  stats or kache.toml never hangs a compile or `kache report`, and a link never redirects a write.
- A line of 600 000 nested arrays is a damaged line for `report` and `doctor`, not a crash.
- The HTML report escapes a compiler named `x<img src=x onerror=...>-gcc` and forbids script (CSP);
  the text report and `kache explain` print no control character a file name carried.
"""
import json
import os
import shutil
import subprocess

import kachetest
from kachetest import KACHE, KacheTestCase

SECRET = "sekrit"
BOUND_S = 60  # a hang fails the test at this bound instead of stalling the suite


class EventTrust(KacheTestCase):
    def gcc(self, args, env=None, check=True):
        return self.kache(["gcc"] + args, env=env, check=check)

    def cache_files_holding(self, needle):
        found = []
        for d, _, files in os.walk(self.cache):
            for name in files:
                path = os.path.join(d, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    if needle.encode() in f.read():
                        found.append(path)
        return found

    def events(self):
        return json.loads(self.kache(["report", "--all", "--json"]).stdout)["compile_events"]

    def test_no_argument_value_reaches_the_log_or_a_report(self):
        self.write("a.c", "int a(void) { return 1; }\n")
        for args in (["-D", f'API_KEY="{SECRET}_one"'], ["-D", f'API_KEY="{SECRET}_two"'],
                     [f'-DAPI_KEY="{SECRET}_three"'], [f'-DAPI_KEY="{SECRET}_three"', "-Ihidden_dir"]):
            self.gcc(args + ["-c", "a.c", "-o", "a.o"])
        events = self.events()
        self.assertEqual([e["outcome"] for e in events], ["miss"] * 4)
        self.assertEqual([(e.get("cause"), e.get("cause_detail")) for e in events[1:3]],
                         [("volatile-define", "-DAPI_KEY")] * 2, "the cause is still named, by the flag's name")
        self.assertEqual(events[3]["cause_detail"], "-I")
        html, trace = self.path("r.html"), self.path("r.trace")
        reports = [self.kache(["report", "--all"] + form).stdout
                   for form in ([], ["--json"], ["--markdown"], ["--html", html, "--trace", trace])]
        for path in (html, trace, os.path.join(self.cache, "events", "events.jsonl")):
            with open(path) as f:
                reports.append(f.read())
        self.assertIn("-DAPI_KEY", reports[0])
        for text in reports:  # names, never values
            self.assertNotIn(SECRET, text)
            self.assertNotIn("hidden_dir", text)
        # explain shows what differs, but a define's value only as a digest (the records keep no value).
        for form in ([], ["--json"]):
            self.assertNotIn(SECRET, self.kache(["explain", "--last"] + form).stdout)
        self.assertEqual(self.cache_files_holding(SECRET), [])

    def test_nvcc_defines_are_named_without_values(self):
        if kachetest.NVCC is None:
            self.skipTest("nvcc is not installed")
        self.write("k.cu", "__global__ void k(float* x) { x[0] = 1.0f; }\n")
        for value in ("one", "two"):
            self.kache(["nvcc", "-D", f"API_KEY={SECRET}_{value}", "-c", "k.cu", "-o", "k.o"])
        # A host define through -Xcompiler runs the compiler itself (hidden-input), recorded as such.
        self.kache(["nvcc", "-Xcompiler", f"-DAPI_KEY={SECRET}_three", "-c", "k.cu", "-o", "k.o"])
        events = self.events()
        self.assertEqual([(e["outcome"], e.get("cause"), e.get("cause_detail")) for e in events[1:]],
                         [("miss", "volatile-define", "-DAPI_KEY"), ("passthrough", None, None)])
        for form in ([], ["--json"], ["--markdown"]):
            self.assertNotIn(SECRET, self.kache(["report", "--all"] + form).stdout)
        self.assertNotIn(SECRET, self.kache(["explain", "--last"]).stdout)
        self.assertEqual(self.cache_files_holding(SECRET), [])

    def test_a_cache_dir_config_cannot_widen_what_is_recorded(self):
        os.makedirs(self.cache)
        planted_log = self.path("planted.log")
        self.write(".cache/kache.toml",
                   f'[events]\ncommand_line = true\n[log]\nfile = "{planted_log}"\nfilter = "kache=trace"\n')
        self.write("a.c", "int a(void) { return 1; }\n")
        self.gcc(["-c", "a.c", "-o", "a.o"])
        self.assertNotIn('"command"', self.read(".cache/events/events.jsonl"))
        self.assertFalse(os.path.exists(planted_log), "the cache dir's config chose where kache logs")
        warned = self.kache(["-p"]).stderr
        for setting, env in (("events.command_line", "KACHE_EVENTS_COMMAND_LINE"), ("log.file", "KACHE_LOG_FILE"),
                             ("log.filter", "KACHE_LOG")):
            self.assertRegex(warned, rf"ignoring {setting} in \S*kache.toml.*your own config file.*{env}")
        # The user's own environment still asks for it.
        self.gcc(["-c", "a.c", "-o", "a.o"], env={"KACHE_EVENTS_COMMAND_LINE": "1"})
        self.assertIn('"command"', self.read(".cache/events/events.jsonl").splitlines()[-1])

    def test_editing_the_config_never_reads_or_writes_through_a_planted_link(self):
        # Another user links <cache>/kache.toml to a TOML file of the user's: `kache -M` and `-o` copied
        # its content into the cache dir (which the group reads) before.
        os.makedirs(self.cache)
        self.write("private.toml", '[cache]\nmax_size = "1G"\n# token 8d1f2a\n')
        os.symlink(self.path("private.toml"), os.path.join(self.cache, "kache.toml"))
        self.kache(["-M", "5G"])
        self.kache(["-o", "cache.compression_level=4"])
        self.assertEqual(self.read("private.toml"), '[cache]\nmax_size = "1G"\n# token 8d1f2a\n')
        self.assertEqual(self.cache_files_holding("8d1f2a"), [])
        self.assertIn('max_size = "5G"', self.read(".kache.toml"))  # the user's own file instead
        # A setting that widens what is recorded goes to the user's own file even when the cache dir's
        # file is a real one (which could not set it).
        os.remove(os.path.join(self.cache, "kache.toml"))
        self.write(".cache/kache.toml", '[cache]\nmax_size = "2G"\n')
        self.kache(["-o", "events.command_line=true"])
        self.assertIn("command_line = true", self.read(".kache.toml"))
        self.assertNotIn("command_line", self.read(".cache/kache.toml"))

    def run_bounded(self, args):
        r = subprocess.run([KACHE] + args, cwd=self.ws, env=self.env, capture_output=True, text=True,
                           timeout=BOUND_S)
        return r

    def plant(self, rel, kind, target):
        path = os.path.join(self.cache, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.remove(path)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "link":
            os.symlink(target, path)
        else:
            os.mkdir(path)
        return path

    def test_planted_files_never_hang_or_redirect(self):
        self.write("a.c", "int a(void) { return 1; }\n")
        self.gcc(["-c", "a.c", "-o", "a.o"])  # the cache dir and its files exist
        outside = self.path("outside.txt")
        for rel in ("events/events.jsonl", "events/mark", "stats.journal", "stats", "kache.toml", "explain/last"):
            for kind in ("fifo", "link", "dir"):
                with self.subTest(path=rel, kind=kind):
                    self.write("outside.txt", "the user's own file\n")
                    planted = self.plant(rel, kind, outside)
                    r = self.run_bounded(["gcc", "-c", "a.c", "-o", "a.o"])
                    self.assertEqual(r.returncode, 0, r.stderr)
                    for command in (["report"], ["report", "--mark"], ["-s"], ["doctor", "--json"],
                                    ["explain", "--last"]):
                        self.run_bounded(command)
                    self.assertEqual(self.read("outside.txt"), "the user's own file\n", "a link redirected a write")
                    if rel == "events/events.jsonl" and kind == "fifo":
                        report = self.run_bounded(["report"])
                        self.assertIn("the event log was unreadable", report.stderr)
                        self.assertEqual(report.stderr.count("unreadable"), 1, report.stderr)
                    if os.path.isdir(planted) and not os.path.islink(planted):
                        os.rmdir(planted)
                    elif os.path.lexists(planted):
                        os.remove(planted)

    def test_a_planted_explain_directory_link_is_never_written_through(self):
        self.write("a.c", "int a(void) { return 1; }\n")
        self.gcc(["-c", "a.c", "-o", "a.o"])
        root = os.path.join(self.cache, "explain")
        source_dirs = [d for d in os.listdir(root) if len(d) == 16]
        self.assertEqual(len(source_dirs), 1, os.listdir(root))
        victim = self.path("victim")
        os.makedirs(victim)
        for i in range(10):  # more than the links kept per source: the oldest would be pruned
            self.write(f"victim/{i}.json", "{}")
        os.symlink(os.path.join(self.cache, "explain", "x"), os.path.join(victim, "gone.json"))  # dangling
        shutil.rmtree(os.path.join(root, source_dirs[0]))
        os.symlink(victim, os.path.join(root, source_dirs[0]))
        self.gcc(["-O1", "-c", "a.c", "-o", "a.o"])  # a miss that stores, records and prunes
        self.assertEqual(sorted(os.listdir(victim)), sorted([f"{i}.json" for i in range(10)] + ["gone.json"]))
        self.assertEqual(self.stats()["misses"], 2)

    def test_a_deeply_nested_line_is_damage_not_a_crash(self):
        self.write("a.c", "int a(void) { return 1; }\n")
        self.gcc(["-c", "a.c", "-o", "a.o"])
        with open(os.path.join(self.cache, "events", "events.jsonl"), "a") as f:
            f.write("[" * 600_000 + "\n")
            f.write('{"v":1,"outcome":"miss","counts":' + "[" * 600_000 + "]" * 600_000 + "}\n")  # valid JSON
        report = self.run_bounded(["report", "--all", "--json"])
        self.assertEqual(report.returncode, 0, report.stderr[-2000:])
        self.assertEqual(json.loads(report.stdout)["compiles"], 1)
        self.assertIn("2 damaged lines", report.stderr)
        doctor = self.run_bounded(["doctor", "--json"])
        self.assertGreaterEqual(doctor.returncode, 0, "doctor died of a signal")
        json.loads(doctor.stdout)

    def test_html_report_escapes_every_name_and_forbids_script(self):
        self.write("a.c", "int a(void) { return 1; }\n")
        self.gcc(["-c", "a.c", "-o", "a.o"])
        hostile = "x<img src=x onerror=alert(1)>-gcc"
        line = json.dumps({"v": 1, "t": 1, "build": "b'\"<b>", "pid": 1, "tool": hostile, "lang": "c",
                           "src": "<svg onload=alert(2)>.c", "outcome": "miss", "cause": "new-source",
                           "wall_us": 1000, "cpu_us": 1, "counts": {"misses": 1}})
        with open(os.path.join(self.cache, "events", "events.jsonl"), "a") as f:
            f.write(line + "\n")
        html = self.path("r.html")
        self.kache(["report", "--all", "--html", html])
        with open(html) as f:
            page = f.read()
        self.assertNotIn("<img", page)
        self.assertNotIn("<svg onload", page)
        self.assertIn("x&lt;img src=x onerror=alert(1)&gt;-gcc", page)
        markdown = self.kache(["report", "--all", "--markdown"]).stdout  # HTML where GitHub shows it
        self.assertNotRegex(markdown, r"<[a-zA-Z/]")
        self.assertIn("x&lt;img src=x onerror=alert(1)&gt;-gcc", markdown)
        self.assertIn('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                      'style-src \'unsafe-inline\'">', page)

    def test_terminal_output_drops_control_characters(self):
        name = "a\x1b]0;pwned\x07\x1b[2J.c"
        self.write(name, "int a(void) { return 1; }\n")
        self.gcc(["-c", name, "-o", "a.o"])
        self.gcc(["-O2", "-c", name, "-o", "a.o"])
        for text in (self.kache(["report", "--all"]).stdout, self.kache(["report", "--all", "--markdown"]).stdout,
                     self.kache(["explain", "--last"]).stdout):
            self.assertNotIn("\x1b", text)
            self.assertNotIn("\x07", text)
        self.assertIn("a?]0;pwned??[2J.c", self.kache(["report", "--all"]).stdout)
        self.write("x\x1b[2J.toml", "[cache\n")  # doctor quotes the file in its row
        doctor = self.kache(["doctor"], env={"KACHE_CONFIG": self.path("x\x1b[2J.toml")}, check=False).stdout
        self.assertIn("x?[2J.toml", doctor)
        self.assertNotIn("\x1b", doctor)


if __name__ == "__main__":
    kachetest.main()
