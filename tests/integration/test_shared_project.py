"""Issue 35's floor: a project shaped like cuda-samples, built through kache with CMake + Ninja for C,
C++ and CUDA, shared where the objects allow and faithful everywhere.

The project (generated below): two samples whose C++, C and CUDA sources include an error-check macro
that expands __FILE__ (so nearly every object names its source directory) and their own header as
"../inc/<name>.h" (cuda-samples' MC_EstimatePi* layout), a literal include dir spelled with `..` as
CMake passes cuda-samples' include_directories(../../../Common) on, in which a header climbs out with
`..` to a header outside every path root (and the lookup of "../inc/<name>.h" there is watched as an
absent path climbing out of it), the same headers reached through a plain -I by the other sample, a
header generated into the build directory, and an -rdc (CUDA_SEPARABLE_COMPILATION) target. Every object must equal the plain compiler's built in the
same place by every allocated section (SHF_ALLOC: code, data, .rodata.str1.* strings, nvcc's module
id), and so must the dependency lists ninja recorded and the program's output.

- a second build directory of the same checkout: every compile hits;
- a second machine (an empty local cache, the first's Redis as remote) with the checkout at the same
  path: every compile hits, and nothing is written to the remote;
- a second checkout at another path, built with docs/sharing.md's portable-path recipe: every compile
  hits but the -rdc one, whose module id hashes the source's real path (its object equals plain nvcc's
  in each checkout);
- the second checkout without the recipe: the objects naming their source directory miss, counted as
  stored_per_checkout.path-in-object, and `kache explain --last` names the root and the recipe.

Each fails on c6b0e7a (entries naming __FILE__ were keyed by every root's path, the build directory
included; an absent path climbing out of a literal include dir spelled with `..` made the entry
specific to every root; a gcc/clang prefix map was keyed by its literal old path; -rdc objects were
shared between checkouts under a base dir, with the first checkout's module id).
"""
import hashlib
import os
import shutil
import struct
import subprocess
import unittest

import buildsys
import kachetest
import servers
from kachetest import KacheTestCase

CHECK_H = r"""#pragma once
#include <stdio.h>
#include <stdlib.h>
/* cuda-samples' checkCudaErrors shape: the failing file and line, by __FILE__. */
#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x); abort(); } } while (0)
#define WHERE __FILE__
"""
# Found through the literal include dir Common/; climbs out of it to Shared/, outside every root.
HELPER_H = '#pragma once\n#include "../Shared/shared.h"\n'
SHARED_H = "#pragma once\nstatic inline int shared_value(int x) { return 3 * x + 1; }\n"
GEN_H_IN = '#pragma once\n#define GENERATED "@PROJECT_NAME@-generated"\n'
SAMPLE_H = "#pragma once\nint {name}_kernel_count(void);\nconst char* {name}_where(void);\n"
MAIN_CPP = r"""#include "../inc/{name}.h"
#include <check.h>
#include {helper}
#include "gen.h"
#include <cstdio>
extern "C" const char* {name}_c_where(void);
int main() {{
  CHECK(shared_value(1) == 4);
  std::printf("%s %s %s %s %d %s\n", WHERE, {name}_where(), {name}_c_where(), GENERATED, {name}_kernel_count(),
              __FILE__);
  return 0;
}}
"""
KERNEL_CU = r"""#include "../inc/{name}.h"
#include <check.h>
#include {helper}
__device__ int twice(int x) {{ return 2 * x; }}
__global__ void scale(int* p) {{ p[threadIdx.x] = twice(p[threadIdx.x]); }}
int {name}_kernel_count(void) {{ CHECK(shared_value(2) == 7); return 1; }}
const char* {name}_where(void) {{ return WHERE; }}
"""
UTIL_C = r"""#include <check.h>
#include "gen.h"
const char* {name}_c_where(void) {{ CHECK(GENERATED[0] != 0); return WHERE; }}
"""
CMAKELISTS = r"""cmake_minimum_required(VERSION 3.20)
project(shaped LANGUAGES C CXX CUDA)
set(CMAKE_CUDA_ARCHITECTURES 75)
configure_file(gen.h.in ${CMAKE_BINARY_DIR}/gen/gen.h)
include_directories(${CMAKE_BINARY_DIR}/gen)
add_executable(alpha Samples/alpha/src/main.cpp Samples/alpha/src/kernel.cu Samples/alpha/src/util.c)
set_target_properties(alpha PROPERTIES CUDA_SEPARABLE_COMPILATION ON)
# cuda-samples' include_directories(../../../Common), which CMake passes on as "<sample>/../../../Common".
target_include_directories(alpha PRIVATE ${CMAKE_SOURCE_DIR}/Samples/alpha/../../Common)
add_executable(beta Samples/beta/src/main.cpp Samples/beta/src/kernel.cu Samples/beta/src/util.c)
target_include_directories(beta PRIVATE ${CMAKE_SOURCE_DIR}/Common ${CMAKE_SOURCE_DIR}/Shared)
"""
SHF_ALLOC, SHT_NOBITS = 0x2, 8


