"""Issue 39 part 3: path dependence read from what the compiler saw, not only from the object's bytes.

A compile that expands a path of the build (__FILE__, __BASE_FILE__, __builtin_FILE(), source_location,
a -D value naming __FILE__) may keep no byte of it in the object: sizeof(__FILE__) or a constexpr hash
of it is folded into code. Such an entry must still be stored for the paths it expanded (the roots of
the files named), so a second checkout, or a second build directory through a header generated into
each, gets its own value: each object here equals a plain compile in its place, by every allocated
section. Where nothing is expanded, or the expansion names no checkout path (__FILE_NAME__, the user's
-fmacro-prefix-map), entries are still shared.

Each test_*_gets_its_own_value case fails on the kache before this change (the second compile hit the
first one's entry, with the first path's length or hash)."""
import json
import os
import shutil
import subprocess
import textwrap

import kachetest
from kachetest import KacheTestCase

SIZEOF_FILE = textwrap.dedent("""\
    int file_length(void) { return (int)sizeof(__FILE__); }
    """)
# A header generated into each build directory: its own name's length, folded into code.
GENERATED = "static const int where_len = (int)sizeof(__FILE__);\n"
USES_GENERATED = textwrap.dedent("""\
    #include "where.h"
    int where(void) { return where_len; }
    """)
CONSTEXPR_HASH = textwrap.dedent("""\
    constexpr unsigned fnv(const char* s, unsigned h = 2166136261u) {
      return *s ? fnv(s + 1, (h ^ static_cast<unsigned char>(*s)) * 16777619u) : h;
    }
    unsigned file_hash() { constexpr unsigned h = fnv(__FILE__); return h; }
    """)
SOURCE_LOCATION = textwrap.dedent("""\
    #include <source_location>
    #include <string_view>
    unsigned name_length() {
      constexpr auto n = std::string_view(std::source_location::current().file_name()).size();
      return n;
    }
    """)
NVCC_HOST = textwrap.dedent("""\
    __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
    int host_length() { return (int)sizeof(__FILE__); }
    """)
# A macro of the project's header expands __FILE__ where it is used: in the source, not in the header
# generated into the build directory that the source also includes.
LENGTH_H = "#define FILE_LENGTH ((int)sizeof(__FILE__))\n#define LENGTH_OF_HERE FILE_LENGTH\n"
USES_MACRO = textwrap.dedent("""\
    #include "length.h"
    #include "cfg.h"
    int here_length(void) { return LENGTH_OF_HERE + CFG; }
    """)
FROM_DEFINE = "int define_length(void) { return (int)sizeof(WHERE); }\n"
NO_PATH = "int triple(int x) { return 3 * x + 1; }\n"
FILE_NAME = "int base_length(void) { return (int)sizeof(__FILE_NAME__); }\n"


def have(tool):
    return shutil.which(tool) is not None


