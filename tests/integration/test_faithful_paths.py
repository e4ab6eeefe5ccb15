"""Issue 27 item 1: an object names the checkout it is served in, as the plain compiler's would.

Two checkouts of one project at absolute paths of different lengths share one KACHE_DIR. kache adds no
-fmacro-prefix-map (__FILE__ and assert() print the real path; such an object is stored per checkout),
and maps each path root in debug info to a fixed-length placeholder that the install (miss) and the
restore (hit) replace in place by this checkout's root (exact in string sections, padded with '/' where a
name's length is fixed): DW_AT_name and DW_AT_comp_dir
resolve to this checkout's files and gdb lists the source from its build directory, while a -g build
of a second checkout still hits. The user's own prefix maps win on every compiler; a root longer than
a placeholder, -gz, and a checkout reached through a symlink ($PWD) are covered too."""
import os
import re
import shutil
import subprocess
import textwrap

import kachetest
from kachetest import KacheTestCase

C_COMPILERS = [c for c in ("gcc-12", "clang-14", "clang-19") if shutil.which(c)]
COMPILERS = [c for c in ("gcc-12", "g++-12", "clang-14", "clang-19") if shutil.which(c)]
PLACEHOLDER_LENGTH = 160  # core::kPlaceholderLength

MAIN = textwrap.dedent("""\
    #include <stdio.h>
    int main(void) {
      printf("hello\\n");
      return 0;
    }
    """)
# Prints __FILE__ and fails an assert(): both name the source's path as the compiler was given it.
WHERE = textwrap.dedent("""\
    #include <assert.h>
    #include <stdio.h>
    int main(int argc, char** argv) {
      (void)argv;
      printf("file %s size %d\\n", __FILE__, (int)sizeof(__FILE__));
      fflush(stdout);
      assert(argc == 0);
      return 0;
    }
    """)
CUDA_MAIN = textwrap.dedent("""\
    #include <cstdio>
    __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
    int main() {
      std::printf("hello\\n");
      return 0;
    }
    """)


def unit_names(obj):
    """DW_AT_name and DW_AT_comp_dir of the object's first compilation unit, as stored."""
    out = subprocess.run(["readelf", "--debug-dump=info", obj], capture_output=True, text=True, check=True).stdout
    names = {}
    for line in out.splitlines():
        m = re.search(r"DW_AT_(name|comp_dir)\s*:\s*(?:\([^)]*\):\s*)?(.*)$", line)
        if m and m.group(1) not in names:
            names[m.group(1)] = m.group(2).strip()
        if len(names) == 2:
            break
    return names


def resolved(path):
    # "//////home/u/p" names "/home/u/p" (POSIX keeps exactly two leading slashes; realpath does not).
    return os.path.realpath(os.path.normpath(path))


