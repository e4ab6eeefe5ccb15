"""How kache is invoked (spec "Setup": the nvcc command with or without a path prefix, nvcc.exe, a
symlink named nvcc) and fidelity: what the build sees through kache is what the compiler gives it
(exit status, stdout, stderr, stdin, death by a signal)."""
import os
import shutil
import signal
import subprocess

import kachetest
from kachetest import KACHE, KERNEL, NVCC, KacheTestCase


class InvocationForms(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.write("k.cu", KERNEL)

    def miss_then_hit(self, run):
        """run(): one compile of k.cu to k.o; checks miss, hit and the object against plain nvcc."""
        r = run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_counts(hits=0, misses=1, passthrough=0)
        os.unlink(self.path("k.o"))
        r = run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_counts(hits=1, misses=1, passthrough=0)
        self.nvcc(["-c", "k.cu", "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def bin_dir(self, name, target):
        """A directory holding name -> target, to put first on PATH."""
        d = self.path("bin-" + name)
        os.makedirs(d)
        os.symlink(target, os.path.join(d, name))
        return d

    # --- forms -----------------------------------------------------------------------------------
    def test_bare_nvcc(self):
        self.miss_then_hit(lambda: self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"]))

    def test_nvcc_with_path_prefix(self):
        self.assertTrue(os.path.isabs(NVCC))
        self.miss_then_hit(lambda: self.kache([NVCC, "-c", "k.cu", "-o", "k.o"]))

    def run_through_link(self, args):
        """Runs `nvcc args` with a link nvcc -> kache first on PATH."""
        d = self.path("bin-nvcc")
        if not os.path.isdir(d):
            d = self.bin_dir("nvcc", KACHE)
        env = dict(self.env)
        env["PATH"] = d + os.pathsep + os.environ["PATH"]
        return subprocess.run(["nvcc"] + args, cwd=self.ws, env=env, capture_output=True, text=True, timeout=120)

    def test_symlink_named_nvcc_does_not_recurse(self):
        # The link is found first on PATH; kache must skip itself and run the real nvcc.
        r = self.run_through_link(["--version"])
        plain = self.nvcc(["--version"])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, plain.stdout, plain.stderr))
        self.assertEqual(self.stats()["passthrough_reasons"], {"informational": 1})

    def test_symlink_named_nvcc_compiles_and_caches(self):
        self.miss_then_hit(lambda: self.run_through_link(["-c", "k.cu", "-o", "k.o"]))

    def masquerade_links(self):
        """A directory of links nvcc, gcc, g++, cc, c++ -> kache, as a user puts first on PATH."""
        d = self.path("bin-links")
        os.makedirs(d)
        for name in ("nvcc", "gcc", "g++", "cc", "c++"):
            os.symlink(KACHE, os.path.join(d, name))
        return d

    def test_nvcc_inner_host_compiles_step_aside_with_debug_logging(self):
        # nvcc runs its host compiler (g++ on PATH: the link) inside a compile kache serves. That step is
        # the outer compile's business: not cached, not counted, silent. With KACHE_LOG=kache=debug the
        # inner kache's timestamped lines used to land in nvcc's stderr, so no outer result was ever
        # stored (0 hits in 3 builds), and each inner compile counted as a passthrough.
        links = self.masquerade_links()
        env = dict(self.env, PATH=links + os.pathsep + os.environ["PATH"])
        for logging in ({}, {"KACHE_LOG": "kache=debug"}):
            with self.subTest(logging=logging):
                self.kache(["--clear"])
                self.zero()
                for _ in range(3):
                    if os.path.exists(self.path("k.o")):
                        os.unlink(self.path("k.o"))
                    r = subprocess.run(["nvcc", "-c", "k.cu", "-o", "k.o"], cwd=self.ws, env=dict(env, **logging),
                                       capture_output=True, text=True, timeout=300)
                    self.assertEqual(r.returncode, 0, r.stderr)
                s = self.assert_counts(hits=2, misses=1, passthrough=0)
                self.assertEqual(s["passthrough_reasons"], {})

    def test_masquerade_host_compiler_switched_behind_it(self):
        # gcc -> kache first on PATH: nvcc's host compiler is the gcc the masquerade runs, not kache.
        # Another gcc (one that defines a macro the host code reads) placed after the links but before
        # the old one must miss, with the object a plain build gives now (it served the old host code).
        self.write("h.cu", "#ifndef HOSTVAL\n#define HOSTVAL 1\n#endif\nint host_value() { return HOSTVAL; }\n")
        links = self.masquerade_links()
        switch = self.path("bin-switch")
        os.makedirs(switch)
        env = dict(self.env, PATH=os.pathsep.join([links, switch, os.environ["PATH"]]))
        # nvcc by its path: found by name through the links, it would look for its tools beside them.
        for _ in range(2):
            self.kache([NVCC, "-c", "h.cu", "-o", "h.o"], env=env)
        self.assert_counts(hits=1, misses=1)
        real = shutil.which("g++-12") or shutil.which("g++")
        for name in ("gcc", "g++"):
            self.write(f"bin-switch/{name}", f'#!/bin/sh\nexec {real} -DHOSTVAL=2 "$@"\n')
            os.chmod(os.path.join(switch, name), 0o755)
        self.kache([NVCC, "-c", "h.cu", "-o", "h.o"], env=env)
        self.assert_counts(hits=1, misses=2)
        plain_env = dict(self.env, PATH=os.pathsep.join([switch, os.environ["PATH"]]))
        subprocess.run([NVCC, "-c", "h.cu", "-o", "plain.o"], cwd=self.ws, env=plain_env, check=True)
        self.assert_same_object(self.path("h.o"), self.path("plain.o"))

    def test_nvcc_exe_is_recognized(self):
        # A script, not a symlink: nvcc finds its toolkit from argv[0] without resolving links, so even
        # plain nvcc fails through a link named nvcc.exe in another directory.
        d = self.path("bin-exe")
        script = self.write("bin-exe/nvcc.exe", f'#!/bin/sh\nexec {os.path.realpath(NVCC)} "$@"\n')
        os.chmod(script, 0o755)
        env = {"PATH": d + os.pathsep + os.environ["PATH"]}
        self.miss_then_hit(lambda: self.kache(["nvcc.exe", "-c", "k.cu", "-o", "k.o"], env=env))
        # with a path prefix too
        self.kache([os.path.join(d, "nvcc.exe"), "-c", "k.cu", "-o", "k.o"], env=env)
        self.assertEqual(self.stats()["passthrough"], 0)

    def test_unknown_compiler_runs_unchanged(self):
        r = self.kache(["/bin/echo", "hello"])
        self.assertEqual((r.returncode, r.stdout), (0, "hello\n"))
        s = self.assert_counts(hits=0, misses=0, passthrough=1)
        self.assertEqual(s["passthrough_reasons"], {"unsupported-compiler": 1})
        r = self.kache(["sh", "-c", "exit 7"], check=False)
        self.assertEqual(r.returncode, 7)
        self.assertEqual(self.stats()["passthrough_reasons"], {"unsupported-compiler": 2})

    def test_missing_compiler(self):
        for name in ("no-such-compiler-kache-test", self.path("nowhere", "nvcc"), "nvcc.exe"):
            r = self.kache([name, "-c", "k.cu", "-o", "k.o"], check=False,
                           env={"PATH": "/usr/bin:/bin"} if name == "nvcc.exe" else None)
            self.assertEqual(r.returncode, 127, name)
            self.assertEqual(r.stdout, "")
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("kache:"), lines[0])
            self.assertIn(name, lines[0])
            self.assertTrue(lines[0].endswith("."), lines[0])
            self.assertEqual(lines[0].count(". "), 0, "one sentence: " + lines[0])
        self.assertFalse(os.path.exists(self.path("k.o")))

    # --- fidelity --------------------------------------------------------------------------------
    def test_failing_compile_reports_like_nvcc(self):
        self.write("bad.cu", "__global__ void k(float* x) { x[0] = 1.0f }\nint f() { return undeclared_name; }\n")
        args = ["-c", "bad.cu", "-o", "bad.o"]
        plain = self.nvcc(args, check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertIn("error", plain.stderr)
        for attempt in (1, 2):
            r = self.kache(["nvcc"] + args, check=False)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr),
                             f"attempt {attempt}")
            self.assertFalse(os.path.exists(self.path("bad.o")))
        s = self.assert_counts(hits=0, misses=0)
        self.assertEqual(s["stored"], 0)

    def assert_fails_like_nvcc(self, args, absent):
        """kache nvcc ARGS fails exactly as plain nvcc does and leaves none of the paths in absent."""
        plain = self.nvcc(args, check=False)
        self.assertNotEqual(plain.returncode, 0)
        for p in absent:
            self.assertFalse(os.path.exists(self.path(p)), f"plain nvcc left {p}")
        r = self.kache(["nvcc"] + args, check=False)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        for p in absent:
            self.assertFalse(os.path.exists(self.path(p)), f"kache left {p}")

    def fails_on_miss_and_on_hit(self, args, gone):
        """args name directory gone/: with it missing kache fails like nvcc, on a miss, then after the
        same command was stored (when gone/ existed), where the direct lookup finds the entry."""
        self.assert_fails_like_nvcc(args, ["k.o", gone])
        os.makedirs(self.path(gone))
        self.kache(["nvcc"] + args)
        self.assert_counts(hits=0, misses=1)
        shutil.rmtree(self.path(gone))
        if os.path.exists(self.path("k.o")):
            os.unlink(self.path("k.o"))
        self.assert_fails_like_nvcc(args, ["k.o", gone])
        s = self.assert_counts(hits=0, misses=1, passthrough=2)
        self.assertEqual(s["passthrough_reasons"], {"output-dir-missing": 2})

    def test_depfile_in_missing_directory_leaves_no_object(self):
        # nvcc fails and writes nothing; a fresh k.o would make a later `make` think it up to date.
        self.fails_on_miss_and_on_hit(["-c", "k.cu", "-o", "k.o", "-MD", "-MF", "nodir/k.d"], "nodir")

    def test_output_in_missing_directory_fails_like_nvcc(self):
        # nvcc: "can't create nodir/k.o", exit 1, no directory created. kache must not create it.
        self.fails_on_miss_and_on_hit(["-c", "k.cu", "-o", "nodir/k.o"], "nodir")
        self.assert_fails_like_nvcc(["-c", "k.cu", "-o", "nodir/deeper/k.o", "-MD", "-MF", "k.d"], ["nodir"])

    def test_output_spelled_through_a_missing_directory_fails_like_nvcc(self):
        # "nodir/../k.o" normalizes to k.o, but the kernel needs nodir: nvcc fails, so must kache, also
        # where the entry of the plain spelling would be a hit.
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o", "-MD", "-MF", "k.d"])
        os.unlink(self.path("k.o"))
        os.unlink(self.path("k.d"))
        self.assert_fails_like_nvcc(["-c", "k.cu", "-o", "nodir/../k.o", "-MD", "-MF", "k.d"], ["k.o", "nodir"])
        os.unlink(self.path("k.d"))  # nvcc writes the depfile before the assembler fails
        self.assert_fails_like_nvcc(["-c", "k.cu", "-o", "k.o", "-MD", "-MF", "nodir/../k.d"], ["k.o", "k.d"])
        self.assert_counts(hits=0, misses=1, passthrough=2)

    def test_missing_header_is_a_failed_compile_not_an_error(self):
        # -MMD makes kache list the closure with nvcc -M first: that listing fails on the user's code.
        self.write("bad.cu", '#include "nope.h"\n__global__ void k() {}\n')
        for extra in (["-MMD", "-MF", "bad.d"], ["-MD", "-MF", "bad.d"], []):
            self.assert_fails_like_nvcc(["-c", "bad.cu", "-o", "bad.o"] + extra, ["bad.o"])
        s = self.stats()
        self.assertEqual((s["errors"], s["compile_failed"], s["misses"], s["passthrough"]), (0, 3, 0, 0),
                         s["error_reasons"])
        self.assertRegex(self.kache(["-s"]).stdout, r"compile failed +3\n")

    def test_hit_replays_warnings_with_this_checkouts_paths(self):
        # Two checkouts share entries through [paths] base_dirs; nvcc names the absolute source in its
        # warnings, so the second checkout's hit must print its own path, as plain nvcc does there.
        warn = "__global__ void k(float* x) { int unused = 1; x[0] = 1.0f; }\n"
        results = []
        for name in ("one", "two"):
            src = self.write(f"{name}/w.cu", warn)
            args = ["-c", src, "-o", os.path.join(self.path(name), "w.o")]
            env = {"KACHE_PATHS_BASE_DIRS": self.path(name)}
            r = self.kache(["nvcc"] + args, cwd=self.path(name), env=env)
            plain = self.nvcc(args, cwd=self.path(name))
            self.assertIn(src + "(1): warning", plain.stderr)
            results.append((name, r, plain))
        self.assert_counts(hits=1, misses=1)
        for name, r, plain in results:
            self.assertEqual((r.stdout, r.stderr), (plain.stdout, plain.stderr), name)

    def test_passthrough_output_is_nvcc_output(self):
        plain = self.nvcc(["--version"])
        r = self.kache(["nvcc", "--version"])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertIn("Cuda compilation tools", r.stdout)

    def test_stdin_reaches_the_compiler(self):
        # nvcc reads a "-" input from stdin; kache passes it through and never caches it.
        for n, text in enumerate((KERNEL, KERNEL.replace("*= a", "+= a"))):
            r = self.kache(["nvcc", "-x", "cu", "-c", "-", "-o", "k.o"], input=text)
            self.assertEqual(r.returncode, 0, r.stderr)
            p = subprocess.run([NVCC, "-x", "cu", "-c", "-", "-o", "plain.o"], cwd=self.ws, input=text, text=True,
                               capture_output=True, env=self.env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assert_same_object(self.path("k.o"), self.path("plain.o"))
            self.assert_counts(hits=0, misses=0, passthrough=n + 1)
        r = self.kache(["/bin/cat"], input="through stdin\n")
        self.assertEqual(r.stdout, "through stdin\n")

    def test_host_compiler_killed_by_signal(self):
        # The host compiler dies by SIGKILL at nvcc's final host compile; nvcc reports it itself.
        wrapper = self.write("cc/g++", "#!/bin/sh\nfor a in \"$@\"; do\n  case \"$a\" in *cudafe1.cpp) "
                                       "kill -KILL $$;; esac\ndone\nexec /usr/bin/g++ \"$@\"\n")
        os.chmod(wrapper, 0o755)
        args = ["-ccbin", wrapper, "-c", "k.cu", "-o", "k.o"]
        plain = self.nvcc(args, check=False)
        self.assertNotEqual(plain.returncode, 0)
        r = self.kache(["nvcc"] + args, check=False)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertFalse(os.path.exists(self.path("k.o")))
        self.assertEqual(self.stats()["stored"], 0)

    def test_passthrough_dies_by_the_same_signal(self):
        r = self.kache(["/bin/sh", "-c", "kill -TERM $$"], check=False)
        self.assertEqual(r.returncode, -signal.SIGTERM)

    def test_compiler_dying_by_signal_kills_kache_the_same_way(self):
        # A compiler named nvcc that dies by SIGTERM on every run (its --version probe included).
        wrapper = self.write("nv/nvcc", "#!/bin/sh\nkill -TERM $$\n")
        os.chmod(wrapper, 0o755)
        r = self.kache([wrapper, "-c", "k.cu", "-o", "k.o"], check=False)
        self.assertEqual(r.returncode, -signal.SIGTERM, r.stderr)
        self.assertFalse(os.path.exists(self.path("k.o")))


if __name__ == "__main__":
    kachetest.main()
