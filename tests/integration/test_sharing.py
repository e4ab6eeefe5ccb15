"""Spec "Remote sharing" and SOURCE_DATE_EPOCH.

Two checkouts of one small project (src/k.cu includes ../include/h.cuh; build dir build/) at
different absolute paths share one KACHE_DIR. Entries are shared when every path the key sees is
relative or under a mapped root (build dir, source dir, output dir, [paths] base_dirs); absolute flag
values outside the roots are keyed as written; -lineinfo and -rdc objects are path-specific; an object
that still names a mapped root is stored for its checkout only; SOURCE_DATE_EPOCH is pinned on a miss but not
keyed. test_path_keys.py covers the path rules of issue 10."""
import os
import shutil
import time

import kachetest
from kachetest import KacheTestCase

HEADER = "#define V 2.0f\ninline int hval(int x) { return x * 3 + 1; }\n"
SOURCE = r"""
#include "../include/h.cuh"
__global__ void k(float* x) { x[threadIdx.x] = V; }
int host_entry(int y) { return hval(y); }
"""
# The same project finding its header through -I instead of a relative include.
SOURCE_I = SOURCE.replace('"../include/h.cuh"', '"h.cuh"')

DATE = r"""
__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
const char* build_date() { return "built on " __DATE__; }
"""
YEAR_1971 = str(86400 * 365)


