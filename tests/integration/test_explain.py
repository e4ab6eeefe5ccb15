"""kache explain: which key field made a compile miss, against the entries recorded for its source.

Each case stores one entry through kache (a real nvcc miss), changes exactly one input (a flag, a keyed
environment variable, a header, the toolchain), then asks `kache explain -- nvcc ARGS` (no compile) and,
after compiling the changed command, `kache explain --last`: both must name that input and nothing else."""
import json
import os
import stat

import kachetest
from kachetest import KacheTestCase

KERNEL = r"""
#include "h.cuh"
__global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }
"""
HEADER = "#define FACTOR 2.0f\n"
BASE = ["-c", "k.cu", "-o", "k.o", "-Iinc", "-O2"]


class Explain(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.write("inc/h.cuh", HEADER)
        self.write("k.cu", KERNEL)
        # LANG is keyed (replayed diagnostics): pin it so the env case changes exactly one variable.
        self.env["LANG"] = "C"
        self.kache(["nvcc"] + BASE)
        self.assertEqual(self.stats()["stored"], 1)

    def explain(self, args, env=None, last=False):
        r = self.kache(["explain", "--json"] + (["--last"] if last else ["--", "nvcc"] + args), env=env)
        return json.loads(r.stdout)

    def assert_only(self, verdict, field, entry=..., now=..., path_end=None):
        self.assertEqual(verdict["status"], "differs", json.dumps(verdict, indent=1))
        diffs = verdict["differences"]
        self.assertTrue(diffs, verdict)
        self.assertEqual({d["field"] for d in diffs}, {field}, json.dumps(diffs, indent=1))
        if entry is not ...:
            self.assertIn(entry, [d["entry"] for d in diffs])
        if now is not ...:
            self.assertIn(now, [d["now"] for d in diffs])
        if path_end is not None:
            self.assertTrue(all(d["path"].endswith(path_end) for d in diffs), diffs)

    def both(self, args, field, env=None, **expect):
        """Explains the changed command before compiling it, then compiles it and explains --last."""
        self.assert_only(self.explain(args, env=env), field, **expect)
        self.kache(["nvcc"] + args, env=env)
        self.assert_only(self.explain(None, env=env, last=True), field, **expect)

    def test_unchanged_command_matches(self):
        v = self.explain(BASE)
        self.assertEqual(v["status"], "match", v)
        self.assertEqual(v["differences"], [])
        self.assertEqual(v["source"], self.path("k.cu"))

    def test_computed_include_is_named_not_a_match(self):
        # `#include HDR` leaves the entry without a direct-mode record: with the preprocessed fallback
        # off, every build misses. explain said "no difference ... a lookup finds it" and the report
        # blamed a header (issue 35: ggml's sam.cpp showed header-changed on /usr/include/stdc-predef.h);
        # both name the file with the computed name. (test_preprocessed_fallback.py: the fallback on.)
        self.env["KACHE_PREPROCESSED_FALLBACK"] = "0"
        self.write("c.cu", '#define HDR "inc/h.cuh"\n#include HDR\n__global__ void k(float* x) { x[0] *= FACTOR; }\n')
        args = ["-c", "c.cu", "-o", "c.o", "-O2"]
        self.kache(["nvcc"] + args)
        self.kache(["nvcc"] + args)
        self.assertEqual(self.stats()["hits"], 0)
        for v in (self.explain(args), self.explain(None, last=True)):
            self.assertEqual(v["status"], "computed-include", json.dumps(v, indent=1))
            self.assertIn(self.path("c.cu"), v["message"])
            self.assertFalse(v["preprocessed_fallback"])
        report = json.loads(self.kache(["report", "--all", "--json"]).stdout)
        second = [e for e in report["compile_events"] if e["source"].endswith("c.cu")][-1]
        self.assertEqual((second["outcome"], second["cause"], second["cause_detail"]),
                         ("miss", "computed-include", self.path("c.cu")), second)

    def test_changed_flag(self):
        self.both(["-c", "k.cu", "-o", "k.o", "-Iinc", "-O3"], "arg", entry="-O2", now="-O3")

    def test_changed_environment_variable(self):
        self.both(BASE, "env:LANG", env={"LANG": "C.UTF-8"}, entry="=C", now="=C.UTF-8")

    def test_changed_header(self):
        self.write("inc/h.cuh", "#define FACTOR 3.0f\n")
        self.both(BASE, "header", path_end="inc/h.cuh")

    def test_header_included_under_two_spellings_is_one_difference(self):
        # nvcc's dependency file lists a header included as "g.h" and as "./g.h" twice; explain listed
        # one change twice.
        self.write("g.h", "#ifndef G_H\n#define G_H\n#define G 1\n#endif\n")
        self.write("two.cu", '#include "g.h"\n#include "./g.h"\n__global__ void two(int* p) { *p = G; }\n')
        args = ["-c", "two.cu", "-o", "two.o"]
        self.kache(["nvcc"] + args)
        self.write("g.h", "#ifndef G_H\n#define G_H\n#define G 2\n#endif\n")
        v = self.explain(args)
        self.assert_only(v, "header", path_end="g.h")
        self.assertEqual(len(v["differences"]), 1, json.dumps(v["differences"], indent=1))

    def test_changed_toolchain(self):
        # A host compiler earlier on PATH (a wrapper around the same gcc): nvcc runs it, and only the
        # toolchain id (the host compiler's content) changes.
        wrap = self.path("wrap")
        os.makedirs(wrap)
        gcc = os.path.join(wrap, "gcc")
        with open(gcc, "w") as f:
            f.write('#!/bin/sh\nexec /usr/bin/gcc "$@"\n')
        os.chmod(gcc, os.stat(gcc).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        env = {"PATH": wrap + os.pathsep + self.env["PATH"]}
        self.both(BASE, "toolchain", env=env)
        text = self.kache(["explain", "--last"], env=env).stdout
        self.assertIn("toolchain", text)
        self.assertIn(gcc, text)  # the description of the toolchain in use names the wrapper

    def test_shadowing_header_with_closure(self):
        # A header that appears earlier on the search path changes no recorded file: only the
        # dependency listing (--closure runs nvcc -M) finds it.
        args = ["-c", "k.cu", "-o", "k.o", "-Iinc2", "-Iinc", "-O2"]
        os.makedirs(self.path("inc2"))
        self.kache(["nvcc"] + args)
        self.write("inc2/h.cuh", "#define FACTOR 4.0f\n")
        self.assertEqual(self.explain(args)["status"], "match")
        v = self.kache(["explain", "--json", "--closure", "--", "nvcc"] + args)
        v = json.loads(v.stdout)
        self.assert_only(v, "header", entry=None, path_end="inc2/h.cuh")

    def test_text_output_names_the_flag(self):
        r = self.kache(["explain", "--", "nvcc", "-c", "k.cu", "-o", "k.o", "-Iinc", "-O3"])
        self.assertIn("arg", r.stdout)
        self.assertIn("-O2 -> (absent)", r.stdout)
        self.assertIn("(absent) -> -O3", r.stdout)

    def test_no_entry_for_source(self):
        self.write("other.cu", KERNEL)
        v = self.explain(["-c", "other.cu", "-o", "other.o", "-Iinc"])
        self.assertEqual(v["status"], "no-entry", v)

    def test_passthrough_reason(self):
        v = self.explain(["-E", "k.cu", "-Iinc"])
        self.assertEqual(v["status"], "passthrough", v)
        self.assertTrue(v["passthrough"]["reason"])
        v = self.explain(BASE, env={"KACHE_DISABLE": "1"})
        self.assertEqual(v["passthrough"]["reason"], "disabled")

    def test_records_are_bounded_and_off_the_hit_path(self):
        root = os.path.join(self.cache, "explain")
        before = {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
                  for d, _, fs in os.walk(root) for f in fs}
        self.kache(["nvcc"] + BASE)  # a hit
        self.assertEqual(self.stats()["hits"], 1)
        after = {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
                 for d, _, fs in os.walk(root) for f in fs}
        self.assertEqual(before, after, "a hit wrote explain records")
        for level in range(8):  # nine entries in all, one more than kept
            self.kache(["nvcc", "-c", "k.cu", "-o", "k.o", "-Iinc", f"-DLEVEL={level}"])
        # explain/<source>/ links the records (stored in explain/<k0>/<k1k2>/, beside their entries' shards).
        dirs = [d for d in os.listdir(root) if len(d) == 16 and os.path.isdir(os.path.join(root, d))]
        self.assertEqual(len(dirs), 1)
        self.assertEqual(len(os.listdir(os.path.join(root, dirs[0]))), 8)
        stored = [f for d, _, fs in os.walk(root) for f in fs if len(os.path.relpath(d, root)) == 4]
        self.assertEqual(len(stored), 9, stored)  # every stored entry keeps its record until evicted


if __name__ == "__main__":
    kachetest.main()