class FaithfulPaths(KacheTestCase):
    def checkout(self, name, source=MAIN, file="m.c"):
        root = self.path(name)
        self.write(f"{name}/src/{file}", source, mtime_ns=1_600_000_000 * 10**9)
        os.makedirs(os.path.join(root, "build"), exist_ok=True)
        return root

    def compile(self, root, compiler, extra=(), tool="kache", file="m.c", obj="m.o", env=None, cwd=None):
        """Out of source, as CMake writes it: cd build; cc -c /abs/src/m.c -o m.o"""
        args = ["-c", os.path.join(root, "src", file), "-o", obj] + list(extra)
        cwd = cwd or os.path.join(root, "build")
        if tool == "kache":
            return self.kache([compiler] + args, cwd=cwd, env=env)
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run([compiler] + args, cwd=cwd, env=e, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def link_and_run(self, root, compiler, obj="m.o", prog="prog"):
        build = os.path.join(root, "build")
        linker = "g++-12" if compiler == "nvcc" else compiler
        subprocess.run(["nvcc" if compiler == "nvcc" else linker, obj, "-o", prog], cwd=build, check=True,
                       capture_output=True)
        r = subprocess.run(["./" + prog], cwd=build, capture_output=True, text=True)
        return (r.returncode, r.stdout, r.stderr)

    def gdb_list(self, root, prog="prog"):
        r = subprocess.run(["gdb", "-batch", "-nx", "-ex", "list main", prog], cwd=os.path.join(root, "build"),
                           capture_output=True, text=True)
        return r.stdout

    def assert_names_in(self, obj, root, plain_obj=None):
        names = unit_names(obj)
        self.assertEqual(resolved(names["comp_dir"]), os.path.realpath(os.path.join(root, "build")), names)
        self.assertEqual(resolved(names["name"]), os.path.realpath(os.path.join(root, "src", "m.c")), names)
        if plain_obj:
            plain = unit_names(plain_obj)
            self.assertEqual({k: resolved(v) for k, v in names.items()}, {k: resolved(v) for k, v in plain.items()})

    def per_checkout(self):
        return self.stats().get("stored_per_checkout", {})

    # --- debug names --------------------------------------------------------------------------------
    def test_debug_names_and_gdb_follow_the_checkout_on_a_miss_and_a_hit(self):
        a = self.checkout("a")
        b = self.checkout("checkout-with-a-longer-name")
        for n, cc in enumerate(COMPILERS):
            with self.subTest(compiler=cc):
                self.compile(a, cc, ["-g"])
                self.assert_counts(hits=n, misses=n + 1)
                self.assert_names_in(os.path.join(a, "build", "m.o"), a)
                self.compile(b, cc, ["-g"])
                self.assert_counts(hits=n + 1, misses=n + 1)  # shared: the stored object names no checkout
                self.assert_names_in(os.path.join(b, "build", "m.o"), b)
                self.compile(b, cc, ["-g"], tool="plain", obj="plain.o")
                self.assert_names_in(os.path.join(b, "build", "m.o"), b, os.path.join(b, "build", "plain.o"))
                self.link_and_run(b, cc)
                self.assertIn('printf("hello', self.gdb_list(b))
        self.assertEqual(self.per_checkout(), {})

    def test_nvcc_host_debug_names_follow_the_checkout(self):
        a = self.checkout("a", CUDA_MAIN, "k.cu")
        b = self.checkout("checkout-with-a-longer-name", CUDA_MAIN, "k.cu")
        self.compile(a, "nvcc", ["-g"], file="k.cu", obj="k.o")
        self.compile(b, "nvcc", ["-g"], file="k.cu", obj="k.o")
        self.assert_counts(hits=1, misses=1)
        names = unit_names(os.path.join(b, "build", "k.o"))
        self.assertEqual(resolved(names["comp_dir"]), os.path.realpath(os.path.join(b, "build")))
        lines = subprocess.run(["readelf", "--debug-dump=line", os.path.join(b, "build", "k.o")],
                               capture_output=True, text=True, check=True).stdout
        self.assertNotIn("/kache.root.", lines)
        self.assertNotIn(a + "/", re.sub("/+", "/", lines))
        self.link_and_run(b, "nvcc", obj="k.o")
        self.assertIn('std::printf("hello', self.gdb_list(b))

    # --- __FILE__ and assert() ---------------------------------------------------------------------
    def test_file_and_assert_print_what_the_plain_build_prints(self):
        a = self.checkout("a", WHERE)
        b = self.checkout("checkout-with-a-longer-name", WHERE)
        for n, cc in enumerate(COMPILERS):
            with self.subTest(compiler=cc):
                for root in (a, b):
                    self.compile(root, cc, tool="plain")
                    plain = self.link_and_run(root, cc)
                    self.assertIn(os.path.join(root, "src", "m.c"), plain[1])
                    self.compile(root, cc)
                    self.assertEqual(self.link_and_run(root, cc), plain)
                # Each checkout a miss stored for itself; a rebuild in the second hits.
                self.assert_counts(hits=n, misses=2 * (n + 1))
                self.compile(b, cc)
                self.assert_counts(hits=n + 1, misses=2 * (n + 1))
                self.assertEqual(self.link_and_run(b, cc), plain)
        self.assertEqual(self.per_checkout(), {"path-in-object": 2 * len(COMPILERS)})

    # --- the user's own maps -------------------------------------------------------------------------
    def test_the_users_prefix_maps_win(self):
        a = self.checkout("a", WHERE)
        for cc in C_COMPILERS:
            build = os.path.join(a, "build")
            for maps in (["-ffile-prefix-map=" + build + "=.", "-ffile-prefix-map=" + a + "=/mapped"],
                         ["-fdebug-prefix-map=" + a + "=/mapped", "-fmacro-prefix-map=" + a + "=/macro"]):
                with self.subTest(compiler=cc, maps=maps):
                    self.compile(a, cc, ["-g"] + maps, tool="plain")
                    plain_names, plain_run = unit_names(os.path.join(build, "m.o")), self.link_and_run(a, cc)
                    for _ in ("miss", "hit"):
                        self.compile(a, cc, ["-g"] + maps)
                        self.assertEqual(unit_names(os.path.join(build, "m.o")), plain_names)
                        self.assertEqual(self.link_and_run(a, cc), plain_run)

    # --- $PWD ----------------------------------------------------------------------------------------
    def test_a_checkout_through_a_symlink_gets_the_comp_dir_of_pwd(self):
        a = self.checkout("a")
        real = self.checkout("real-checkout")
        link = self.path("linked")
        os.symlink(real, link)
        build = os.path.join(link, "build")
        for n, cc in enumerate(C_COMPILERS):
            with self.subTest(compiler=cc):
                self.compile(a, cc, ["-g"])
                self.compile(link, cc, ["-g"], env={"PWD": build}, cwd=build)
                self.assert_counts(hits=n + 1, misses=n + 1)
                self.compile(link, cc, ["-g"], tool="plain", obj="plain.o", env={"PWD": build}, cwd=build)
                got = unit_names(os.path.join(real, "build", "m.o"))
                want = unit_names(os.path.join(real, "build", "plain.o"))
                self.assertEqual(want["comp_dir"], build)
                self.assertEqual(os.path.normpath(got["comp_dir"]), want["comp_dir"])
                self.assertEqual(os.path.normpath(got["name"]), want["name"])

    # --- what cannot take placeholders ---------------------------------------------------------------
    def test_a_root_longer_than_a_placeholder_is_stored_per_checkout(self):
        short = self.checkout("a")
        deep = self.checkout("d" * (PLACEHOLDER_LENGTH + 10))
        cc = C_COMPILERS[0]
        self.compile(short, cc, ["-g"])  # shared entry, its placeholders stand for the roots
        self.compile(deep, cc, ["-g"])  # no hit: the deep root does not fit a placeholder
        self.assert_counts(hits=0, misses=2)
        self.compile(deep, cc, ["-g"], tool="plain", obj="plain.o")
        self.assert_names_in(os.path.join(deep, "build", "m.o"), deep, os.path.join(deep, "build", "plain.o"))
        self.assertEqual(self.per_checkout(), {"path-in-object": 1})
        self.compile(deep, cc, ["-g"])
        self.assert_counts(hits=1, misses=2)
        self.assert_names_in(os.path.join(deep, "build", "m.o"), deep, os.path.join(deep, "build", "plain.o"))

    def test_compressed_debug_sections_are_plain_and_not_shared(self):
        a = self.checkout("a")
        b = self.checkout("checkout-with-a-longer-name")
        for n, cc in enumerate(C_COMPILERS):
            with self.subTest(compiler=cc):
                for root in (a, b):
                    self.compile(root, cc, ["-g", "-gz"])
                    self.compile(root, cc, ["-g", "-gz"], tool="plain", obj="plain.o")
                    self.assert_names_in(os.path.join(root, "build", "m.o"), root,
                                         os.path.join(root, "build", "plain.o"))
                self.assert_counts(hits=0, misses=2 * (n + 1))
        # Stored per checkout: the compressed sections hide any root from the scan (clang leaves a
        # section uncompressed when compression does not pay, where the scan then sees the root).
        per_checkout = self.per_checkout()
        self.assertEqual(sum(per_checkout.values()), 2 * len(C_COMPILERS), per_checkout)
        self.assertIn("compressed-debug", per_checkout)
        self.assertLessEqual(set(per_checkout), {"compressed-debug", "path-in-object"})

    def test_debug_compressed_where_kache_did_not_see_it_runs_the_compiler_unchanged(self):
        # clang 19 reads clang.cfg beside its executable: "-gz" there compresses the debug sections of
        # a compile whose command line kache saw without it, so the placeholders end up in compressed
        # bytes that cannot be rewritten in place. The user's command then runs unchanged.
        if not os.path.exists("/usr/lib/llvm-19/bin/clang"):
            self.skipTest("clang 19 is not installed")
        a = self.checkout("a")
        os.makedirs(self.path("llvm", "bin"))
        shutil.copy2("/usr/lib/llvm-19/bin/clang", self.path("llvm", "bin", "clang"))
        os.symlink("/usr/lib/llvm-19/lib", self.path("llvm", "lib"))
        self.write("llvm/bin/clang.cfg", "-gz\n")
        clang = self.path("llvm", "bin", "clang")
        self.compile(a, clang, ["-g"])
        self.compile(a, clang, ["-g"], tool="plain", obj="plain.o")
        build = os.path.join(a, "build")
        self.assertEqual(unit_names(os.path.join(build, "m.o")), unit_names(os.path.join(build, "plain.o")))
        self.assertEqual(unit_names(os.path.join(build, "m.o"))["comp_dir"], build)
        s = self.assert_counts(hits=0, misses=0, passthrough=1)
        self.assertEqual(s["passthrough_reasons"], {"compressed-debug": 1})

    # --- the dependency file's line wrapping -------------------------------------------------------------
    def test_a_restored_depfile_is_wrapped_as_the_compiler_wraps_it_there(self):
        # The compilers wrap depfile lines by path length (GCC at 72 columns, clang at 75); restored in a
        # checkout with much longer roots, the text is the plain compiler's there byte for byte, not the
        # stored entry's wrapping.
        source = '#include "local_header_with_a_long_name.h"\n#include <inc_header_with_a_long_name.h>\n' + MAIN
        a = self.checkout("a", source)
        b = self.checkout("b-" + "long-checkout-name-" * 4, source)
        for root in (a, b):
            self.write(os.path.relpath(os.path.join(root, "src", "local_header_with_a_long_name.h"), self.path()),
                       "int local;\n")
            self.write(os.path.relpath(os.path.join(root, "src", "include", "inc_header_with_a_long_name.h"), self.path()),
                       "int inc;\n")
        flag_sets = [["-MD"], ["-MMD"], ["-MMD", "-MP"], ["-MD", "-MP", "-MT", "first-target.o", "-MT", "m.o"]]
        for cc in COMPILERS:
            for flags in flag_sets:
                with self.subTest(compiler=cc, flags=flags):
                    extra = [f"-I{os.path.join(a, 'src', 'include')}"] + flags + ["-MF", "m.d"]
                    extra_b = [f"-I{os.path.join(b, 'src', 'include')}"] + flags + ["-MF", "m.d"]
                    depfile_b = os.path.join(b, "build", "m.d")
                    self.compile(b, cc, extra_b, tool="plain")
                    with open(depfile_b) as f:
                        plain = f.read()
                    os.remove(depfile_b)
                    self.zero()
                    self.compile(a, cc, extra)
                    self.compile(b, cc, extra_b)
                    self.assert_counts(hits=1, misses=1)
                    with open(depfile_b) as f:
                        self.assertEqual(f.read(), plain)


if __name__ == "__main__":
    kachetest.main()
