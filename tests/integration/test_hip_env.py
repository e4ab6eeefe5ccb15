"""hipcc's environment through kache (issue 23, review #6): HIPCC_VERBOSE and Perl's variables.

- HIPCC_VERBOSE with a bit that makes hipcc print (0x1 commands, 0x2 paths, 0x4 arguments): a miss's
  stdout would name kache's scratch files, so the compile passes through (env-verbose) and prints what
  plain hipcc prints; a value that prints nothing is keyed and cached.
- hipcc is Perl: a module in PERL5LIB (or PERLLIB, PERL5OPT's -M) shadows one hipcc loads and can change
  the clang line; kache hashes no such file, so the compile passes through (env_unmodeled), never a
  stale entry.
Exits 77 (skipped) where hipcc is absent.
"""
import os
import shutil
import subprocess
import sys
import time

import kachetest
from kachetest import KacheTestCase

HIPCC = shutil.which("hipcc")

KERNEL = r"""
#include <hip/hip_runtime.h>
#ifndef SCALE
#define SCALE 1
#endif
__global__ void k(float* x) { x[threadIdx.x] = sqrtf(x[threadIdx.x + 1]) * SCALE; }
"""
ARGS = ["--genco", "--offload-arch=gfx90a", "k.hip", "-o", "k.hsaco"]

# A File::Basename that hipcc.pl and hipvars.pm load from PERL5LIB before Perl's own: it loads the real
# one, then sets the flags hipcc appends (read after its `use` lines) from a file beside it.
SHADOW = r"""package File::Basename;
my ($here) = __FILE__ =~ m{^(.*)/File/Basename\.pm$};
for my $dir (@INC) {
    next if !defined $dir || ref $dir || $dir eq $here;
    if (-e "$dir/File/Basename.pm") { do "$dir/File/Basename.pm" or die "$dir: $@ $!"; last; }
}
open(my $f, '<', "$here/scale") or die "scale: $!";
my $scale = <$f>;
chomp $scale;
$ENV{HIPCC_COMPILE_FLAGS_APPEND} = "-DSCALE=$scale";
1;
"""


class HipEnvTest(KacheTestCase):
    def setUp(self):
        # KacheTestCase's workspace without its nvcc requirement.
        self.private_workspace("kache-hip-env-", kachetest.HIP_VARIABLES + ("PERL",))
        self.write("k.hip", KERNEL)
        time.sleep(0.05)

    def plain(self, args, env=None):
        e = dict(self.env, **(env or {}))
        r = subprocess.run([HIPCC] + args, cwd=self.ws, env=e, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_hipcc_verbose_that_prints_passes_through_with_plain_stdout(self):
        passed = 0
        for value in ("1", "2", "4", "7", "0x1", " 1"):
            with self.subTest(HIPCC_VERBOSE=value):
                env = {"HIPCC_VERBOSE": value}
                p = self.plain(ARGS, env)
                plain = self.read("k.hsaco", "rb")
                os.remove(self.path("k.hsaco"))
                r = self.kache(["hipcc"] + ARGS, env=env)
                self.assertEqual(r.stdout, p.stdout, "kache's stdout differs from plain hipcc's")
                self.assertEqual(self.read("k.hsaco", "rb"), plain)
                if value in ("1", "7"):
                    self.assertIn("hipcc-cmd:", r.stdout)  # it printed, or the test proves nothing
                passed += 1
        s = self.assert_counts(hits=0, misses=0, passthrough=passed)
        self.assertEqual(s["passthrough_reasons"].get("env-verbose"), passed, s["passthrough_reasons"])

    def test_hipcc_verbose_that_prints_nothing_is_keyed_and_cached(self):
        for value in ("0", "8", ""):
            with self.subTest(HIPCC_VERBOSE=value):
                env = {"HIPCC_VERBOSE": value}
                p = self.plain(ARGS, env)
                plain = self.read("k.hsaco", "rb")
                for _ in range(2):
                    os.remove(self.path("k.hsaco"))
                    r = self.kache(["hipcc"] + ARGS, env=env)
                    self.assertEqual((r.stdout, r.stderr), (p.stdout, p.stderr))
                    self.assertEqual(self.read("k.hsaco", "rb"), plain)
        # One miss per value (each keyed apart), one hit each.
        self.assert_counts(hits=3, misses=3, passthrough=0)

    def test_perl5lib_shadowing_a_module_hipcc_loads_is_never_stale(self):
        self.plain(ARGS)
        unshadowed = self.read("k.hsaco", "rb")
        self.kache(["hipcc"] + ARGS)
        self.assertEqual(self.read("k.hsaco", "rb"), unshadowed)
        self.write("perl/File/Basename.pm", SHADOW)
        for var in ("PERL5LIB", "PERLLIB"):
            for scale in ("3", "5"):
                with self.subTest(variable=var, scale=scale):
                    self.write("perl/scale", scale + "\n")
                    env = {var: self.path("perl")}
                    self.plain(ARGS, env)
                    shadowed = self.read("k.hsaco", "rb")
                    self.assertNotEqual(shadowed, unshadowed, "the shadow must change the code, or the trap proves nothing")
                    os.remove(self.path("k.hsaco"))
                    self.kache(["hipcc"] + ARGS, env=env)
                    self.assertEqual(self.read("k.hsaco", "rb"), shadowed, "stale: kache's output is not plain hipcc's")
        # PERL5OPT's -I does the same.
        self.kache(["hipcc"] + ARGS, env={"PERL5OPT": "-I" + self.path("perl")})
        self.assertEqual(self.read("k.hsaco", "rb"), shadowed)
        s = self.assert_counts(hits=0, misses=1, passthrough=5)
        self.assertEqual(s["passthrough_reasons"].get("env_unmodeled"), 5, s["passthrough_reasons"])

    def test_hipcc_rewritten_argument_and_cxx_suffixes_are_not_labeled_hip(self):
        # hipcc.pl replaces any argument matching /--genco/ (-o's value aside) with --cuda-device-only: the
        # define disappears and the compile turns device-only, which the planner never saw.
        args = ["-c", "--offload-arch=gfx90a", "-DX=--genco", "k.hip", "-o", "k.o"]
        self.plain(args)
        plain = self.read("k.o", "rb")
        os.remove(self.path("k.o"))
        self.kache(["hipcc"] + args)
        self.assertEqual(self.read("k.o", "rb"), plain)
        # hipcc adds -x hip for .cpp/.cxx/.cc/.C/.cu/.cuh only: a .c++ file is compiled as C++.
        self.write("h.c++", "int host_only() { return 1; }\n")
        args = ["-c", "--offload-arch=gfx90a", "h.c++", "-o", "h.o"]
        self.plain(args)
        plain = self.read("h.o", "rb")
        os.remove(self.path("h.o"))
        self.kache(["hipcc"] + args)
        self.assertEqual(self.read("h.o", "rb"), plain)
        s = self.assert_counts(hits=0, misses=0, passthrough=2)
        self.assertEqual(s["passthrough_reasons"].get("hipcc-rewrite"), 1, s["passthrough_reasons"])
        self.assertEqual(s["passthrough_reasons"].get("language"), 1, s["passthrough_reasons"])


if __name__ == "__main__":
    if HIPCC is None:
        print("hipcc is not on PATH: skipped")
        sys.exit(77)
    kachetest.main()