def write_project(root):
    files = {"CMakeLists.txt": CMAKELISTS, "gen.h.in": GEN_H_IN, "Common/check.h": CHECK_H,
             "Common/helper.h": HELPER_H, "Shared/shared.h": SHARED_H}
    # alpha reaches Shared/shared.h through Common/../Shared, beta through its own plain -I.
    for name, helper in (("alpha", "<helper.h>"), ("beta", "<shared.h>")):
        d = f"Samples/{name}"
        files[f"{d}/inc/{name}.h"] = SAMPLE_H.format(name=name)
        files[f"{d}/src/main.cpp"] = MAIN_CPP.format(name=name, helper=helper)
        files[f"{d}/src/kernel.cu"] = KERNEL_CU.format(name=name, helper=helper)
        files[f"{d}/src/util.c"] = UTIL_C.format(name=name)
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    # Older than any compile: a file modified in the tick a compile starts is rightly not stored.
    for dirpath, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(dirpath, n), ns=(1_600_000_000 * 10**9,) * 2)
    return root


def allocated_sections(path):
    """{name: (type, size, bytes)} of every SHF_ALLOC section of an ELF64 little-endian file (NOBITS
    sections by size only)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, f"{path} is no ELF64 file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name_off, kind, flags, _addr, offset, size, *_ in headers:
        if not flags & SHF_ALLOC:
            continue
        name = data[names_at + name_off:data.index(b"\0", names_at + name_off)].decode()
        out[name] = (kind, size, b"" if kind == SHT_NOBITS else data[offset:offset + size])
    return out


class SharedProject(KacheTestCase):
    def setUp(self):
        super().setUp()
        for tool in ("cmake", "ninja", "gcc", "g++"):
            if shutil.which(tool) is None:
                self.skipTest(f"{tool} is not on PATH")
        if servers.missing("redis-server"):
            self.skipTest(servers.missing("redis-server"))
        self.checkout1 = write_project(self.path("work", "one", "proj"))
        self.checkout2 = write_project(self.path("work", "two", "proj"))

    # --- building -----------------------------------------------------------------------------------
    def env_for(self, cache, remote=None, base_dir=None):
        env = buildsys.clean_env(cache, self.ws)
        if remote:
            env["KACHE_REMOTE_STORAGE"] = remote
        if base_dir:
            env["KACHE_PATHS_BASE_DIRS"] = base_dir
        return env

    def build(self, checkout, build_dir, env, launcher, recipe=False):
        """Configures and builds from scratch in checkout/build_dir; returns {object: path}."""
        build = os.path.join(checkout, build_dir)
        shutil.rmtree(build, ignore_errors=True)
        args = ["cmake", "-S", checkout, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                "-DCMAKE_C_COMPILER=gcc", "-DCMAKE_CXX_COMPILER=g++"]
        if launcher:
            args += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={buildsys.LAUNCHER}" for lang in ("C", "CXX", "CUDA")]
        if recipe:  # docs/sharing.md, "Portable paths"
            args += [f"-DCMAKE_C_FLAGS=-ffile-prefix-map={checkout}=.",
                     f"-DCMAKE_CXX_FLAGS=-ffile-prefix-map={checkout}=.",
                     f"-DCMAKE_CUDA_FLAGS=-Xcompiler=-ffile-prefix-map={checkout}=."]
        buildsys.run(args, cwd=checkout, env=env)
        buildsys.zero_stats(env)  # only the project's compiles: CMake's checks ran through kache too
        buildsys.run(["ninja", "-C", build, "-j", buildsys.JOBS], cwd=build, env=env)
        objects = {}
        for dirpath, _, names in os.walk(build):
            for n in names:
                if n.endswith(".o") and "CMakeFiles/" in dirpath + "/" and "CompilerId" not in dirpath:
                    objects[os.path.relpath(os.path.join(dirpath, n), build)] = os.path.join(dirpath, n)
        return objects

    def plain_then_kache(self, checkout, build_dir, env, recipe=False):
        """Builds with the plain compilers, keeps what decides the result, then builds through kache in
        the same place and asserts each equal; returns kache's statistics of that build."""
        plain = self.build(checkout, build_dir, env, launcher=False, recipe=recipe)
        # Six compiles and alpha's device link (nvcc -dlink, not cached, made from the objects).
        self.assertEqual(7, len(plain), plain)
        want = self.outcome(checkout, build_dir, plain, env)
        got_objects = self.build(checkout, build_dir, env, launcher=True, recipe=recipe)
        s = buildsys.stats(env)
        got = self.outcome(checkout, build_dir, got_objects, env)
        # A subtest: the caller's assertions on the counts still run when the objects differ.
        with self.subTest(f"equal to plain in {os.path.relpath(checkout, self.ws)}/{build_dir}"):
            self.assertEqual(sorted(want["objects"]), sorted(got["objects"]))
            for obj, sections in want["objects"].items():
                for name, value in sections.items():
                    self.assertEqual(value, got["objects"][obj].get(name), f"{obj}: section {name} differs from plain")
                self.assertEqual(sorted(sections), sorted(got["objects"][obj]), obj)
            self.assertEqual(want["deps"], got["deps"], "ninja's recorded dependencies differ from plain")
            self.assertEqual(want["output"], got["output"], "the programs print otherwise than plain's")
        return s

    def outcome(self, checkout, build_dir, objects, env):
        build = os.path.join(checkout, build_dir)
        # "target: #deps N, deps mtime T (VALID)" and the dependencies, indented, per target in the order
        # the build finished them.
        deps, target = {}, None
        for line in buildsys.run(["ninja", "-C", build, "-t", "deps"], cwd=build, env=env).stdout.splitlines():
            if line.startswith(" "):
                deps[target].append(line.strip())
            elif line.strip():
                target = line.split(":")[0]
                deps[target] = []
        output = [buildsys.run([os.path.join(build, p)], cwd=build, env=env).stdout for p in ("alpha", "beta")]
        return {"objects": {o: allocated_sections(p) for o, p in objects.items()}, "deps": deps, "output": output}

    def assert_all_hits(self, s, expected=6):
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (expected, 0, 0), s)

    # --- the floor ----------------------------------------------------------------------------------
    def test_build_dirs_machines_and_checkouts(self):
        # Each scenario is a subtest: on a kache that fails one, the others still run and report.
        with servers.Redis() as redis:
            machine1 = self.env_for(self.path("cache1"), remote=redis.url)
            cold = self.plain_then_kache(self.checkout1, "build", machine1)
            self.assertEqual(cold["misses"], 6, cold)
            with self.subTest("every object names its source directory, counted with a readable label"):
                self.assertEqual(cold["stored_per_checkout"], {"path-in-object": 6}, cold)
                text = buildsys.run([buildsys.LAUNCHER, "-s"], cwd="/", env=machine1).stdout
                self.assertRegex(text, r"\n  stored_per_checkout\.path-in-object +6\n")

            with self.subTest("a second build directory of the same checkout"):
                self.assert_all_hits(self.plain_then_kache(self.checkout1, "build-two", machine1))

            with self.subTest("a second machine: an empty local cache, the same remote and checkout path"):
                before = {k: hashlib.sha256(redis.get(k) or b"").hexdigest() for k in redis.keys()}
                machine2 = self.env_for(self.path("cache2"), remote=redis.url)
                s = self.plain_then_kache(self.checkout1, "build-three", machine2)
                after = {k: hashlib.sha256(redis.get(k) or b"").hexdigest() for k in redis.keys()}
                self.assert_all_hits(s)
                self.assertEqual(s["remote_hits"], 6, s)
                self.assertEqual(before, after, "a machine that only hit wrote to the remote")

        with self.subTest("a second checkout without the recipe misses, and explain says why and what fixes it"):
            s = self.plain_then_kache(self.checkout2, "build", machine1)
            self.assertEqual((s["hits"], s["misses"]), (0, 6), s)
            self.assertEqual(s["stored_per_checkout"], {"path-in-object": 6}, s)
            explained = self.kache(["explain", "--last"], env={"KACHE_DIR": self.path("cache1")}).stdout
            self.assertIn(os.path.join(self.checkout2, "Samples"), explained)
            self.assertIn("-ffile-prefix-map=<checkout>=.", explained)

    def test_portable_path_recipe_shares_between_checkouts(self):
        env1 = self.env_for(self.path("cache"), base_dir=self.checkout1)
        cold = self.plain_then_kache(self.checkout1, "build", env1, recipe=True)
        # The recipe maps every path away: nothing is stored per checkout.
        self.assertEqual((cold["misses"], cold["stored_per_checkout"]), (6, {}), cold)
        env2 = self.env_for(self.path("cache"), base_dir=self.checkout2)
        s = self.plain_then_kache(self.checkout2, "build", env2, recipe=True)
        # The -rdc object's module id hashes the source's real path: it alone misses, and equals plain
        # nvcc's in each checkout (plain_then_kache compared every allocated section).
        self.assertEqual((s["hits"], s["misses"], s["passthrough"]), (5, 1, 0), s)


if __name__ == "__main__":
    kachetest.main()
