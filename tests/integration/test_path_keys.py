"""Issue 10: sharing across build directories and checkouts (paths in flag values, -o, -MF, -MT,
-lineinfo).

CMakeShare builds one CMake project (a header generated into the build directory by configure_file and
found through -I<build>/gen, a -isystem directory, a -lineinfo library, a CUDA_SEPARABLE_COMPILATION
library and executable, CMAKE_CUDA_ARCHITECTURES "75;90") through the launcher form:
  (a) a second build directory of the same checkout is 100 % hits;
  (b) the checkout copied to another absolute path, the first one deleted, KACHE_PATHS_BASE_DIRS set to
      each checkout's root: 100 % hits except the -lineinfo objects, which name the checkout's
      absolute source path in device code and must miss;
  (c) every object equals (sections) a plain-nvcc build of the same checkout, and every restored
      dependency file names that build's own files.
PathRules holds one soundness test per rule: the path is shown not to reach the outputs (a fresh miss
elsewhere gives the same bytes, or plain nvcc the same sections), or the key is shown to change where
it does (a relative source, or a build-directory header with device code, under -lineinfo).

Run against a kache that keys flag values literally (KACHE_NVCC_PATH_NORMALIZE=0, or the commit before
this change) the hit counts fail: a second build directory misses every object with -I<build>/gen."""
import os
import re
import shutil
import tempfile
import unittest

import buildsys
import kachetest
from kachetest import KacheTestCase

CMAKELISTS = r"""
cmake_minimum_required(VERSION 3.24)
project(sharegen LANGUAGES CXX CUDA)
set(CMAKE_CUDA_ARCHITECTURES "75;90")
set(SCALE 3)
configure_file(config.h.in ${CMAKE_CURRENT_BINARY_DIR}/gen/config.h)
include_directories(${CMAKE_CURRENT_BINARY_DIR}/gen ${CMAKE_CURRENT_SOURCE_DIR}/include)
include_directories(SYSTEM ${CMAKE_CURRENT_SOURCE_DIR}/third)

add_library(whole STATIC src/a.cu src/b.cu)

add_library(lines STATIC src/c.cu src/lines2.cu)
target_compile_options(lines PRIVATE -lineinfo)

add_library(sep STATIC src/d.cu src/e.cu)
set_target_properties(sep PROPERTIES CUDA_SEPARABLE_COMPILATION ON)

add_executable(app src/main.cu)
set_target_properties(app PROPERTIES CUDA_SEPARABLE_COMPILATION ON)
target_link_libraries(app whole lines sep)
"""

FILES = {
    "config.h.in": "#pragma once\n#define SCALE @SCALE@\n",
    "include/ops.cuh": '#pragma once\n#include "config.h"\n'
                       "__device__ inline float op(float x) { return x * SCALE + 1.0f; }\n",
    "third/t.cuh": "#pragma once\n__host__ __device__ inline int third_value() { return 7; }\n",
    "src/a.cu": '#include "ops.cuh"\n__global__ void ka(float* x) { x[threadIdx.x] = op(x[threadIdx.x]); }\n'
                "void launch_a(float* x) { ka<<<1, 32>>>(x); }\n",
    "src/b.cu": '#include "ops.cuh"\n#include <t.cuh>\n'
                "__global__ void kb(float* x) { x[threadIdx.x] = op(2.0f) + third_value(); }\n"
                "void launch_b(float* x) { kb<<<1, 32>>>(x); }\n",
    "src/c.cu": '#include "config.h"\n__global__ void kc(float* x) { x[threadIdx.x] *= SCALE; }\n'
                "void launch_c(float* x) { kc<<<1, 32>>>(x); }\n",
    "src/lines2.cu": '#include "ops.cuh"\n__global__ void kl(float* x) {\n  if (threadIdx.x < 8)\n'
                     "    x[threadIdx.x] = op(x[threadIdx.x]);\n}\nvoid launch_l(float* x) { kl<<<1, 32>>>(x); }\n",
    "src/d.cu": '#include "config.h"\n__device__ float dscale(float v) { return v * SCALE; }\n',
    "src/e.cu": "__device__ float dscale(float v);\n"
                "__global__ void ke(float* x) { x[threadIdx.x] = dscale(x[threadIdx.x]); }\n"
                "void launch_e(float* x) { ke<<<1, 32>>>(x); }\n",
    "src/main.cu": "void launch_a(float*); void launch_b(float*); void launch_c(float*); void launch_l(float*);\n"
                   "void launch_e(float*);\n"
                   "int main() { float* x = nullptr; cudaMalloc(&x, 128);\n"
                   "  launch_a(x); launch_b(x); launch_c(x); launch_l(x); launch_e(x);\n"
                   "  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1; }\n",
}
LINEINFO_OBJECTS = {"CMakeFiles/lines.dir/src/c.cu.o", "CMakeFiles/lines.dir/src/lines2.cu.o"}


