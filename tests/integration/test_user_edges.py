"""What a user sees at the edges (issue 21): kache's own options are checked by kache (a typo is kache's
error, never a compile), ccache's habits work (-p, -k, -o, -M 0, -c, --evict-older-than, -x,
--print-stats, -sz, -X), the config files layer like ccache's (system < per-user < cache dir < environment)
and are edited one line at a time, warnings never reach a compile's stderr (they go to the cache dir's
log, with the time, once an hour), a relative cache.dir is refused, a missing source is a failed compile,
and cache.direct_mode = false still hits (through the compiler's dependency listing)."""
import json
import os
import re
import select
import shutil
import subprocess
import time

from kachetest import KACHE, KERNEL, KacheTestCase, main

OLD = time.time_ns() - 10**10  # sources older than the compile's clock tick: storable


def drain_pty(master):
    """What a finished process wrote to a pseudo-terminal, read without waiting; closes it."""
    text = b""
    while select.select([master], [], [], 0)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        text += chunk
    os.close(master)
    return text


class KacheOptions(KacheTestCase):
    def test_unknown_options_are_kaches_errors(self):
        cases = {"--bogus": None, "--show-stat": "--show-stats", "--zero-stat": "--zero-stats", "-F": None,
                 "--evict-older": "--evict-older-than"}
        for option, suggestion in cases.items():
            r = self.kache([option], check=False)
            self.assertEqual(r.returncode, 1, f"{option}: {r.stdout}{r.stderr}")
            self.assertTrue(r.stderr.startswith("kache: "), f"{option}: {r.stderr}")
            self.assertNotIn("nvcc", r.stderr.replace("kache nvcc", ""), f"{option} reached nvcc: {r.stderr}")
            if suggestion:
                self.assertIn(f"did you mean {suggestion}?", r.stderr)
        s = self.stats()
        self.assertEqual((s["passthrough"], s["misses"], s["errors"]), (0, 0, 0), "a typo counted as a compile")

    def test_flags_first_is_still_nvcc_for_cmake(self):
        # CMake 3.25's try_compile: kache -forward-unknown-to-host-compiler ... -c x.cu -o x.o
        self.write("k.cu", KERNEL, mtime_ns=OLD)
        self.kache(["-forward-unknown-to-host-compiler", "-c", "k.cu", "-o", "k.o"])
        os.remove(self.path("k.o"))
        self.kache(["-forward-unknown-to-host-compiler", "-c", "k.cu", "-o", "k.o"])
        self.kache(["-c", "k.cu", "-o", "k.o"])
        self.assertTrue(os.path.exists(self.path("k.o")))
        s = self.stats()
        self.assertEqual((s["misses"], s["hits"]), (2, 1), json.dumps(s, indent=1))  # the flag is keyed

    def test_show_get_and_set_config_keep_the_file(self):
        config = self.env["KACHE_CONFIG"]
        text = '# my settings\n[cache]\n# how big\nmax_size = "5G"  # for CI\ncompression_level = 4\n\n[log]\n# quiet\n'
        with open(config, "w") as f:
            f.write(text)
        self.assertIn("cache.max_size", self.kache(["-p"]).stdout)
        self.assertEqual(self.kache(["-k", "cache.max_size"]).stdout, "5.0 GiB\n")
        self.assertEqual(self.kache(["-k", "compression_level"]).stdout, "4\n")
        self.kache(["-o", "cache.max_size=2G"])
        self.kache(["-o", "cache.direct_mode=false"])
        with open(config) as f:
            edited = f.read()
        self.assertEqual(edited, text.replace('"5G"', '"2G"').replace(
            "compression_level = 4\n", "compression_level = 4\ndirect_mode = false\n"))
        self.assertEqual(self.kache(["-k", "cache.direct_mode"]).stdout, "false\n")
        r = self.kache(["-o", "cache.compression_level=99"], check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("compression level", r.stderr)
        r = self.kache(["-k", "cache.nope"], check=False)
        self.assertEqual(r.returncode, 1)

    def test_max_size_zero_means_no_limit_and_bare_numbers_say_the_unit(self):
        config = self.env["KACHE_CONFIG"]
        with open(config, "w") as f:
            f.write("# keep me\n[cache]\nmax_size = \"1G\"\n")
        self.kache(["-M", "0"])
        self.assertEqual(self.kache(["-k", "cache.max_size"]).stdout, "0 (no limit)\n")
        with open(config) as f:
            self.assertEqual(f.read(), "# keep me\n[cache]\nmax_size = \"0\"\n")
        r = self.kache(["-M", "1024"], check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no unit", r.stderr)
        with open(config, "w") as f:
            f.write("[cache]\nmax_size = 1024\n")
        r = self.kache(["-p"])
        self.assertIn("has no unit, so it means 1024 bytes", r.stderr)

    def test_config_layers_like_ccache(self):
        system = self.path("system.toml")
        with open(system, "w") as f:
            f.write('[cache]\nmax_size = "1G"\ncompression_level = 5\n')
        with open(self.env["KACHE_CONFIG"], "w") as f:
            f.write('[cache]\nmax_size = "2G"\n')
        os.makedirs(self.cache)
        with open(os.path.join(self.cache, "kache.toml"), "w") as f:
            f.write('# the cache dir\'s own\n[cache]\nmax_size = "3G"\n')
        env = {"KACHE_SYSTEM_CONFIG": system}
        self.assertEqual(self.kache(["-k", "cache.max_size"], env=env).stdout, "3.0 GiB\n")
        self.assertEqual(self.kache(["-k", "cache.compression_level"], env=env).stdout, "5\n")
        shown = self.kache(["-p"], env=env).stdout
        self.assertRegex(shown, r"cache\.max_size +3\.0 GiB +\(file " + re.escape(os.path.join(self.cache, "kache.toml")))
        self.assertRegex(shown, r"cache\.compression_level +5 +\(file " + re.escape(system))
        # -M edits the file the value in force came from.
        self.kache(["-M", "4G"], env=env)
        with open(os.path.join(self.cache, "kache.toml")) as f:
            self.assertEqual(f.read(), '# the cache dir\'s own\n[cache]\nmax_size = "4G"\n')
        self.assertEqual(self.kache(["-k", "cache.max_size"], env=dict(env, KACHE_MAX_SIZE="6G")).stdout, "6.0 GiB\n")


class KacheHousekeeping(KacheTestCase):
    def compile_one(self):
        self.write("k.cu", KERNEL, mtime_ns=OLD)
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])

    def test_print_stats_json_schema_and_sz(self):
        self.compile_one()
        lines = dict(l.split(" ", 1) for l in self.kache(["--print-stats"]).stdout.splitlines())
        self.assertEqual(lines["misses"], "1")
        self.assertEqual(lines["stats_schema"], "kache-stats-1")
        s = self.stats()
        self.assertEqual(s["schema"], "kache-stats-1")
        self.assertGreater(s["time"], 1_600_000_000)
        r = self.kache(["-sz"])
        self.assertRegex(r.stdout, r"misses +1\n")
        self.assertEqual(self.stats()["misses"], 0)
        self.assertIn("entry files", self.kache(["-s"]).stdout)
        self.assertIn("compiles served from the cache", self.kache(["-s", "-v"]).stdout)

    def test_evict_older_than_shows_progress_on_a_terminal(self):
        import pty
        self.compile_one()
        four_days_ago = time.time() - 4 * 86400
        for root, _, files in os.walk(self.cache):
            for name in files:
                if re.fullmatch(r"[0-9a-f]{8,}", name):
                    os.utime(os.path.join(root, name), (four_days_ago, four_days_ago))
        master, slave = pty.openpty()
        r = subprocess.run([KACHE, "--evict-older-than", "3d"], cwd=self.ws, env=self.env, stderr=slave,
                           capture_output=False, stdout=subprocess.PIPE, text=True)
        os.close(slave)
        text = drain_pty(master)
        self.assertEqual(r.returncode, 0)
        self.assertIn("Removed 2", r.stdout)
        self.assertIn("kache: removing old entries 100 %", text.decode())

    def test_evict_older_than_cleanup_and_compression(self):
        self.compile_one()
        self.assertEqual(self.stats()["entries"], 2)
        self.assertRegex(self.kache(["-x"]).stdout, r"compression ratio +\d+\.\d+ x")
        self.kache(["-c"])
        self.assertEqual(self.stats()["entries"], 2, "under the limit: -c keeps everything")
        r = self.kache(["--evict-older-than", "3d"])
        self.assertIn("Removed 0", r.stdout)
        four_days_ago = time.time() - 4 * 86400
        for root, _, files in os.walk(self.cache):
            for name in files:
                if re.fullmatch(r"[0-9a-f]{8,}", name):
                    os.utime(os.path.join(root, name), (four_days_ago, four_days_ago))
        r = self.kache(["--evict-older-than", "3d"])
        self.assertIn("Removed 2", r.stdout)
        self.assertEqual(self.stats()["entries"], 0)
        self.assertEqual(self.kache(["--evict-older-than", "soon"], check=False).returncode, 1)


