"""Compilers behind wrapper scripts, read by what they do (compiler/gcc/wrapper.hpp): the H100 host's
layout (CMake picks /opt/gcc/bin/g++, a script running `g++-real -B/opt/gcc/bin/ "$@"`) is cached for C,
C++ and nvcc's host compiler and hits from a fresh build dir; every way a wrapper's behaviour can change
(a program in its -B directory, PATH, a variable it expands, BASH_ENV, printf -v, $'...', an added
-Werror=...) is a miss with the object a plain build gives now; a wrapper that may set a variable the
compiler reads passes through (wrapper-environment); set -x and echo >&2 never reach the stored
diagnostics. Each case served a stale object, or passed every compile through, before."""
import os
import shutil
import subprocess
import tempfile

import buildsys
import kachetest
from kachetest import KacheTestCase

GXX = shutil.which("g++-12") or shutil.which("g++")
GCC = shutil.which("gcc-12") or shutil.which("gcc")
NVCC = shutil.which("nvcc")
SOURCE = "#ifndef X\n#define X 3\n#endif\nint x = X;\nint f(void) { return x; }\n"


class WrapperBehaviour(KacheTestCase):
    def setUp(self):
        super().setUp()
        if GXX is None or GCC is None:
            self.skipTest("gcc is not installed")
        self.write("m.c", SOURCE)
        self.write("m.cpp", SOURCE)
        # The H100 host's layout: real drivers and a -B directory under one prefix.
        self.opt = self.path("opt", "gcc", "bin")
        os.makedirs(self.opt)
        for name, real in (("gcc", GCC), ("g++", GXX)):
            os.symlink(real, os.path.join(self.opt, name + "-real"))
            self.script(os.path.join(self.opt, name), f'exec {self.opt}/{name}-real -B{self.opt}/ "$@"')

    def script(self, path, body, interpreter="#!/bin/sh"):
        p = path if os.path.isabs(path) else self.path(path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(f"{interpreter}\n{body}\n")
        os.chmod(p, 0o755)
        return p

    def counts(self):
        s = self.stats()
        return s["hits"], s["misses"], s["passthrough"]

    def compile(self, driver, src="m.c", env=None):
        """kache's compile, checked against the wrapper's own plain compile (object and stderr)."""
        e = dict(self.env)
        e.update(env or {})
        r = self.kache([driver, "-c", src, "-o", "m.o"], cwd=self.ws, env=e)
        plain = subprocess.run([driver, "-c", src, "-o", "plain.o"], cwd=self.ws, env=e, capture_output=True,
                               text=True, check=True)
        self.assert_same_object(self.path("m.o"), self.path("plain.o"))
        return r, plain

    def assert_follows(self, driver, change, env=None, after_env=None):
        """A miss, a hit; then after change() a miss again, with the object a plain build gives now."""
        self.compile(driver, env=env)
        self.compile(driver, env=env)
        self.assertEqual(self.counts(), (1, 1, 0))
        change()
        self.compile(driver, env=after_env if after_env is not None else env)
        self.assertEqual(self.counts(), (1, 2, 0))

    def test_b_wrapper_is_cached_and_a_program_in_its_b_dir_is_keyed(self):
        driver = os.path.join(self.opt, "g++")
        # A wrapper of this layout passed every compile through (wrapper-script) before.
        self.compile(driver, "m.cpp")
        self.compile(driver, "m.cpp")
        self.assertEqual(self.counts(), (1, 1, 0))
        # An assembler appearing in the -B directory is the one the driver runs now (a program, so no
        # script reading is involved): a miss, and the object it makes, which defines one more symbol.
        self.write("as.c", '#include <unistd.h>\nint main(int c, char **v) { char *a[c + 3]; a[0] = "as";\n'
                   '  a[1] = "--defsym"; a[2] = "KACHE_MARK=1"; for (int i = 1; i <= c; ++i) a[i + 2] = v[i];\n'
                   f'  execv("{shutil.which("as")}", a); return 1; }}\n')
        subprocess.run([GCC, "-o", os.path.join(self.opt, "as"), self.path("as.c")], check=True)
        self.compile(driver, "m.cpp")
        self.assertEqual(self.counts(), (1, 2, 0))
        self.assertIn(b"KACHE_MARK", open(self.path("m.o"), "rb").read())

    def test_wrapper_found_on_path_retargeted(self):
        early, late = self.path("early"), self.path("late")
        os.makedirs(early)
        self.script(os.path.join(late, "mygcc"), f'exec {GCC} "$@"')
        driver = self.script("w/gcc", 'exec mygcc "$@"')
        self.env["PATH"] = early + ":" + late + ":" + os.environ["PATH"]
        self.assert_follows(driver, lambda: self.script(os.path.join(early, "mygcc"), f'exec {GCC} -DX=8 "$@"'))

    def test_exported_variable_retargets_the_wrapper(self):
        other = self.script("other/gcc", f'exec {GCC} -DX=7 "$@"')
        driver = self.script("w/gcc", f'exec "${{REAL_CC:-{GCC}}}" $EXTRA "$@"')
        self.assert_follows(driver, lambda: None, env={"EXTRA": "-O1"}, after_env={"EXTRA": "-O1", "REAL_CC": other})

    def test_relative_program_is_read_in_each_working_directory(self):
        # `exec ./tools/gcc`: another working directory has another ./tools/gcc.
        driver = self.script("w/gcc", 'exec ./tools/gcc "$@"')
        for d, x in (("a", 3), ("b", 9)):
            self.write(f"{d}/m.c", SOURCE)
            self.script(f"{d}/tools/gcc", f'exec {GCC} -DX={x} "$@"')
            self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.path(d))
            subprocess.run([driver, "-c", "m.c", "-o", "plain.o"], cwd=self.path(d), env=self.env, check=True)
            self.assert_same_object(self.path(d, "m.o"), self.path(d, "plain.o"))

    def test_extra_flags_from_the_environment(self):
        driver = self.script("w/gcc", f'exec {GCC} $EXTRA_FLAGS "$@"')
        self.assert_follows(driver, lambda: None, env={"EXTRA_FLAGS": "-DX=6"}, after_env={"EXTRA_FLAGS": "-DX=5"})

    def test_printf_v_and_ansi_c_quoting(self):
        driver = self.script("w/gcc", f"printf -v FLAG '%s' $'-DX=4'\nexec {GCC} \"$FLAG\" \"$@\"",
                             interpreter="#!/bin/bash")
        self.assert_follows(driver, lambda: self.script(
            "w/gcc", f"printf -v FLAG '%s' $'-DX=\\x35'\nexec {GCC} \"$FLAG\" \"$@\"", interpreter="#!/bin/bash"))

    def test_bash_env_runs_before_the_wrapper(self):
        startup = self.write("startup.sh", "KFLAGS=-DX=4\n")
        driver = self.script("w/gcc", f'exec {GCC} $KFLAGS "$@"', interpreter="#!/bin/bash")
        self.assert_follows(driver, lambda: self.write("startup.sh", "KFLAGS=-DX=5\n"), env={"BASH_ENV": startup})

    def test_added_werror_fails_as_the_wrapper_does(self):
        self.write("w.c", "int f(int a) { int unused; return a; }\n")
        driver = self.script("w/gcc", f'exec {GCC} -Werror=unused-variable "$@"')
        plain = subprocess.run([driver, "-c", "w.c", "-o", "p.o"], cwd=self.ws, env=self.env, capture_output=True, text=True)
        r = self.kache([driver, "-c", "w.c", "-o", "w.o"], cwd=self.ws, check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertEqual((r.returncode, r.stderr.replace("w.o", "p.o")), (plain.returncode, plain.stderr))
        self.assertFalse(os.path.exists(self.path("w.o")))

    def test_tracing_and_wrapper_output_stay_out_of_the_diagnostics(self):
        self.write("d.c", "#warning from the source\nint d;\n")
        driver = self.script("w/gcc", f'set -x\necho "wrapper says hi" >&2\nexec {GCC} "$@"')
        first = self.kache([driver, "-c", "d.c", "-o", "d.o"], cwd=self.ws)
        second = self.kache([driver, "-c", "d.c", "-o", "d.o"], cwd=self.ws)
        self.assertEqual(self.counts(), (1, 1, 0))
        self.assertIn("from the source", second.stderr)
        self.assertNotIn("wrapper says hi", second.stderr)
        self.assertNotIn("+ exec", second.stderr)
        self.assertEqual(first.stderr, second.stderr)

    def test_wrapper_that_may_set_a_compiler_variable_passes_through(self):
        inc = self.path("proj", "include")
        os.makedirs(inc)
        self.write("proj/include/v.h", "#define X 11\n")
        self.write("v.c", '#include "v.h"\nint v = X;\n')
        driver = self.script("w/gcc", f'export C_INCLUDE_PATH={inc}\nexec {GCC} "$@"')
        r = self.kache([driver, "-c", "v.c", "-o", "v.o"], cwd=self.ws)
        self.assertEqual(r.stderr, "")
        self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-environment": 1})

    def test_wrapper_that_may_change_the_environment_unseen_passes_through(self):
        # Review of the reading: each of these changes what the driver sees or where it runs, which -###
        # does not show (the miss runs the driver in the build's environment and directory).
        self.write("env.sh", "export CPATH=/opt/inc\n")
        for n, body in enumerate([f'. {self.path("env.sh")}\nexec {GCC} "$@"', f'cd /tmp\nexec {GCC} "$@"',
                                  f'exec env -i {GCC} "$@"', f'exec -c {GCC} "$@"',
                                  f'export $(cat {self.path("env.sh")} | cut -d" " -f2)\nexec {GCC} "$@"']):
            with self.subTest(body):
                self.kache(["--zero-stats"])
                driver = self.script(f"e{n}/gcc", body, interpreter="#!/bin/bash")
                self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws, check=False)
                self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-environment": 1})

    def test_wrapper_running_the_driver_twice_passes_through(self):
        driver = self.script("w/gcc", f'{GCC} "$@"\nexec {GCC} -DX=4 "$@"')
        self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws)
        self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-script": 1})

    def test_response_file_named_by_the_wrapper_is_read_every_time(self):
        self.write("site.rsp", "-DX=4\n")
        driver = self.script("w/gcc", f'exec {GCC} @{self.path("site.rsp")} "$@"')
        self.assert_follows(driver, lambda: self.write("site.rsp", "-DX=5\n"))

    def test_wrapper_adding_an_output_passes_through(self):
        driver = self.script("w/gcc", f'exec {GCC} -MD "$@"')
        self.kache([driver, "-c", "m.c", "-o", "m.o"], cwd=self.ws)
        self.assertEqual(self.stats().get("passthrough_reasons"), {"wrapper-script": 1})

    def test_spack_style_dense_wrapper(self):
        # Functions, arrays, case, loops and a mode read from the arguments, as Spack's cc has.
        body = f"""\
set -eu
die() {{ echo "cc: $*" >&2; exit 1; }}
mode=ccld
for arg in "$@"; do
  case "$arg" in
    -c) mode=cc ;;
    -E) mode=cpp ;;
    -v|-V|--version|-dumpversion) mode=vcheck ;;
  esac
done
flags=()
if [ "$mode" = cc ]; then
  flags+=(-DX=12 -fno-strict-aliasing)
fi
for d in ${{SPACK_INCLUDE_DIRS:-}}; do flags+=("-I$d"); done
exec {GCC} "${{flags[@]}}" "$@"
"""
        driver = self.script("spack/cc", body, interpreter="#!/bin/bash")
        os.makedirs(self.path("sinc"))
        self.assert_follows(driver, lambda: self.write("sinc/unused.h", ""), env={"SPACK_INCLUDE_DIRS": self.path("sinc")},
                            after_env={"SPACK_INCLUDE_DIRS": self.path("sinc") + " " + self.ws})

    def test_wrapper_adding_march_native(self):
        # Passed through as machine-native before; now keyed by what the driver expands it to on this
        # processor (memoized per processor: util::cpu_signature).
        driver = self.script("w/gcc", f'exec {GCC} -march=native "$@"')
        self.compile(driver)
        self.compile(driver)
        self.assertEqual(self.counts(), (1, 1, 0))
        memos = [n for n in os.listdir(os.path.join(self.cache, "toolchains")) if n.startswith("native-")]
        self.assertEqual(len(memos), 1, memos)
        # The expansion is keyed, not the spelling: an explicit -march of another processor misses.
        self.kache([GCC, "-c", "m.c", "-o", "m.o", "-march=x86-64"], cwd=self.ws)
        self.assertEqual(self.counts(), (1, 2, 0))

    def test_ccache_directory_first_on_path(self):
        ccache = shutil.which("ccache")
        if ccache is None:
            self.skipTest("ccache is not installed")
        masq = self.path("ccache-bin")
        os.makedirs(masq)
        os.symlink(ccache, os.path.join(masq, "gcc"))
        self.env["PATH"] = masq + ":" + os.environ["PATH"]
        self.env["CCACHE_DIR"] = self.path("ccache-dir")
        self.compile("gcc")
        self.compile("gcc")
        self.assertEqual(self.counts(), (1, 1, 0))