class Sharing(KacheTestCase):
    # --- a checkout ----------------------------------------------------------------------------
    def checkout(self, name, header=HEADER, source=SOURCE):
        root = self.path(name)
        self.write(f"{name}/include/h.cuh", header)
        self.write(f"{name}/src/k.cu", source)
        os.makedirs(os.path.join(root, "build", "CMakeFiles", "x.dir", "src"), exist_ok=True)
        return root

    def relative(self, root, extra=(), env=None, tool="kache"):
        """cd build; nvcc -c ../src/k.cu -o k.o -MD -MF k.o.d"""
        args = ["-c", "../src/k.cu", "-o", "k.o", "-MD", "-MF", "k.o.d"] + list(extra)
        return self.run_in(root, args, env, tool)

    def cmake_like(self, root, extra=(), env=None, tool="kache"):
        """The command CMake + Ninja write: absolute source, object and depfile under CMakeFiles/."""
        obj = "CMakeFiles/x.dir/src/k.cu.o"
        args = ["-forward-unknown-to-host-compiler", "-MD", "-MT", obj, "-MF", obj + ".d", "-x", "cu", "-c",
                os.path.join(root, "src", "k.cu"), "-o", obj] + list(extra)
        return self.run_in(root, args, env, tool)

    def base(self, root):
        return {"KACHE_PATHS_BASE_DIRS": root}

    def run_in(self, root, args, env, tool):
        build = os.path.join(root, "build")
        if tool == "kache":
            return self.kache(["nvcc"] + args, cwd=build, env=env)
        return self.nvcc(args, cwd=build, env=env)

    def keep(self, root, rel, as_name):
        """Saves a kache-built file before the plain build overwrites it."""
        src = os.path.join(root, "build", rel)
        dst = os.path.join(root, "build", as_name)
        shutil.copy(src, dst)
        return dst

    def text(self, root, rel):
        with open(os.path.join(root, "build", rel)) as f:
            return f.read()

    def data(self, root, rel):
        with open(os.path.join(root, "build", rel), "rb") as f:
            return f.read()

    # --- sharing between checkouts ------------------------------------------------------------
    def test_second_checkout_with_relative_paths_hits(self):
        # include/ is neither the build, the source nor the output directory: [paths] base_dirs
        # names the checkout root so its headers are keyed by a fixed name.
        one, two = self.checkout("one"), self.checkout("two")
        self.relative(one, env=self.base(one))
        self.relative(two, env=self.base(two))
        self.assert_counts(hits=1, misses=1)
        obj, dep = self.keep(two, "k.o", "kache.o"), self.keep(two, "k.o.d", "kache.o.d")
        self.relative(two, tool="nvcc")  # the same command, plainly, in the second checkout
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))
        self.assertEqual(self.text(two, "kache.o.d"), self.text(two, "k.o.d"))
        self.assertIn("../src/k.cu", self.text(two, "kache.o.d"))
        self.assertNotIn(one, self.text(two, "kache.o.d"))

    def test_directory_named_like_a_root_keeps_its_path_in_the_restored_depfile(self):
        # Found by fuzz_depfile: "<ws>/one-deps" begins with the root "<ws>/one" as a string, not as a
        # directory. Its headers (an absolute -I, keyed as written) are the same files for both
        # checkouts, so the second hits; its restored dependency file must still name them, not
        # "<ws>/two-deps/...", which does not exist.
        deps = self.path("one-deps/include")
        self.write("one-deps/include/d.cuh", "#define D 4\n")
        source = SOURCE + '#include "d.cuh"\n'
        one, two = self.checkout("one", source=source), self.checkout("two", source=source)
        self.relative(one, extra=["-I", deps], env=self.base(one))
        self.relative(two, extra=["-I", deps], env=self.base(two))
        self.assert_counts(hits=1, misses=1)
        dep = self.keep(two, "k.o.d", "kache.o.d")
        self.assertIn(os.path.join(deps, "d.cuh"), self.text(two, "kache.o.d"))
        self.assertNotIn(self.path("two-deps"), self.text(two, "kache.o.d"))
        self.relative(two, extra=["-I", deps], tool="nvcc")
        self.assertEqual(self.text(two, "kache.o.d"), self.text(two, "k.o.d"))
        self.assertTrue(os.path.exists(dep))

    def test_second_checkout_hits_when_the_first_is_gone(self):
        # Remote sharing proper: the entry was made elsewhere (the first checkout no longer exists
        # here); the relative command must still find it through the build dir's fixed name.
        one, two = self.checkout("one"), self.checkout("two")
        self.relative(one, env=self.base(one))
        shutil.rmtree(one)
        self.relative(two, env=self.base(two))
        self.assert_counts(hits=1, misses=1)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))

    def test_header_reached_through_a_root_shares_without_base_dirs(self):
        # nvcc spells the header "../src/../include/h.cuh": below the build directory as spelled, so it
        # is keyed by the fixed name and resolves to each checkout's own file.
        one, two = self.checkout("one"), self.checkout("two")
        self.relative(one)
        shutil.rmtree(one)
        self.relative(two)
        self.assert_counts(hits=1, misses=1)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))

    def test_canonical_system_header_path_ties_the_entry_to_its_checkout(self):
        # GCC prints headers found through -isystem by their canonical absolute path: outside every
        # root and not keyed as written, so such an entry is only reused from the same checkout.
        one = self.checkout("one", source=SOURCE_I)
        two = self.checkout("two", source=SOURCE_I, header=HEADER.replace("2.0f", "7.0f").replace("* 3", "* 9"))
        self.relative(one, ["-isystem", "../include"])
        self.relative(two, ["-isystem", "../include"])
        self.assert_counts(hits=0, misses=2)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, ["-isystem", "../include"], tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))
        self.relative(one, ["-isystem", "../include"])
        self.assert_counts(hits=1, misses=2)

    def test_toolkit_header_named_through_a_cmake_isystem_is_the_toolchains(self):
        # nvcc.profile names CUDA's include/cccl "<toolkit>/bin/../targets/<arch>/include/cccl"; CMake adds
        # the same directory as -isystem "<toolkit>/targets/<arch>/include/cccl", which comes first, and a
        # GCC that keeps system header names as found (ggml's g++ 13 on the GPU machine; here
        # -fno-canonical-system-headers) names thrust's headers that way. thrust's device_system_tag.h
        # computes an #include: only as a toolchain header is it exempt from the project's scan, so this
        # spelling must be known as the toolchain's, or every build of every thrust compile misses (6 of
        # ggml's, issue 35). The toolkit is reached through a link, as /usr/local/cuda usually is.
        toolkit = os.path.dirname(kachetest.nvcc_home())
        link = self.path("cuda")
        os.symlink(toolkit, link)
        cccl = os.path.join(link, "targets", "x86_64-linux", "include", "cccl")
        self.assertTrue(os.path.isfile(os.path.join(cccl, "thrust", "iterator", "detail", "device_system_tag.h")))
        self.write("t.cu", "#include <thrust/device_vector.h>\n#include <thrust/sort.h>\n"
                   "void sort(thrust::device_vector<int>& v) { thrust::sort(v.begin(), v.end()); }\n")
        for build in ("b1", "b2"):
            os.makedirs(self.path(build))
            self.kache([os.path.join(link, "bin", "nvcc"), "-isystem", cccl, "-Xcompiler",
                        "-fno-canonical-system-headers", "-arch=sm_90", "-c", "../t.cu", "-o", "t.o", "-MD", "-MF", "t.d"],
                       cwd=self.path(build))
            with open(self.path(build, "t.d")) as f:
                self.assertIn(os.path.join(cccl, "thrust", "iterator", "detail", "device_system_tag.h"), f.read())
        self.assert_counts(hits=1, misses=1)

    def test_second_checkout_with_a_different_header_is_not_served_the_first(self):
        # Same relative commands, same source, but the second checkout's header differs: its build
        # must come from its own header, not from a record of the first checkout's files.
        one = self.checkout("one")
        two = self.checkout("two", header=HEADER.replace("2.0f", "3.0f").replace("* 3", "* 5"))
        self.relative(one)
        self.relative(two)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))
        self.assert_counts(hits=0, misses=2)

    def test_cmake_form_hits_across_checkouts_with_base_dirs(self):
        one, two = self.checkout("one"), self.checkout("two")
        self.cmake_like(one, env={"KACHE_PATHS_BASE_DIRS": one})
        self.cmake_like(two, env={"KACHE_PATHS_BASE_DIRS": two})
        self.assert_counts(hits=1, misses=1)
        obj = "CMakeFiles/x.dir/src/k.cu.o"
        kobj, kdep = self.keep(two, obj, "kache.o"), self.keep(two, obj + ".d", "kache.o.d")
        self.cmake_like(two, tool="nvcc")
        self.assert_same_object(kobj, os.path.join(two, "build", obj))
        dep = self.text(two, "kache.o.d")
        self.assertEqual(dep, self.text(two, obj + ".d"))
        self.assertIn(os.path.join(two, "src", "k.cu"), dep)
        self.assertIn("h.cuh", dep)
        self.assertNotIn(one, dep)
        self.assertTrue(dep.startswith(obj + ":") or dep.startswith(obj + " :"), dep[:200])

    def test_cmake_form_shares_headers_reached_from_the_source_dir(self):
        # The CMake form names the source absolutely; its header is spelled "<src>/../include/h.cuh",
        # below the source directory's root, so the second checkout hits with its own files.
        one, two = self.checkout("one"), self.checkout("two")
        self.cmake_like(one)
        self.cmake_like(two)
        self.assert_counts(hits=1, misses=1)
        obj = "CMakeFiles/x.dir/src/k.cu.o"
        kobj = self.keep(two, obj, "kache.o")
        self.cmake_like(two, tool="nvcc")
        self.assert_same_object(kobj, os.path.join(two, "build", obj))
        dep = self.text(two, obj + ".d")
        self.assertNotIn(one, dep)

    def test_absolute_include_flag_keys_apart_relative_one_shares(self):
        one, two = self.checkout("one", source=SOURCE_I), self.checkout("two", source=SOURCE_I)
        self.relative(one, ["-I" + os.path.join(one, "include")])
        self.relative(two, ["-I" + os.path.join(two, "include")])
        self.assert_counts(hits=0, misses=2)
        self.relative(one, ["-I../include"], env=self.base(one))
        self.relative(two, ["-I../include"], env=self.base(two))
        self.assert_counts(hits=1, misses=3)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, ["-I../include"], tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))

    def test_absolute_depfile_path_is_not_keyed(self):
        # A miss writes the dependency file into its scratch directory, so the -MF value reaches no
        # output: two checkouts' absolute -MF values share an entry, each depfile names its own files.
        one, two = self.checkout("one"), self.checkout("two")
        for root in (one, two):
            self.run_in(root, ["-c", "../src/k.cu", "-o", "k.o", "-MD", "-MF", os.path.join(root, "build", "k.o.d")],
                        None, "kache")
        self.assert_counts(hits=1, misses=1)
        dep = self.keep(two, "k.o.d", "kache.o.d")
        self.assertIn("../src/k.cu", self.text(two, "kache.o.d"))
        self.assertNotIn(one, self.text(two, "kache.o.d"))
        self.run_in(two, ["-c", "../src/k.cu", "-o", "k.o", "-MD", "-MF", os.path.join(two, "build", "k.o.d")],
                    None, "nvcc")
        self.assertEqual(self.text(two, "kache.o.d"), self.text(two, "k.o.d"))
        self.assertTrue(os.path.exists(dep))
        # Keyed as written without normalization (spec 000).
        env = {"KACHE_NVCC_PATH_NORMALIZE": "0"}
        for root in (one, two):
            self.run_in(root, ["-c", "../src/k.cu", "-o", "k.o", "-MD", "-MF", os.path.join(root, "build", "k.o.d")],
                        env, "kache")
        self.assert_counts(hits=1, misses=3)

    def test_path_normalization_off_makes_keys_path_specific(self):
        one, two = self.checkout("one"), self.checkout("two")
        env = {"KACHE_NVCC_PATH_NORMALIZE": "0"}
        self.relative(one, env=env)
        self.relative(two, env=env)
        self.assert_counts(hits=0, misses=2)
        self.relative(two, env=env)
        self.assert_counts(hits=1, misses=2)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))

    def test_lineinfo_with_a_relative_source_keys_the_checkout(self):
        # "../src/k.cu" under -lineinfo reaches device code as "<build>/../src/k.cu".
        one, two = self.checkout("one"), self.checkout("two")
        self.relative(one, ["-lineinfo"])
        self.relative(one, ["-lineinfo"])
        self.assert_counts(hits=1, misses=1)
        self.relative(two, ["-lineinfo"])
        self.assert_counts(hits=1, misses=2)
        obj = self.keep(two, "k.o", "kache.o")
        self.relative(two, ["-lineinfo"], tool="nvcc")
        self.assert_same_object(obj, os.path.join(two, "build", "k.o"))

    def test_rdc_objects_are_path_specific(self):
        one, two = self.checkout("one"), self.checkout("two")
        for flags in (["-dc"], ["-rdc=true"]):
            self.relative(one, flags)
            self.relative(two, flags)
            obj = self.keep(two, "k.o", "kache.o")
            self.relative(two, flags, tool="nvcc")
            self.assert_same_object(obj, os.path.join(two, "build", "k.o"))
        self.assert_counts(hits=0, misses=4)

    def test_object_still_naming_a_root_is_stored_for_its_checkout_only(self):
        # Issue 27: such an object is stored per checkout (its roots in the storage key), no longer
        # left unstored; another checkout with the same key text never gets it.
        src = SOURCE + "const char* where() { return WHERE; }\n"
        one, two = self.checkout("one", source=src), self.checkout("two", source=src)
        build = os.path.join(one, "build")
        flag = '-DWHERE="' + build + '"'
        r, log = self.log_of(["nvcc", "-c", "../src/k.cu", "-o", "k.o", flag], cwd=build)
        self.assertEqual(r.returncode, 0, log)
        self.assertIn(build.encode(), self.data(one, "k.o"))
        self.assertIn("for this checkout only (path-in-object)", log)
        s = self.assert_counts(hits=0, misses=1)
        self.assertEqual(s["stored_per_checkout"], {"path-in-object": 1})
        self.assertEqual(s["stored"], 1)
        obj = self.keep(one, "k.o", "first.o")
        self.kache(["nvcc", "-c", "../src/k.cu", "-o", "k.o", flag], cwd=build)
        self.assert_counts(hits=1, misses=1)
        self.nvcc(["-c", "../src/k.cu", "-o", "plain.o", flag], cwd=build)
        self.assert_same_object(obj, os.path.join(build, "plain.o"))
        # The same command (naming one's build directory) in checkout two: a miss of its own.
        self.kache(["nvcc", "-c", "../src/k.cu", "-o", "k.o", flag], cwd=os.path.join(two, "build"))
        self.assert_counts(hits=1, misses=2)

    def test_stored_object_does_not_name_the_checkout(self):
        # Issue 27: the installed object names its own checkout (as plain nvcc -g's does), the stored
        # one names none: checkout three, served two's entry, names only three.
        two, three = self.checkout("two"), self.checkout("three")
        self.relative(two, ["-g"])
        self.assertIn(two.encode(), self.data(two, "k.o"))
        self.relative(three, ["-g"])
        self.assert_counts(hits=1, misses=1)
        self.assertNotIn(two.encode(), self.data(three, "k.o"))
        self.assertIn(three.encode(), self.data(three, "k.o"))
        self.relative(two, ["-g"], tool="nvcc")
        self.assertIn(two.encode(), self.data(two, "k.o"), "plain nvcc -g should name the checkout")
        # The CMake form, with the checkout as a base dir.
        obj = "CMakeFiles/x.dir/src/k.cu.o"
        self.cmake_like(two, ["-g"], env={"KACHE_PATHS_BASE_DIRS": two})
        self.cmake_like(three, ["-g"], env={"KACHE_PATHS_BASE_DIRS": three})
        self.assertNotIn(two.encode(), self.data(three, obj))
        self.assert_counts(hits=2, misses=2)
        self.assertEqual(self.stats()["stored"], 2)

    def test_kache_base_dir_does_not_apply_to_nvcc(self):
        # ccache-style base_dir would rewrite -I<checkout>/include to a relative path and share; for
        # nvcc it changes nothing: the absolute flag still keys apart.
        one, two = self.checkout("one", source=SOURCE_I), self.checkout("two", source=SOURCE_I)
        self.relative(one, ["-I" + os.path.join(one, "include")], env={"KACHE_BASE_DIR": one})
        self.relative(two, ["-I" + os.path.join(two, "include")], env={"KACHE_BASE_DIR": two})
        self.assert_counts(hits=0, misses=2)
        # the same checkout with the same flags still hits
        self.relative(two, ["-I" + os.path.join(two, "include")], env={"KACHE_BASE_DIR": two})
        self.assert_counts(hits=1, misses=2)

    # --- SOURCE_DATE_EPOCH ---------------------------------------------------------------------
    def date_build(self, env):
        self.write("d.cu", DATE)
        self.kache(["nvcc", "-c", "d.cu", "-o", "d.o"], env=env)
        return self.read("d.o", "rb")

    def test_miss_pins_source_date_epoch_to_zero(self):
        obj = self.date_build({"SOURCE_DATE_EPOCH": None})
        self.assertIn(b"built on Jan  1 1970", obj)

    def test_build_exported_source_date_epoch_wins(self):
        obj = self.date_build({"SOURCE_DATE_EPOCH": YEAR_1971})
        self.assertIn(b"built on Jan  1 1971", obj)

    def test_source_date_epoch_passthrough_leaves_it_unset(self):
        # __DATE__ is a day between the build's start and its end (a slow build may cross midnight by
        # more than the minute of slack that a check after the build gave it).
        started = time.time()
        obj = self.date_build({"SOURCE_DATE_EPOCH": None, "KACHE_NVCC_SOURCE_DATE_EPOCH": "passthrough"})
        ended = time.time()
        today = {time.strftime("%b %e %Y", time.localtime(t)).encode() for t in (started, ended)}
        self.assertTrue(any(b"built on " + t in obj for t in today), f"want one of {today}")
        self.assertNotIn(b"Jan  1 1970", obj)

    def test_source_date_epoch_is_not_keyed(self):
        first = self.date_build({"SOURCE_DATE_EPOCH": None})
        self.assertIn(b"built on Jan  1 1970", first)
        os.unlink(self.path("d.o"))
        second = self.date_build({"SOURCE_DATE_EPOCH": YEAR_1971})
        self.assert_counts(hits=1, misses=1)
        self.assertIn(b"built on Jan  1 1970", second)
        self.assertEqual(first, second)


if __name__ == "__main__":
    kachetest.main()