class Recompress(KacheTestCase):
    """kache -X LEVEL (ccache's --recompress): every entry rewritten at LEVEL, still a hit, counters exact."""

    def stored_bytes(self):
        # What kache -s must report: every entry file and explain record (temp files start with '.').
        # <cache>/<k0>/<k1k2>/<key> and <cache>/explain/<k0>/<k1k2>/<key>.json, nothing else.
        total = 0
        for root, _, files in os.walk(self.cache):
            parts = os.path.relpath(root, self.cache).split(os.sep)
            record = parts[0] == "explain"
            if len(parts) - record != 2 or not all(re.fullmatch(r"[0-9a-f]+", p) for p in parts[record:]):
                continue
            for name in files:
                if re.fullmatch(r"[0-9a-f]{16,}" + (r"\.json" if record else ""), name):
                    total += os.path.getsize(os.path.join(root, name))
        return total

    def ratio(self):
        out = self.kache(["-x"]).stdout
        m = re.search(r"compression ratio +(\d+\.\d+) x", out)
        self.assertIsNotNone(m, out)
        return float(m.group(1))

    def test_recompress_keeps_hits_and_exact_size(self):
        if not shutil.which("g++"):
            self.skipTest("no g++")
        # Many similar functions: an object that compresses clearly better at level 19 than at 1.
        text = "".join(f"int f{i}(int x) {{ return x * {i} + (x >> {i % 7}) - {i * 3}; }}\n" for i in range(3000))
        self.write("big.cpp", text, mtime_ns=OLD)
        self.kache(["g++", "-O1", "-c", "big.cpp", "-o", "big.o"])
        with open(self.path("big.o"), "rb") as f:
            compiled = f.read()
        ratios = {}
        for hits, level in enumerate(["1", "19", "0"], start=1):
            r = self.kache(["-X", level])
            self.assertRegex(r.stdout, r"Recompressed [1-9]\d* cache entries", r.stdout)
            self.assertIn("Size before", r.stdout)
            ratios[level] = self.ratio()
            s = self.stats()
            self.assertEqual(s["cache_size"], self.stored_bytes(), f"-X {level}: counters off")
            self.assertEqual(s["entries"], 2)
            os.remove(self.path("big.o"))
            self.kache(["g++", "-O1", "-c", "big.cpp", "-o", "big.o"])
            self.assertEqual(self.stats()["hits"], hits, f"no hit after -X {level}")
            with open(self.path("big.o"), "rb") as f:
                self.assertEqual(f.read(), compiled, f"-X {level}: another object")
        self.assertGreater(ratios["19"], ratios["1"], ratios)
        self.assertGreater(ratios["1"], 1.5, ratios)
        self.assertLessEqual(ratios["0"], 1.0, ratios)  # uncompressed: the headers make it a little bigger
        for bad in ["20", "-1", "fast"]:
            r = self.kache(["-X", bad], check=False)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn("compression level", r.stderr)


