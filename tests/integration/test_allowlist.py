"""Spec: the extra allow-list ([cc] extra_allowlist_flags / KACHE_CC_EXTRA_ALLOWLIST_FLAGS).

--maxrregcount is outside the built-in table (the spec's own example): it passes through by default
and is cached once allow-listed. An entry matches the flag itself or the flag followed by =value; a
value given as a separate argument counts as another unknown argument."""
import os
import shutil

import kachetest
from kachetest import KacheTestCase

# Enough live values that the register limit changes the device code (measured: =32 and =64 differ).
REGS = r"""
__global__ void k(float* x, int n) {
  float a[24];
#pragma unroll
  for (int i = 0; i < 24; ++i) a[i] = x[i * n + threadIdx.x];
  float s = 0;
#pragma unroll
  for (int i = 0; i < 24; ++i) s += a[i] * a[(i * 7) % 24];
  x[threadIdx.x] = s;
}
"""


class Allowlist(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.write("k.cu", REGS)

    def compile(self, flags, out="k.o", env=None):
        return self.kache(["nvcc", "-c", "k.cu", "-o", out] + list(flags), env=env)

    def assert_passthrough(self, args, reason="unknown-flag", blocking=None, env=None):
        self.zero()
        r, log = self.log_of(["nvcc"] + args, env=env)
        self.assertEqual(r.returncode, 0, log)
        lines = [l for l in log.splitlines() if f"passthrough ({reason})" in l]
        self.assertEqual(len(lines), 1, log)
        if blocking:
            self.assertIn(blocking, lines[0])
        s = self.assert_counts(hits=0, misses=0, passthrough=1)
        self.assertEqual(s["passthrough_reasons"], {reason: 1})

    def miss_then_hit(self, flags, env=None):
        self.compile(flags, env=env)
        self.assert_counts(hits=0, misses=1, passthrough=0)
        os.unlink(self.path("k.o"))
        self.compile(flags, env=env)
        self.assert_counts(hits=1, misses=1, passthrough=0)
        self.nvcc(["-c", "k.cu", "-o", "plain.o"] + list(flags))
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def test_not_allowlisted_passes_through(self):
        self.assert_passthrough(["-c", "k.cu", "-o", "k.o", "--maxrregcount=64"], blocking="--maxrregcount=64")
        self.nvcc(["-c", "k.cu", "-o", "plain.o", "--maxrregcount=64"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def test_allowlisted_by_environment_is_cached(self):
        self.miss_then_hit(["--maxrregcount=64"], env={"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "--maxrregcount"})

    def test_allowlisted_in_list_with_other_entries(self):
        # The variable is a list: comma or space separated.
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "--extra-device-vectorization, --maxrregcount"}
        self.miss_then_hit(["--maxrregcount=64"], env=env)

    def test_allowlisted_by_config_file_is_cached(self):
        with open(self.env["KACHE_CONFIG"], "w") as f:
            f.write('[cc]\nextra_allowlist_flags = ["--maxrregcount"]\n')
        self.miss_then_hit(["--maxrregcount=64"])
        s = self.stats()
        self.assertEqual(s["passthrough_reasons"], {})

    def test_separate_value_passes_through_even_when_allowlisted(self):
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "--maxrregcount"}
        # "64" counts as another unknown argument, wherever it stands; the log names it.
        self.assert_passthrough(["-c", "k.cu", "-o", "k.o", "--maxrregcount", "64"], blocking="64", env=env)
        self.nvcc(["-c", "k.cu", "-o", "plain.o", "--maxrregcount=64"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        os.unlink(self.path("k.o"))
        self.assert_passthrough(["-c", "--maxrregcount", "64", "k.cu", "-o", "k.o"], blocking="64", env=env)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def test_entry_with_value_matches_only_that_value(self):
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "--maxrregcount=64"}
        self.assert_passthrough(["-c", "k.cu", "-o", "k.o", "--maxrregcount=32"], blocking="--maxrregcount=32",
                                env=env)
        self.assertTrue(os.path.exists(self.path("k.o")))

    def test_entry_is_not_a_prefix_match(self):
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "--maxrreg"}
        self.assert_passthrough(["-c", "k.cu", "-o", "k.o", "--maxrregcount=64"], blocking="--maxrregcount=64",
                                env=env)
        self.assertTrue(os.path.exists(self.path("k.o")))

    def test_different_values_key_apart(self):
        env = {"KACHE_CC_EXTRA_ALLOWLIST_FLAGS": "--maxrregcount"}
        # Same output name both times: only the value tells the two compiles apart.
        self.compile(["--maxrregcount=32"], env=env)
        shutil.copy(self.path("k.o"), self.path("r32.o"))
        self.compile(["--maxrregcount=64"], env=env)
        shutil.copy(self.path("k.o"), self.path("r64.o"))
        self.assert_counts(hits=0, misses=2, passthrough=0)
        self.nvcc(["-c", "k.cu", "-o", "p32.o", "--maxrregcount=32"])
        self.nvcc(["-c", "k.cu", "-o", "p64.o", "--maxrregcount=64"])
        self.assert_same_object(self.path("r32.o"), self.path("p32.o"))
        self.assert_same_object(self.path("r64.o"), self.path("p64.o"))
        self.assert_different_object(self.path("p32.o"), self.path("p64.o"))
        # Each value hits its own entry.
        self.compile(["--maxrregcount=32"], env=env)
        self.assert_counts(hits=1, misses=2, passthrough=0)
        self.assert_same_object(self.path("k.o"), self.path("p32.o"))

if __name__ == "__main__":
    kachetest.main()