class WrapperBehaviourBuilds(KacheTestCase):
    """CMake picking the wrapper (CC/CXX and nvcc's -ccbin), as on the H100 host."""

    def setUp(self):
        super().setUp()
        if shutil.which("cmake") is None or shutil.which("ninja") is None or NVCC is None:
            self.skipTest("cmake, ninja or nvcc is not on PATH")

    def test_mixed_example_through_b_wrappers_hits_from_a_fresh_build_dir(self):
        root = tempfile.mkdtemp(prefix="kache-wrapped-", dir=self.ws)
        opt = os.path.join(root, "opt", "gcc", "bin")
        os.makedirs(opt)
        for name, real in (("gcc", GCC), ("g++", GXX)):
            os.symlink(real, os.path.join(opt, name + "-real"))
            with open(os.path.join(opt, name), "w") as f:
                f.write(f'#!/bin/sh\nexec {opt}/{name}-real -B{opt}/ "$@"\n')
            os.chmod(os.path.join(opt, name), 0o755)
        checkout = buildsys.copy_example("mixed", os.path.join(root, "mixed"))
        env = buildsys.clean_env(self.cache, root)
        env["PATH"] = opt + ":" + env["PATH"]

        def build(dir_name):
            build_dir = os.path.join(checkout, dir_name)
            launchers = [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={buildsys.LAUNCHER}" for lang in ("C", "CXX", "CUDA")]
            buildsys.run(["cmake", "-S", checkout, "-B", build_dir, "-G", "Ninja", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                          f"-DCMAKE_C_COMPILER={opt}/gcc",
                          f"-DCMAKE_CXX_COMPILER={opt}/g++", f"-DCMAKE_CUDA_HOST_COMPILER={opt}/g++"] + launchers,
                         cwd=checkout, env=env)
            buildsys.zero_stats(env)
            buildsys.run(["ninja", "-C", build_dir], cwd=build_dir, env=env)
            return buildsys.stats(env), build_dir

        cold, first = build("build-a")
        self.assertEqual((cold["hits"], cold["passthrough"]), (0, 0), cold)
        self.assertGreaterEqual(cold["misses"], 3, cold)
        warm, second = build("build-b")
        self.assertEqual((warm["hits"], warm["misses"], warm["passthrough"]), (cold["misses"], 0, 0), warm)
        for rel in buildsys.compile_outputs(first):
            self.assertEqual(buildsys.section_diff(os.path.join(first, rel), os.path.join(second, rel)), [], rel)


    def test_ten_tus_through_each_wrapper_layout(self):
        """A CMake project of ten C and C++ TUs built through each wrapper a user has (the -B layout, a
        Spack-style dense wrapper, one adding -march=native, a ccache directory first on PATH): every
        compile is cached, a fresh build dir hits all, and every object equals the plain build's
        (through the same wrapper) by every allocated section."""
        root = tempfile.mkdtemp(prefix="kache-ten-", dir=self.ws)
        src = os.path.join(root, "proj")
        os.makedirs(src)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.16)\nproject(ten C CXX)\n"
                    "add_library(ten STATIC " + " ".join(f"u{i}.{'c' if i % 2 else 'cpp'}" for i in range(10)) + ")\n")
        for i in range(10):
            with open(os.path.join(src, f"u{i}.{'c' if i % 2 else 'cpp'}"), "w") as f:
                f.write(f"static int table[] = {{{i}, {i + 1}}};\nint unit{i}(int x) {{ return x * table[x & 1]; }}\n")
        bins = os.path.join(root, "bins")
        layouts = {}

        def wrapper(layout, name, body, interpreter="#!/bin/sh"):
            d = os.path.join(bins, layout)
            os.makedirs(d, exist_ok=True)
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(f"{interpreter}\n{body}\n")
            os.chmod(p, 0o755)
            return p

        os.makedirs(bins)
        for name, real in (("gcc", GCC), ("g++", GXX)):
            os.symlink(real, os.path.join(bins, name + "-real"))
            layouts.setdefault("b-dir", {})[name] = wrapper("b-dir", name, f'exec {bins}/{name}-real -B{bins}/ "$@"')
            layouts.setdefault("spack", {})[name] = wrapper(
                "spack", name, f'set -eu\nflags=()\nfor a in "$@"; do case "$a" in -c) flags+=(-DSPACK_CC=1) ;; esac; done\n'
                f'exec {real} "${{flags[@]}}" "$@"', interpreter="#!/bin/bash")
            layouts.setdefault("native", {})[name] = wrapper("native", name, f'exec {real} -march=native "$@"')
        ccache = shutil.which("ccache")
        if ccache:
            d = os.path.join(bins, "ccache")
            os.makedirs(d)
            for name in ("gcc", "g++"):
                os.symlink(ccache, os.path.join(d, name))
            layouts["ccache"] = {"gcc": os.path.join(d, "gcc"), "g++": os.path.join(d, "g++")}
        for layout, drivers in layouts.items():
            with self.subTest(layout):
                env = buildsys.clean_env(os.path.join(root, "cache-" + layout), root)
                env["PATH"] = os.path.dirname(drivers["gcc"]) + ":" + env["PATH"]
                env["CCACHE_DIR"] = os.path.join(root, "ccache-" + layout)

                def build(name, launcher):
                    b = os.path.join(root, f"{layout}-{name}")
                    args = ["cmake", "-S", src, "-B", b, "-G", "Ninja", f"-DCMAKE_C_COMPILER={drivers['gcc']}",
                            f"-DCMAKE_CXX_COMPILER={drivers['g++']}"]
                    if launcher:
                        args += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={buildsys.LAUNCHER}" for lang in ("C", "CXX")]
                    buildsys.run(args, cwd=root, env=env)
                    buildsys.zero_stats(env)
                    buildsys.run(["ninja", "-C", b], cwd=root, env=env)
                    return b, buildsys.stats(env)

                cold, s = build("cold", True)
                self.assertEqual((s["misses"], s["passthrough"]), (10, 0), s)
                warm, s = build("warm", True)
                self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (10, 0, 0), s)
                plain, _ = build("plain", False)
                for i in range(10):
                    rel = f"CMakeFiles/ten.dir/u{i}.{'c' if i % 2 else 'cpp'}.o"
                    for b in (cold, warm):
                        self.assertEqual(buildsys.section_diff(os.path.join(b, rel), os.path.join(plain, rel)), [], rel)


if __name__ == "__main__":
    kachetest.main()