def write_project(root):
    for rel, text in dict(FILES, **{"CMakeLists.txt": CMAKELISTS}).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


def cmake(build, src, env, launcher=True):
    args = ["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
    if launcher:
        args.append("-DCMAKE_CUDA_COMPILER_LAUNCHER=" + buildsys.LAUNCHER)
    buildsys.run(args, cwd=src, env=env)
    return build




def ninja(build, env):
    buildsys.run(["ninja", "-C", build, "-j", buildsys.JOBS], cwd=build, env=env)


def logged_outputs(log_file, what):
    """Outputs the debug log names as hits ("hit") or stored misses ("miss")."""
    pattern = {"hit": r"debug: hit: (\S+)", "miss": r"debug: miss: stored (\S+)"}[what]
    with open(log_file) as f:
        return set(re.findall(pattern, f.read()))


def recorded_deps(build, env):
    """{object: [dependency, ...]} as Ninja read them from the dependency files (deps = gcc: Ninja
    deletes each .d after reading it, and fails the build if its target is not the object)."""
    out = buildsys.run(["ninja", "-C", build, "-t", "deps"], cwd=build, env=env).stdout
    deps, current = {}, None
    for line in out.splitlines():
        if line and not line[0].isspace():
            current = line.split(":")[0]
            deps[current] = []
        elif line.strip() and current:
            deps[current].append(line.strip())
    return deps


class CMakeShare(KacheTestCase):
    def setUp(self):
        super().setUp()
        if buildsys.NVCC is None or shutil.which("cmake") is None or shutil.which("ninja") is None:
            raise unittest.SkipTest("nvcc, cmake or ninja is not on PATH")
        self.cache_dir = self.path("cache")

    def env_for(self, checkout, log_file=None):
        env = buildsys.clean_env(self.cache_dir, self.path())
        env["KACHE_PATHS_BASE_DIRS"] = checkout
        if log_file:
            env["KACHE_LOG"] = "kache=debug"
            env["KACHE_LOG_FILE"] = log_file
        return env

    def build(self, checkout, name, log_name):
        log_file = self.path(log_name)
        env = self.env_for(checkout, log_file)
        build = cmake(os.path.join(checkout, name), checkout, env)
        open(log_file, "w").close()  # CMake's own compiler checks are not counted
        buildsys.zero_stats(env)
        ninja(build, env)
        return build, buildsys.stats(env), log_file

    def plain(self, checkout):
        env = buildsys.clean_env(self.path("unused-cache"), self.path())
        build = cmake(os.path.join(checkout, "build-plain"), checkout, env, launcher=False)
        ninja(build, env)
        return build

    def assert_like_plain(self, build, plain, label, names=buildsys.SECTIONS):
        for rel in buildsys.compile_outputs(build) + ["app"]:
            diff = buildsys.section_diff(os.path.join(build, rel), os.path.join(plain, rel), names)
            self.assertEqual(diff, [], f"{label}: {rel} differs from plain nvcc's in {diff}")

    def assert_depfiles_name(self, build, checkout, label):
        recorded = recorded_deps(build, self.env_for(checkout))
        for rel in buildsys.compile_outputs(build):
            self.assertIn(rel, recorded, f"{label}: no dependencies recorded for {rel}")
            for d in recorded[rel]:
                p = os.path.normpath(os.path.join(build, d))
                self.assertTrue(os.path.exists(p), f"{label}: {rel} depends on {d}, which does not exist")
                if os.path.basename(d) == "config.h":
                    self.assertEqual(p, os.path.join(build, "gen", "config.h"), f"{label}: {rel}")
                elif not d.startswith(("/usr/", "/opt/")):
                    self.assertTrue(p.startswith(checkout + os.sep), f"{label}: {rel} depends on {d}")
            if rel.endswith(("a.cu.o", "c.cu.o", "d.cu.o")):
                self.assertIn(os.path.join(build, "gen", "config.h"), recorded[rel], f"{label}: {rel}")

    def test_second_build_dir_and_moved_checkout(self):
        one = write_project(self.path("one", "proj"))
        plain_one = self.plain(one)
        first, s, _ = self.build(one, "b1", "b1.log")
        n = len(buildsys.compile_outputs(first))
        self.assertEqual(n, 7)
        self.assertEqual((s["hits"], s["misses"]), (0, n), f"cold build: {s}")
        self.assert_like_plain(first, plain_one, "cold build")

        # (a) a second build directory of the same checkout: -I<b2>/gen is keyed as /kache/build/gen.
        second, s, log = self.build(one, "b2", "b2.log")
        self.assertEqual((s["hits"], s["misses"]), (n, 0),
                         f"(a) second build directory: want 100 % hits; missed {logged_outputs(log, 'miss')}; {s}")
        self.assertLessEqual(set(s["passthrough_reasons"]), {"device-link", "link"}, s)
        self.assert_like_plain(second, plain_one, "(a) second build directory")  # (c)
        self.assert_depfiles_name(second, one, "(a) second build directory")

        # (b) the checkout at another absolute path, the first one gone.
        two = self.path("elsewhere", "deeper", "proj")
        shutil.copytree(one, two, ignore=shutil.ignore_patterns("b1", "b2", "build-plain"))
        shutil.rmtree(self.path("one"))
        plain_two = self.plain(two)
        moved, s, log = self.build(two, "build", "moved.log")
        missed = {os.path.relpath(p, moved) for p in logged_outputs(log, "miss")}
        rdc = {o for o in buildsys.compile_outputs(moved) if "/sep.dir/" in o or "/app.dir/" in o}
        self.assertEqual(missed, LINEINFO_OBJECTS | rdc,
                         "(b) moved checkout: only the -lineinfo objects (device code names the source's "
                         "absolute path) and the -rdc ones (the module id hashes the source's real path) may "
                         f"miss, and they must; stats {s}")
        self.assertEqual((s["hits"], s["misses"]), (n - len(missed), len(missed)), s)
        # (c) __nv_module_id hashes the source's real path for -rdc objects (two plain builds at two paths
        # differ in it): the -rdc entries are stored per real source path (issue 35: a moved checkout
        # under a base dir used to get the first checkout's id), so every section equals plain's, and no
        # two -rdc objects share one.
        self.assert_like_plain(moved, plain_two, "(b) moved checkout")
        ids = [buildsys.module_id(os.path.join(moved, o)) for o in rdc]
        self.assertEqual(len(ids), 3)
        self.assertEqual(len(set(ids)), len(ids), f"two -rdc objects share a module id: {ids}")
        self.assert_depfiles_name(moved, two, "(b) moved checkout")
        for rel in LINEINFO_OBJECTS:
            with open(os.path.join(moved, rel), "rb") as f:
                self.assertTrue(os.path.join(two, "src").encode() in f.read(), f"{rel}: -lineinfo names the source")


NAMED = ('#include "cfg.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = V; }\n'
         "const char* source_name() { return __FILE__; }\n")
CFG = "#define V 2.0f\ninline const char* cfg_name() { return __FILE__; }\n"
# Uses the header's __FILE__, so the object names the header's path (as the prefix maps rewrite it).
NAMED_USE = NAMED + "const char* header_name() { return cfg_name(); }\n"
# The same without __FILE__: a header whose path no compile expands (one that mentions __FILE__ ties an
# entry to its root even where the code using it is never emitted: test_expanded_paths.py).
PLAIN_CFG = "#define V 2.0f\n"
# A header with device code: -lineinfo names it in the device line table.
DEVICE_CFG = "#define V 2.0f\n__global__ void from_header(float* x) { x[threadIdx.x] = V + 1.0f; }\n"


class PathRules(KacheTestCase):
    def keep(self, path, as_path):
        shutil.copy(path, as_path)
        return as_path

    def other_cache(self, name):
        return {"KACHE_DIR": self.path(name)}

    def bytes_of(self, path):
        with open(path, "rb") as f:
            return f.read()

    def test_output_and_depfile_paths_reach_no_output(self):
        # The rule: -o and -MF are not keyed, a single -MT is a placeholder in the stored depfile.
        # Proof: misses for different names in separate caches give byte-identical objects (with -g,
        # whose debug info names nvcc's intermediates) and the same depfile apart from its target.
        self.write("w/k.cu", NAMED)
        self.write("w/cfg.cuh", CFG)
        os.makedirs(self.path("w", "sub"))
        w = self.path("w")
        cmd = lambda o, d: ["nvcc", "-c", "-g", "k.cu", "-o", o, "-MD", "-MF", d, "-MT", o]
        self.kache(cmd("a.o", "a.d"), cwd=w, env=self.other_cache("c1"))
        self.kache(cmd("sub/b.o", "sub/b.d"), cwd=w, env=self.other_cache("c2"))
        self.assertTrue(self.bytes_of(self.path("w/a.o")) == self.bytes_of(self.path("w/sub/b.o")))
        self.assertEqual(self.read("w/a.d").replace("a.o", "sub/b.o", 1), self.read("w/sub/b.d"))
        # (d) so one cache serves both names, each depfile naming its own target.
        for o, d in (("a.o", "a.d"), ("b.o", "b.d"), ("sub/a.o", "sub/a.d")):
            self.kache(cmd(o, d), cwd=w)
        self.assert_counts(hits=2, misses=1)
        kept = self.keep(self.path("w/sub/a.o"), self.path("w/kache.o"))
        dep = self.read("w/sub/a.d")
        self.assertTrue(dep.startswith("sub/a.o :") or dep.startswith("sub/a.o:"), dep[:80])
        self.nvcc(cmd("sub/a.o", "sub/a.d")[1:], cwd=w)
        self.assert_same_object(kept, self.path("w/sub/a.o"))
        self.assertEqual(dep, self.read("w/sub/a.d"))
        # Spec 000's literal keys stay available.
        for o, d in (("a.o", "a.d"), ("b.o", "b.d")):
            self.kache(cmd(o, d), cwd=w, env={"KACHE_NVCC_PATH_NORMALIZE": "0"})
        self.assert_counts(hits=2, misses=3)

    def test_absolute_include_below_the_build_dir_is_keyed_by_its_root(self):
        # -I<build>/gen (CMake's configure_file directory): keyed as /kache/build/gen. Proof: the
        # header's -g line-table entry reaches the object through a placeholder of the build root
        # (issue 27), so the hit in the second build directory names b2's header and not b1's, and a
        # fresh miss there gives the hit's bytes; a different header there misses (content keyed).
        self.write("co/src/k.cu", '#include "cfg.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = V; }\n'
                   "int host_value() { return cfg_value(); }\n")
        for b in ("b1", "b2"):
            self.write(f"co/{b}/gen/cfg.cuh", PLAIN_CFG + "inline int cfg_value() { return 7; }\n")
        src = self.path("co/src/k.cu")
        cmd = lambda b: ["nvcc", "-c", "-g", src, "-I" + self.path("co", b, "gen"), "-o", "k.o", "-MD", "-MF",
                         "k.o.d"]
        self.kache(cmd("b1"), cwd=self.path("co/b1"))
        self.kache(cmd("b2"), cwd=self.path("co/b2"))
        self.assert_counts(hits=1, misses=1)
        hit = self.bytes_of(self.path("co/b2/k.o"))
        self.assertTrue(self.path("co/b2").encode() in hit)
        self.assertFalse(self.path("co/b1").encode() in hit)
        self.assertIn(self.path("co/b2/gen/cfg.cuh"), self.read("co/b2/k.o.d"))
        self.assertNotIn(self.path("co/b1"), self.read("co/b2/k.o.d"))
        self.kache(cmd("b2"), cwd=self.path("co/b2"), env=self.other_cache("fresh"))
        self.assertTrue(hit == self.bytes_of(self.path("co/b2/k.o")), "a fresh miss differs from the hit")
        self.write("co/b2/gen/cfg.cuh", PLAIN_CFG.replace("2.0f", "5.0f") + "inline int cfg_value() { return 7; }\n")
        self.kache(cmd("b2"), cwd=self.path("co/b2"))
        self.assert_counts(hits=1, misses=2)
        # The same value outside every root stays literal: b2 naming b1's directory keys apart from b1.
        self.kache(cmd("b1"), cwd=self.path("co/b2"))
        self.assert_counts(hits=1, misses=3)

    def test_user_prefix_map_below_a_root_is_keyed_by_the_root(self):
        # -Xcompiler -ffile-prefix-map=<checkout>=/user: the user's rule wins over kache's (as under plain
        # nvcc), so both checkouts' objects name /user/src/k.cu, in host and device code alike; with the
        # checkout as a base dir the old path is keyed as /kache/base0 and the second checkout hits,
        # its object equal to plain nvcc's there.
        for co in ("one", "two"):
            self.write(f"{co}/src/k.cu", NAMED_USE)
            self.write(f"{co}/src/cfg.cuh", CFG)
        def build(co, tool):
            root = self.path(co)
            args = ["-c", os.path.join(root, "src", "k.cu"), "-Xcompiler", f"-ffile-prefix-map={root}=/user",
                    "-o", "k.o"]
            if tool == "kache":
                self.kache(["nvcc"] + args, cwd=root, env={"KACHE_PATHS_BASE_DIRS": root})
            else:
                self.nvcc(args, cwd=root)
            return self.bytes_of(self.path(co, "k.o"))
        build("one", "kache")
        shutil.rmtree(self.path("one"))
        obj = build("two", "kache")
        self.assert_counts(hits=1, misses=1)
        self.assertTrue(b"/user/src/k.cu" in obj and b"/user/src/cfg.cuh" in obj)
        kept = self.keep(self.path("two/k.o"), self.path("two/kache.o"))
        build("two", "nvcc")
        self.assert_same_object(kept, self.path("two/k.o"))

    def lineinfo(self, b, source, env=None):
        cmd = ["nvcc", "-c", "-lineinfo", source, "-I" + self.path("co", b, "gen"), "-o", "k.o"]
        self.kache(cmd, cwd=self.path("co", b), env=env)
        kept = self.keep(self.path("co", b, "k.o"), self.path("co", b, "kache.o"))
        self.nvcc(cmd[1:], cwd=self.path("co", b))
        self.assert_same_object(kept, self.path("co", b, "k.o"))
        return self.bytes_of(kept)

    def test_lineinfo_with_absolute_paths_shares_between_build_dirs(self):
        # Measured: with an absolute source, -lineinfo names the source's path, not the working
        # directory, in device code, so the second build directory hits (.nv_fatbin equals plain
        # nvcc's there).
        self.write("co/src/k.cu", NAMED.replace("const char* source_name() { return __FILE__; }\n", ""))
        for b in ("b1", "b2"):
            self.write(f"co/{b}/gen/cfg.cuh", PLAIN_CFG)
        obj = self.lineinfo("b1", self.path("co/src/k.cu"))
        self.assertTrue(self.path("co/src/k.cu").encode() in obj)
        self.lineinfo("b2", self.path("co/src/k.cu"))
        self.assert_counts(hits=1, misses=1)

    def test_lineinfo_with_a_relative_source_keys_the_working_directory(self):
        # A relative source under -lineinfo puts "<cwd>/../src/k.cu" into device code: two build
        # directories must not share.
        self.write("co/src/k.cu", NAMED.replace("const char* source_name() { return __FILE__; }\n", ""))
        for b in ("b1", "b2"):
            self.write(f"co/{b}/gen/cfg.cuh", CFG)
        obj = self.lineinfo("b1", "../src/k.cu")
        self.assertTrue(self.path("co/b1").encode() in obj)
        self.lineinfo("b2", "../src/k.cu")
        self.assert_counts(hits=0, misses=2)
        self.lineinfo("b2", "../src/k.cu")
        self.assert_counts(hits=1, misses=2)

    def test_lineinfo_object_naming_the_build_dir_is_tied_to_it(self):
        # A header in the build directory with device code is named in the device line table
        # ("<b1>/gen/cfg.cuh"); the key does not name b1, so the entry is stored for b1's roots only:
        # b2 misses and gets its own paths, b1 still hits.
        self.write("co/src/k.cu", NAMED.replace("const char* source_name() { return __FILE__; }\n", ""))
        for b in ("b1", "b2"):
            self.write(f"co/{b}/gen/cfg.cuh", DEVICE_CFG)
        obj = self.lineinfo("b1", self.path("co/src/k.cu"))
        self.assertTrue(self.path("co/b1/gen").encode() in obj)
        obj = self.lineinfo("b2", self.path("co/src/k.cu"))
        self.assertTrue(self.path("co/b2/gen").encode() in obj)
        self.assertFalse(self.path("co/b1").encode() in obj)
        self.assert_counts(hits=0, misses=2)
        self.lineinfo("b1", self.path("co/src/k.cu"))
        self.assert_counts(hits=1, misses=2)


if __name__ == "__main__":
    kachetest.main()