class QuietCompiles(KacheTestCase):
    def test_warnings_show_once_a_build_and_go_to_the_log_once_an_hour(self):
        # Issue 42: a build's stderr is often a pipe (Ninja's) that a person still reads: the first
        # warning of each cause in a build is one line there; the rest of the build only logs it.
        self.write("k.cu", KERNEL, mtime_ns=OLD)
        plain = self.nvcc(["-c", "k.cu", "-o", "plain.o"])
        for build in ("b1", "b2"):
            for i in range(3):
                r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env={"KACHE_MAX_SIZE": "abc", "KACHE_BUILD_ID": build})
                self.assertEqual(r.stdout, plain.stdout)
                if i == 0:
                    self.assertRegex(r.stderr, r"^kache: warning: KACHE_MAX_SIZE='abc' is not a size[^\n]*"
                                               rf"\(logged in {re.escape(self.cache)}/kache.log\)\n$")
                    self.assertEqual(r.stderr.count("kache:"), 1, r.stderr)
                else:
                    self.assertEqual(r.stderr, plain.stderr, f"build {build}, compile {i + 1}")
        r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"],
                       env={"KACHE_MAX_SIZE": "abc", "KACHE_BUILD_ID": "b3", "KACHE_LOG_WARNINGS": "log"})
        self.assertEqual(r.stderr, plain.stderr, "log.warnings = log")
        with open(os.path.join(self.cache, "kache.log")) as f:
            lines = [l for l in f.read().splitlines() if "KACHE_MAX_SIZE" in l]
        self.assertEqual(len(lines), 1, "once an hour, not once a compile:\n" + "\n".join(lines))
        self.assertRegex(lines[0], r"^\[kache \d+ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")

    def test_a_terminal_sees_the_warning_once_a_build(self):
        # A person watching (stderr is a terminal) sees the warning once in a build (both compiles are in
        # this test's process group: one build), as a pipe does.
        import pty
        self.write("k.cu", KERNEL, mtime_ns=OLD)
        env = dict(self.env, KACHE_MAX_SIZE="abc")
        seen = []
        for _ in range(2):
            master, slave = pty.openpty()
            subprocess.run([KACHE, "nvcc", "-c", "k.cu", "-o", "k.o"], cwd=self.ws, env=env, stderr=slave,
                           stdout=subprocess.DEVNULL, check=True)
            os.close(slave)
            text = drain_pty(master)
            seen.append(text.decode())
        self.assertIn("KACHE_MAX_SIZE", seen[0])
        self.assertNotIn("KACHE_MAX_SIZE", seen[1], "twice within the hour")

    def test_relative_cache_dir_is_refused(self):
        self.write("k.cu", KERNEL, mtime_ns=OLD)
        env = {"KACHE_DIR": "relative-cache", "XDG_CACHE_HOME": self.path("xdg")}
        r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env)
        # The refusal is the build's one warning line, naming no log (there is no cache dir to hold one).
        self.assertRegex(r.stderr, r"^kache: warning: KACHE_DIR='relative-cache' is a relative path[^\n]*"
                                   r"every compile passes through until it is fixed\.\n$")
        self.assertFalse(os.path.exists(self.path("relative-cache")), "a cache under the working directory")
        # The refusal is what every command reports: the default directory is another cache, never a
        # fallback (-s and -p used to say "using ~/.cache/kache" and show that cache's figures).
        default = self.path("xdg", "kache")
        for args in (["-s", "--json"], ["-s"], ["-C"]):
            with self.subTest(args=args):
                r = self.kache(args, env=env, check=False)
                self.assertEqual((r.returncode, r.stdout), (1, ""), r.stderr)
                self.assertIn("relative path", r.stderr)
                self.assertIn("every compile passes through", r.stderr)
                self.assertNotIn(default, r.stdout + r.stderr)
        r = self.kache(["-p"], env=env)
        self.assertIn("relative path", r.stderr)
        self.assertRegex(r.stdout, r"(?m)^cache\.dir +refused \(see above\): no cache ")
        self.assertNotIn(default, r.stdout)
        self.assertFalse(os.path.exists(os.path.join(default, "stats.journal")), "counted in another cache")
        r = self.kache(["doctor", "--json"], env=env, check=False)
        rows = {f'{x["section"]}.{x["name"]}': x for x in json.loads(r.stdout)["rows"]}
        self.assertEqual(rows["config.cache-dir"]["status"], "fail")
        self.assertEqual([k for k in rows if k.startswith("cache.")], [], "doctor showed another cache")

    def test_cache_dir_that_is_a_file(self):
        # -C used to say it removed 0 entries from a file, as if it were an empty cache.
        self.write("not-a-dir", "a regular file\n")
        env = {"KACHE_DIR": self.path("not-a-dir")}
        for args in (["-C"], ["-s"], ["-c"]):
            with self.subTest(args=args):
                r = self.kache(args, env=env, check=False)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("is not a directory", r.stderr)
                self.assertNotIn("Removed", r.stdout)
        self.assertEqual(self.read("not-a-dir"), "a regular file\n")

    def test_invalid_config_file_is_not_shown_as_absent(self):
        self.write(".kache.toml", "[cache\nmax_size = 1\n")
        r = self.kache(["-p"])
        self.assertIn("is not valid TOML", r.stderr)
        line = next(l for l in r.stdout.splitlines() if l.startswith("config file:"))
        self.assertIn("(not read: see the problem above)", line)

    def test_config_path_that_is_a_directory(self):
        self.write("k.cu", KERNEL, mtime_ns=OLD)
        os.makedirs(self.path("confdir"))
        env = {"KACHE_CONFIG": self.path("confdir")}
        r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env)
        self.assertRegex(r.stderr, r"^kache: warning: the config file \S+/confdir is a directory[^\n]*\(logged in ")
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        with open(os.path.join(self.cache, "kache.log")) as f:
            self.assertIn("is a directory", f.read())
        r = self.kache(["doctor", "--json"], env=env, check=False)
        rows = {f'{x["section"]}.{x["name"]}': x for x in json.loads(r.stdout)["rows"]}
        self.assertEqual(rows["config.KACHE_CONFIG"]["status"], "fail")

    def test_missing_source_is_a_failed_compile(self):
        r = self.kache(["g++", "-c", "missing.cpp", "-o", "m.o"], check=False)
        self.assertNotEqual(r.returncode, 0)
        s = self.stats()
        self.assertEqual((s["compile_failed"], s["errors"]), (1, 0), json.dumps(s, indent=1))


class DirectModeOff(KacheTestCase):
    def check(self, compiler, source, text):
        self.write("h.h", "#define VALUE 1\n", mtime_ns=OLD)
        self.write(source, '#include "h.h"\n' + text, mtime_ns=OLD)
        env = {"KACHE_DIRECT_MODE": "false"}
        for _ in range(2):
            self.kache([compiler, "-c", source, "-o", "x.o"], env=env)
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"], s["direct_hits"]), (1, 1, 0), json.dumps(s, indent=1))
        self.write("h.h", "#define VALUE 2\n", mtime_ns=OLD)
        self.kache([compiler, "-c", source, "-o", "x.o"], env=env)
        s = self.stats()
        self.assertEqual((s["hits"], s["misses"]), (1, 2), "an edited header must miss")
        self.kache([compiler, "-c", source, "-o", "x.o"], env=env)
        self.assertEqual(self.stats()["hits"], 2)

    def test_nvcc(self):
        self.check("nvcc", "k.cu", KERNEL + "int value() { return VALUE; }\n")

    def test_gxx(self):
        if not shutil.which("g++"):
            self.skipTest("no g++")
        self.check("g++", "a.cpp", "int value() { return VALUE; }\n")


if __name__ == "__main__":
    main()