class ExpandedPaths(KacheTestCase):
    def compile(self, compiler, build, source, extra=(), env=None):
        """Compiles source (absolute) in build through kache, then plainly; asserts the two objects equal
        by every allocated section and returns kache's object's sections."""
        os.makedirs(build, exist_ok=True)
        args = ["-c", source, "-o", "a.o", "-O2"] + list(extra)
        self.kache([compiler] + args, cwd=build, env=env)
        kept = os.path.join(build, "kache.o")
        shutil.copy(os.path.join(build, "a.o"), kept)
        tool = kachetest.NVCC if compiler == "nvcc" else compiler
        subprocess.run([tool] + args, cwd=build, check=True, capture_output=True)
        self.assert_same_object(kept, os.path.join(build, "a.o"))
        return self.sections(kept)

    def two_checkouts(self, compiler, name, text, extra=(), env_of=None):
        """The same source in checkouts at paths of different lengths; returns the two objects' sections."""
        out = []
        for co in ("one", "twooo"):
            source = self.write(f"{co}/src/{name}", text)
            env = env_of(self.path(co)) if env_of else None
            out.append(self.compile(compiler, self.path(co, "build"), source, extra, env))
        return out

    def assert_per_checkout(self, first, second):
        self.assert_counts(hits=0, misses=2)
        self.assertNotEqual(first, second, "the two checkouts' objects should differ (their paths' lengths do)")
        self.assertEqual(self.stats()["stored_per_checkout"], {"path-expanded": 2})

    # --- each checkout, or build directory, gets its own value --------------------------------------
    def test_sizeof_file_gcc_gets_its_own_value_and_other_build_dirs_share(self):
        first, second = self.two_checkouts("gcc-12", "a.c", SIZEOF_FILE)
        self.assert_per_checkout(first, second)
        # The source's __FILE__ names the source directory only: another build directory hits.
        self.compile("gcc-12", self.path("one", "build-two"), self.path("one", "src", "a.c"))
        self.assert_counts(hits=1, misses=2)

    def test_generated_header_gets_its_own_value_in_each_build_dir(self):
        compiler = "clang-19" if have("clang-19") else "gcc-12"
        source = self.write("co/src/a.c", USES_GENERATED)
        objects = []
        for b in ("b1", "b22"):
            build = self.path("co", b)
            self.write(f"co/{b}/gen/where.h", GENERATED)
            objects.append(self.compile(compiler, build, source, ["-I" + os.path.join(build, "gen")]))
        self.assert_counts(hits=0, misses=2)
        self.assertNotEqual(objects[0], objects[1])
        # The same build directory again: its own entry.
        self.compile(compiler, self.path("co", "b1"), source, ["-I" + self.path("co", "b1", "gen")])
        self.assert_counts(hits=1, misses=2)

    def test_macro_expanding_file_ties_where_it_is_used(self):
        compiler = "gcc-12"
        for co in ("one", "twooo"):
            self.write(f"{co}/src/length.h", LENGTH_H)
            self.write(f"{co}/src/m.c", USES_MACRO)
        objects = []
        for co, b in (("one", "b1"), ("one", "b22"), ("twooo", "b1")):
            build = self.path(co, b)
            self.write(f"{co}/{b}/gen/cfg.h", "#define CFG 1\n")
            objects.append(self.compile(compiler, build, self.path(co, "src", "m.c"), ["-I" + os.path.join(build, "gen")]))
        # The second build directory of one checkout hits (the macro is used in the source only); the
        # second checkout gets its own value.
        self.assert_counts(hits=1, misses=2)
        self.assertNotEqual(objects[0], objects[2])

    def test_constexpr_hash_of_file_gets_its_own_value(self):
        if not have("clang++-19"):
            self.skipTest("clang++-19 is not on PATH")
        self.assert_per_checkout(*self.two_checkouts("clang++-19", "h.cpp", CONSTEXPR_HASH, ["-std=c++17"]))

    def test_source_location_gets_its_own_value(self):
        if not have("g++-12"):
            self.skipTest("g++-12 is not on PATH")
        self.assert_per_checkout(*self.two_checkouts("g++-12", "l.cpp", SOURCE_LOCATION, ["-std=c++20"]))

    def test_nvcc_host_code_gets_its_own_value(self):
        self.assert_per_checkout(*self.two_checkouts("nvcc", "k.cu", NVCC_HOST))

    def test_define_naming_file_gets_its_own_value(self):
        self.assert_per_checkout(*self.two_checkouts("gcc-12", "d.c", FROM_DEFINE, ["-DWHERE=__FILE__"]))

    # --- shared where that is faithful ----------------------------------------------------------------
    def test_no_path_expanded_is_shared_between_checkouts(self):
        self.two_checkouts("gcc-12", "n.c", NO_PATH)
        s = self.assert_counts(hits=1, misses=1)
        self.assertEqual(s["stored_per_checkout"], {})

    def test_file_name_is_shared_between_checkouts(self):
        # __FILE_NAME__ is the base name, which the key holds.
        if not have("clang-19"):
            self.skipTest("clang-19 is not on PATH")
        self.two_checkouts("clang-19", "f.c", FILE_NAME)
        self.assert_counts(hits=1, misses=1)

    def test_macro_prefix_map_of_the_checkout_is_shared(self):
        # docs/sharing.md's recipe: __FILE__ names "./src/m.c" in every checkout.
        self.two_checkouts("gcc-12", "m.c", SIZEOF_FILE, env_of=lambda root: {"KACHE_PATHS_BASE_DIRS": root},
                           extra=[])
        self.assert_counts(hits=0, misses=2)  # without the map: each checkout its own
        self.zero()
        shutil.rmtree(self.cache)
        for co in ("one", "twooo"):
            root = self.path(co)
            self.compile("gcc-12", os.path.join(root, "build"), os.path.join(root, "src", "m.c"),
                         [f"-fmacro-prefix-map={root}=."], {"KACHE_PATHS_BASE_DIRS": root})
        self.assert_counts(hits=1, misses=1)

    # --- explain and report name the cause -------------------------------------------------------------
    def test_explain_and_report_name_the_expansion(self):
        self.two_checkouts("gcc-12", "a.c", SIZEOF_FILE)
        explained = self.kache(["explain", "--last"]).stdout
        self.assertIn("expands a path (__FILE__ in " + self.path("twooo", "src", "a.c"), explained)
        report = json.loads(self.kache(["report", "--json"]).stdout)
        self.assertIn("expanded-path", [c["cause"] for c in report["causes"]], report["causes"])


# The direct-mode scan's gaps (core/watch.cpp, core/expansion_scan.cpp): a __has_include it could not see
# would let a direct lookup hit after the tested header appeared. Each such compile is now read right or
# opaque (no direct-mode record), so the second compile runs and sees opt.h.
PASTED_HAS_INCLUDE = textwrap.dedent("""\
    #define CAT(a, b) a##b
    #if CAT(__has_, include)("opt.h")
    int value(void) { return 1; }
    #else
    int value(void) { return 2; }
    #endif
    """)
SPLICED_HAS_INCLUDE = PASTED_HAS_INCLUDE.replace("CAT(__has_, include)", "__has_inc\\\nlude")


class ScanGaps(KacheTestCase):
    def appearing_header(self, text):
        source = self.write("co/src/a.c", text)
        build, inc = self.path("co", "build"), self.path("co", "inc")
        os.makedirs(inc, exist_ok=True)
        os.makedirs(build, exist_ok=True)
        self.kache(["gcc-12", "-c", source, "-I" + inc, "-o", "a.o", "-O2"], cwd=build)
        self.write("co/inc/opt.h", "/* now here */\n")
        self.kache(["gcc-12", "-c", source, "-I" + inc, "-o", "a.o", "-O2"], cwd=build)
        kept = shutil.copy(os.path.join(build, "a.o"), os.path.join(build, "kache.o"))
        subprocess.run(["gcc-12", "-c", source, "-I" + inc, "-o", "a.o", "-O2"], cwd=build, check=True)
        self.assert_same_object(kept, os.path.join(build, "a.o"))
        self.assert_counts(hits=0, misses=2)

    def test_pasted_has_include_is_not_missed(self):
        self.appearing_header(PASTED_HAS_INCLUDE)

    def test_spliced_has_include_is_not_missed(self):
        self.appearing_header(SPLICED_HAS_INCLUDE)


if __name__ == "__main__":
    kachetest.main()
