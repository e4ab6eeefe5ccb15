"""Stale-hit traps: each builds through kache, changes one input, rebuilds, and compares with a plain
nvcc build of the current files. Peers (ccache 4.7, sccache 0.4) serve stale objects in these cases."""
import os
import shutil
import stat
import textwrap

import kachetest
from kachetest import KacheTestCase

HOST_ONLY = textwrap.dedent("""
    #include <cstdio>
    __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
    #ifndef __CUDA_ARCH__
    int host_value() { return HOSTVAL; }
    #endif
    """)


class Traps(KacheTestCase):
    def build_twice_compare(self, args, edit, env=None, env2=None):
        """Builds through kache, applies edit(), builds again; the second object must equal plain nvcc's."""
        self.kache(["nvcc"] + args + ["-o", "k.o"], env=env)
        before = self.read("k.o", "rb")
        edit()
        self.kache(["nvcc"] + args + ["-o", "k.o"], env=env2 if env2 is not None else env)
        self.nvcc(args + ["-o", "plain.o"], env=env2 if env2 is not None else env)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assertNotEqual(before, self.read("k.o", "rb"))
        self.assert_counts(hits=0, misses=2)

    def test_edit_under_ifndef_cuda_arch_in_source(self):
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1"))
        self.build_twice_compare(["-c", "k.cu"], lambda: self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "2")))

    def test_edit_of_header_included_only_on_host(self):
        self.write("host.h", "#define HOSTVAL 1\n")
        self.write("k.cu", "#ifndef __CUDA_ARCH__\n#include \"host.h\"\n#endif\n" + HOST_ONLY)
        self.build_twice_compare(["-c", "k.cu"], lambda: self.write("host.h", "#define HOSTVAL 2\n"))

    def test_edit_of_sm90_only_header_building_sm75_and_sm90(self):
        self.write("sm90.h", "#define DEVVAL 1.0f\n")
        self.write("k.cu", textwrap.dedent("""
            #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            #include "sm90.h"
            #else
            #define DEVVAL 3.0f
            #endif
            __global__ void k(float* x) { x[threadIdx.x] = DEVVAL; }
            """))
        args = ["-c", "k.cu", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_90,code=sm_90"]
        self.build_twice_compare(args, lambda: self.write("sm90.h", "#define DEVVAL 2.0f\n"))

    def test_change_of_nvcc_append_flags(self):
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1"))
        self.build_twice_compare(["-c", "k.cu"], lambda: None, env={"NVCC_APPEND_FLAGS": "-arch=sm_80"},
                                 env2={"NVCC_APPEND_FLAGS": "-arch=sm_90"})

    def test_change_of_nvcc_prepend_flags(self):
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1"))
        self.build_twice_compare(["-c", "k.cu"], lambda: None, env={"NVCC_PREPEND_FLAGS": "-O3"},
                                 env2={"NVCC_PREPEND_FLAGS": "-O0"})

    def test_header_edited_while_nvcc_runs(self):
        # A host compiler wrapper edits the header at nvcc's final host compile step, after every pass
        # has read it: the object comes from the old content, the files on disk are the new one.
        self.write("h.h", "#define HOSTVAL 1\n")
        self.write("k.cu", '#include "h.h"\n' + HOST_ONLY)
        wrapper = self.write("cc/g++", textwrap.dedent(f"""\
            #!/bin/sh
            for a in "$@"; do
              case "$a" in *cudafe1.cpp)
                if [ -f {self.path('edit-once')} ]; then
                  rm -f {self.path('edit-once')}
                  echo '#define HOSTVAL 2' > {self.path('h.h')}
                fi;;
              esac
            done
            exec /usr/bin/g++ "$@"
            """))
        os.chmod(wrapper, 0o755)
        self.write("edit-once", "")
        args = ["-c", "k.cu", "-ccbin", wrapper, "-o", "k.o"]
        r, log = self.log_of(["nvcc"] + args)
        self.assertEqual(r.returncode, 0, log)
        self.assertFalse(os.path.exists(self.path("edit-once")), "the wrapper did not run")
        self.assertIn("not stored", log)
        s = self.stats()
        self.assertEqual(s["not_stored_reasons"].get("input-changed"), 1, s)
        # The next build must not be served the object built from the old header.
        self.kache(["nvcc"] + args)
        self.nvcc(["-c", "k.cu", "-ccbin", wrapper, "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assertEqual(self.stats()["hits"], 0)

    def test_header_edited_just_before_the_build_is_not_stored(self):
        # Written a moment before the compile starts: inside the clock-tick margin only if the tick is
        # coarse, so this checks the weaker claim that a fresh header never yields a stale hit.
        self.write("k.cu", '#include "h.h"\n' + HOST_ONLY)
        self.write("h.h", "#define HOSTVAL 1\n")
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])
        self.write("h.h", "#define HOSTVAL 3\n")
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])
        self.nvcc(["-c", "k.cu", "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))


# __FILE__ on the host and in a kernel's assert() message, in the source and in a header found next to it.
NAMED = textwrap.dedent("""
    #include <cassert>
    #include "h.cuh"
    __global__ void k(float* x) { assert(x != nullptr); x[threadIdx.x] = V; }
    const char* source_name() { return __FILE__; }
    """)
NAMED_HEADER = '#define V 1.0f\ninline const char* header_name() { return __FILE__; }\n'
# Internal-linkage device code only: two identical copies link together under plain nvcc.
INTERNAL = textwrap.dedent("""
    namespace { __device__ int counter; __global__ void bump() { counter += 1; } }
    void (*keep_bump)() = nullptr;
    """)


class PathsAsWritten(KacheTestCase):
    """Issue 12 (classes 4-7): paths the compiler writes into the object or the depfile as spelled,
    the user's own prefix maps, the depfile's target, and the identity of path-specific objects."""

    def keep(self, rel, as_rel):
        shutil.copy(self.path(rel), self.path(as_rel))
        return self.path(as_rel)

    def test_moved_relative_source_misses_and_names_the_new_files(self):
        # Makefile style: `nvcc -c src/old/x.cu` writes "src/old/x.cu" into the object and the depfile
        # as spelled; after moving src/old to src/new nothing may still name src/old.
        self.write("src/old/x.cu", NAMED)
        self.write("src/old/h.cuh", NAMED_HEADER)
        os.makedirs(self.path("build"))
        args = lambda d: ["-c", f"src/{d}/x.cu", "-o", "build/x.o", "-MD", "-MF", "build/x.d"]
        self.kache(["nvcc"] + args("old"))
        os.rename(self.path("src/old"), self.path("src/new"))
        self.kache(["nvcc"] + args("new"))
        self.assert_counts(hits=0, misses=2)
        self.kache(["nvcc"] + args("new"))  # the same place again still hits
        self.assert_counts(hits=1, misses=2)
        obj, dep = self.keep("build/x.o", "kache.o"), self.read("build/x.d")
        self.assertTrue(b"src/new/x.cu" in self.read("kache.o", "rb"))
        self.assertNotIn("src/old", dep)
        self.assertIn("src/new/h.cuh", dep)
        self.nvcc(args("new"))
        self.assert_same_object(obj, self.path("build/x.o"))
        self.assertEqual(dep, self.read("build/x.d"))

    def test_user_prefix_maps_win_on_a_miss(self):
        # kache maps the source's directory to /kache/src; the user's own (later) rule must win, as it
        # does under plain nvcc, in host code and in device code (the assert message).
        self.write("src/f.cu", NAMED)
        self.write("src/h.cuh", NAMED_HEADER)
        for flag in ("-fmacro-prefix-map", "-ffile-prefix-map"):
            args = ["-c", self.path("src/f.cu"), "-Xcompiler", f"{flag}={self.path('src')}=/user"]
            self.kache(["nvcc"] + args + ["-o", "k.o"])
            self.nvcc(args + ["-o", "plain.o"])
            self.assertTrue(b"/user/f.cu" in self.read("k.o", "rb"), flag)
            self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        # A rule in NVCC_PREPEND_FLAGS comes before anything on the command line: kache adds no rules.
        env = {"NVCC_PREPEND_FLAGS": f"-Xcompiler -fmacro-prefix-map={self.path('src')}=/pre"}
        args = ["-c", self.path("src/f.cu")]
        self.kache(["nvcc"] + args + ["-o", "k.o"], env=env)
        self.nvcc(args + ["-o", "plain.o"], env=env)
        self.assertTrue(b"/pre/f.cu" in self.read("k.o", "rb"))
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        # Debug info: the line table names the source's directory as the user's -fdebug-prefix-map says
        # (plain nvcc writes "/dbg" and "f.cu"), not kache's /kache/src.
        args = ["-c", "-g", self.path("src/f.cu"), "-Xcompiler", f"-fdebug-prefix-map={self.path('src')}=/dbg"]
        self.kache(["nvcc"] + args + ["-o", "g.o"])
        self.nvcc(args + ["-o", "plain-g.o"])
        for obj in ("plain-g.o", "g.o"):
            self.assertTrue(b"\x00/dbg\x00" in self.read(obj, "rb"), obj)

    def test_absolute_include_dir_below_a_root_keys_the_roots(self):
        # -I<one>/inc is below checkout one's build directory, so kache's prefix maps rewrite the header's
        # __FILE__ there (/kache/build/inc/h.cuh); the same flag in checkout two names a directory
        # outside two's roots, which plain nvcc (and a miss) leave literal. Same key text, other object.
        inc = self.path("one", "inc")
        for co in ("one", "two"):
            self.write(f"{co}/src/x.cu", NAMED.replace('"h.cuh"', '"hh.cuh"'))
            self.write(f"{co}/inc/hh.cuh", NAMED_HEADER)
        args = ["-c", "src/x.cu", "-I" + inc, "-o", "x.o", "-MD", "-MF", "x.d"]
        self.kache(["nvcc"] + args, cwd=self.path("one"))
        self.kache(["nvcc"] + args, cwd=self.path("two"))
        self.assert_counts(hits=0, misses=2)
        obj, dep = self.keep("two/x.o", "two/kache.o"), self.read("two/x.d")
        self.assertIn(inc + "/hh.cuh", dep)
        self.nvcc(args, cwd=self.path("two"))
        self.assert_same_object(obj, self.path("two/x.o"))
        self.assertEqual(dep, self.read("two/x.d"))

    def test_absolute_include_dir_below_a_base_dir_shares_between_build_dirs(self):
        # The CMake shape: -I<checkout>/inc with the checkout as a base dir; a second build directory of
        # the same checkout maps the value alike, so it still hits.
        one = self.path("one")
        self.write("one/src/x.cu", NAMED.replace('"h.cuh"', '"hh.cuh"'))
        self.write("one/inc/hh.cuh", NAMED_HEADER)
        args = ["-c", "../src/x.cu", "-I" + os.path.join(one, "inc"), "-o", "x.o", "-MD", "-MF", "x.d"]
        for build in ("b1", "b2"):
            os.makedirs(os.path.join(one, build))
            self.kache(["nvcc"] + args, cwd=os.path.join(one, build), env={"KACHE_PATHS_BASE_DIRS": one})
        self.assert_counts(hits=1, misses=1)
        dep = self.read("one/b2/x.d")
        self.nvcc(args, cwd=os.path.join(one, "b2"))
        self.assertEqual(dep, self.read("one/b2/x.d"))

    def test_depfile_target_follows_the_output(self):
        # One -MF path, two outputs: the entry is shared, each depfile names its own output.
        self.write("x.cu", NAMED.replace('#include "h.cuh"\n', "#define V 2.0f\n"))
        os.makedirs(self.path("o1"))
        os.makedirs(self.path("o2"))
        args = lambda o: ["-c", "x.cu", "-o", f"{o}/x.o", "-MD", "-MF", "x.d"]
        self.kache(["nvcc"] + args("o1"))
        self.kache(["nvcc"] + args("o2"))
        self.assert_counts(hits=1, misses=1)
        dep = self.read("x.d")
        self.assertTrue(dep.startswith("o2/x.o "), dep[:100])
        self.nvcc(args("o2"))
        self.assertEqual(dep, self.read("x.d"))

    def test_identical_rdc_files_of_one_link_get_their_own_objects(self):
        # libA/kernel.cu and libB/kernel.cu, identical, each compiled from its own directory: the
        # module ids (and internal names) hash the absolute path, so one object for both breaks the
        # device link where plain nvcc links.
        for lib in ("libA", "libB"):
            self.write(f"{lib}/kernel.cu", INTERNAL)
            self.kache(["nvcc", "-dc", "kernel.cu", "-o", "kernel.o"], cwd=self.path(lib))
        self.assert_counts(hits=0, misses=2)
        r = self.nvcc(["-dlink", "libA/kernel.o", "libB/kernel.o", "-o", "dlink.o"], check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Whole-program objects: cudafe++'s _INTERNAL_ names hash the path too.
        for lib in ("libA", "libB"):
            self.kache(["nvcc", "-c", "kernel.cu", "-o", "whole.o"], cwd=self.path(lib))
        self.assert_counts(hits=0, misses=4)
        self.nvcc(["-c", "kernel.cu", "-o", "plain.o"], cwd=self.path("libB"))
        self.assert_same_object(self.path("libB/whole.o"), self.path("libB/plain.o"))
        # The same file again still hits.
        self.kache(["nvcc", "-dc", "kernel.cu", "-o", "kernel.o"], cwd=self.path("libB"))
        self.assert_counts(hits=1, misses=4)


if __name__ == "__main__":
    kachetest.main()
