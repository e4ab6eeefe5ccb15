"""Stale-hit traps: each builds through kache, changes one input, rebuilds, and compares with a plain
nvcc build of the current files. Peers (ccache 4.7, sccache 0.4) serve stale objects in these cases."""
import os
import re
import shutil
import stat
import subprocess
import textwrap
import time

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
        # The edit is a compiled hook the wrapper runs by absolute path: kache follows a wrapper it can
        # read (tests/integration/test_wrapper_scripts.py), and a shell loop over "$a" is not one.
        hook_src = self.write("hook.c", textwrap.dedent(f"""\
            #include <stdio.h>
            #include <string.h>
            #include <unistd.h>
            int main(int argc, char** argv) {{
              for (int i = 1; i < argc; ++i) {{
                size_t n = strlen(argv[i]);
                if (n >= 11 && strcmp(argv[i] + n - 11, "cudafe1.cpp") == 0 && access("{self.path('edit-once')}", F_OK) == 0) {{
                  unlink("{self.path('edit-once')}");
                  FILE* f = fopen("{self.path('h.h')}", "w");
                  fputs("#define HOSTVAL 2\\n", f);
                  fclose(f);
                }}
              }}
              return 0;
            }}
            """))
        subprocess.run(["gcc", hook_src, "-o", self.path("hook")], check=True)
        wrapper = self.write("cc/g++", f'#!/bin/sh\n{self.path("hook")} "$@"\nexec /usr/bin/g++ "$@"\n')
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

# An unused variable in device code: cudafe++ warns (#177-D) unless told otherwise.
DEVICE_WARNING = "__global__ void k(float* x) { int unused; x[threadIdx.x] = 1.0f; }\nint host_value() { return 1; }\n"


def env_table():
    """The rows of src/compiler/env_table.cpp: {name: (effect, reason)}."""
    with open(os.path.join(kachetest.SOURCE_DIR, "src", "compiler", "env_table.cpp")) as f:
        text = f.read()
    # The host and nvcc rows: those an nvcc compile reads (the hip and hipcc rows are the HIP routes').
    rows = re.findall(r'\{"([^"]+)", E::(\w+), "([^"]*)", R::(?:host|nvcc)\}', text)
    return {name: (effect, reason) for name, effect, reason in rows}


class EnvironmentTraps(KacheTestCase):
    """Environment variables nvcc's tools read (issue 12, class 1): each changes the object or the
    output text, so a build with it must not be served the object built without it."""

    def env_change(self, var, value, source=None):
        self.write("k.cu", source or HOST_ONLY.replace("HOSTVAL", "1"))
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"])
        before = self.read("k.o", "rb")
        r = self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env={var: value})
        p = self.nvcc(["-c", "k.cu", "-o", "plain.o"], env={var: value})
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assert_counts(hits=0, misses=2)
        return before, r, p

    def test_ptxas_flags(self):
        before, _, _ = self.env_change("PTXAS_FLAGS", "-O0")
        self.assertNotEqual(before, self.read("k.o", "rb"))

    def test_ocg_flags(self):
        before, _, _ = self.env_change("OCG_FLAGS", "-O0")
        self.assertNotEqual(before, self.read("k.o", "rb"))

    def test_nvvm_flags(self):
        before, _, _ = self.env_change("NVVM_FLAGS", "-O0")
        self.assertNotEqual(before, self.read("k.o", "rb"))

    def test_cudafe_flags(self):
        # Same object, different diagnostics: a hit would replay the warning plain nvcc no longer prints.
        _, r, p = self.env_change("CUDAFE_FLAGS", "--diag_suppress=177", source=DEVICE_WARNING)
        self.assertNotIn("177", p.stderr)
        self.assertEqual(r.stderr, p.stderr)

    def test_includes_changes_the_probe_and_the_headers(self):
        # INCLUDES is pasted into every preprocessing command; the toolchain probe reads it too.
        self.write("a/v.h", "#define HOSTVAL 1\n")
        self.write("b/v.h", "#define HOSTVAL 2\n")
        self.write("k.cu", "#include <v.h>\n" + HOST_ONLY)
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env={"INCLUDES": "-I" + self.path("a")})
        before = self.read("k.o", "rb")
        env = {"INCLUDES": "-I" + self.path("b")}
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env=env)
        self.nvcc(["-c", "k.cu", "-o", "plain.o"], env=env)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assertNotEqual(before, self.read("k.o", "rb"))
        self.assert_counts(hits=0, misses=2)

    def test_dependencies_output_passes_through(self):
        # cc1plus writes an extra dependency file kache would not restore: the compile runs plain nvcc.
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1"))
        self.kache(["nvcc", "-c", "k.cu", "-o", "k.o"], env={"DEPENDENCIES_OUTPUT": "extra.d"})
        self.assertTrue(os.path.exists(self.path("extra.d")))
        s = self.assert_counts(hits=0, misses=0, passthrough=1)
        self.assertEqual(s["passthrough_reasons"].get("env_depfile"), 1, s)


class ToolkitIdentity(KacheTestCase):
    """The programs nvcc runs and its nvcc.profile (issue 12, class 2), in a toolkit whose bin/ links
    to the real tools: replacing ptxas or editing nvcc.profile must make the next compile miss."""

    def setUp(self):
        super().setUp()
        real_bin = kachetest.nvcc_home()
        self.real_root = os.path.dirname(real_bin)
        self.bin = self.path("toolkit", "bin")
        os.makedirs(self.bin)
        for tool in ("nvcc", "ptxas", "cudafe++", "fatbinary", "nvlink"):
            os.symlink(os.path.join(real_bin, tool), os.path.join(self.bin, tool))
        with open(os.path.join(real_bin, "nvcc.profile")) as f:
            profile = f.read()
        # TOP names the real toolkit (headers, cicc, libdevice); _HERE_ (this bin/) stays on nvcc's PATH.
        self.profile = re.sub(r"(?m)^TOP\s*=.*$", "TOP = " + self.real_root, profile)
        self.write("toolkit/bin/nvcc.profile", self.profile)
        self.nvcc_path = os.path.join(self.bin, "nvcc")
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1"))

    def build_change_build(self, change, env=None):
        args = ["-c", "k.cu"]
        self.kache([self.nvcc_path] + args + ["-o", "k.o"])
        self.kache([self.nvcc_path] + args + ["-o", "k.o"])
        self.assert_counts(hits=1, misses=1)
        before = self.read("k.o", "rb")
        change()
        self.kache([self.nvcc_path] + args + ["-o", "k.o"], env=env)
        subprocess.run([self.nvcc_path] + args + ["-o", "plain.o"], cwd=self.ws, env=dict(self.env, **(env or {})),
                       check=True)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))
        self.assertNotEqual(before, self.read("k.o", "rb"))
        self.assert_counts(hits=1, misses=2)

    def test_replaced_ptxas_misses(self):
        def replace():
            ptxas = os.path.join(self.bin, "ptxas")
            os.unlink(ptxas)
            with open(ptxas, "w") as f:
                f.write('#!/bin/sh\nexec "%s" -O0 "$@"\n' % os.path.join(self.real_root, "bin", "ptxas"))
            os.chmod(ptxas, 0o755)
        self.build_change_build(replace)

    def test_variable_an_edited_profile_references_is_keyed(self):
        # nvcc fills $(NAME) from the environment; the table cannot list names a profile invents.
        self.profile = self.profile.replace("PTXAS_FLAGS     +=", "PTXAS_FLAGS += $(PROFILE_TEST_PTXAS)")
        self.write("toolkit/bin/nvcc.profile", self.profile)
        self.build_change_build(lambda: None, env={"PROFILE_TEST_PTXAS": "-O0"})

    def test_edited_nvcc_profile_misses(self):
        self.build_change_build(lambda: self.write("toolkit/bin/nvcc.profile",
                                                   self.profile.replace("PTXAS_FLAGS     +=", "PTXAS_FLAGS += -O0")))

    def test_edited_profile_behind_a_wrapper_script_misses(self):
        # `nvcc` on PATH is often a script that execs the toolkit's nvcc (CI's /usr/local/bin/nvcc):
        # the profile and tools that count are the real nvcc's (its _HERE_), not the wrapper's dir.
        self.nvcc_path = self.write("wrap/nvcc", '#!/bin/sh\nexec "%s" "$@"\n' % os.path.join(self.bin, "nvcc"))
        os.chmod(self.nvcc_path, 0o755)
        self.build_change_build(lambda: self.write("toolkit/bin/nvcc.profile",
                                                   self.profile.replace("PTXAS_FLAGS     +=", "PTXAS_FLAGS += -O0")))


# Logs every getenv()/secure_getenv() of a dynamically linked process to $KACHE_GETENV_LOG.
GETENV_HOOK = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
extern char* program_invocation_short_name;
static char* (*real_getenv)(const char*);
static void note(const char* n) {
  if (!real_getenv) real_getenv = dlsym(RTLD_NEXT, "getenv");
  const char* path = real_getenv("KACHE_GETENV_LOG");
  if (!path) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  char buf[512];
  int len = snprintf(buf, sizeof buf, "%s %s\n", program_invocation_short_name, n);
  if (len > 0) write(fd, buf, len);
  close(fd);
}
char* getenv(const char* n) { note(n); return real_getenv(n); }
char* secure_getenv(const char* n) { note(n); return real_getenv(n); }
"""


def assert_row_effect(test, effect, reason, keys, base_direct, base_memo):
    """Checks that an env-table row does what it says: keys = (direct key, memo key, passthrough reason,
    log) of a compile with the variable set; base_* are those of the same compile without it."""
    direct, memo, passthrough, log = keys
    if effect == "Refused":
        test.assertEqual(passthrough, reason, log)
        return
    if effect in ("Keyed", "KeyedProbe"):
        test.assertIsNotNone(direct, log)
        test.assertNotEqual(direct, base_direct, log)
    if effect in ("Probe", "KeyedProbe"):
        test.assertIsNotNone(memo, log)
        test.assertNotEqual(memo, base_memo, log)


class EnvironmentAudit(KacheTestCase):
    """Every variable nvcc, its tools and the host compiler read is in the table, and every table row
    does what it says: a keyed one changes the key, a probe one the toolchain memo's key, a refused
    one passes through with its reason."""

    def keys_of(self, env):
        r = self.kache(["nvcc", "-c", "e.cu", "-o", "e.o"], env=dict(env, KACHE_LOG="kache=trace"), check=False)
        log = r.stderr
        direct = re.search(r"direct key = (\w+)", log)
        memo = re.search(r"toolchain memo key = (\w+)", log)
        passthrough = re.search(r"passthrough \((\w+)\)", log)
        return (direct.group(1) if direct else None, memo.group(1) if memo else None,
                passthrough.group(1) if passthrough else None, log)

    def test_every_row_is_keyed_probed_or_refused(self):
        table = env_table()
        self.assertGreater(len(table), 40)
        # A source that fails at once: the key is computed (and logged) before nvcc runs.
        self.write("e.cu", "#error audit\n")
        base_direct, base_memo, _, log = self.keys_of({})
        self.assertTrue(base_direct and base_memo, log)
        # Values the tools survive: GCC_EXEC_PREFIX and the *_ROOT variables replace gcc's own prefixes
        # (measured: /kache-audit makes cc1plus fail on missing include dirs), so they get the defaults.
        values = {"PATH": self.env.get("PATH", "") + ":/kache-audit", "NVCC_CCBIN": "gcc", "compiler-bindir": "gcc",
                  "GCC_EXEC_PREFIX": "/usr/lib/gcc/", "GCC_ROOT": "/usr", "G++_ROOT": "/usr", "BINUTILS_ROOT": "/usr"}
        for name, (effect, reason) in table.items():
            if effect in ("Modeled", "Inert"):
                continue  # the row's comment says why; Modeled rows have tests of their own
            with self.subTest(variable=name, effect=effect):
                assert_row_effect(self, effect, reason, self.keys_of({name: values.get(name, "/kache-audit")}),
                                  base_direct, base_memo)

    def test_every_variable_the_tools_read_is_in_the_table(self):
        table = env_table()
        # nvcc.profile's $(VAR) references and the variables a dry run prints.
        real_bin = kachetest.nvcc_home()
        with open(os.path.join(real_bin, "nvcc.profile")) as f:
            names = set(re.findall(r"\$\((\w+)\)", f.read()))
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1"))
        dry = self.nvcc(["--dryrun", "-c", "k.cu", "-o", "k.o"])
        names |= set(re.findall(r"(?m)^#\$ ([A-Za-z_][\w-]*)=", dry.stdout + dry.stderr))
        self.assertIn("PTXAS_FLAGS", names)
        missing = sorted(n for n in names if n not in table)
        self.assertEqual(missing, [], "profile/dry-run variables missing from env_table.cpp")
        # What the tools actually ask for, through a getenv() hook (they are dynamically linked).
        if shutil.which("gcc") is None:
            self.skipTest("gcc is needed to build the getenv hook")
        self.write("hook.c", GETENV_HOOK)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", self.path("hook.so"), self.path("hook.c"), "-ldl"],
                       check=True, capture_output=True)
        self.write("r.cu", "__global__ void k(float* x) { x[0] = __sinf(x[1]); }\n"
                   "const char* d() { return __DATE__ __TIMESTAMP__; }\n")
        env = {"LD_PRELOAD": self.path("hook.so"), "KACHE_GETENV_LOG": self.path("getenv.log")}
        self.nvcc(["-c", "k.cu", "-o", "k.o", "-MD", "-MF", "k.d"], env=env)
        self.nvcc(["-dc", "r.cu", "-o", "r.o", "-gencode", "arch=compute_75,code=sm_75",
                   "-gencode", "arch=compute_90,code=compute_90"], env=env)
        read = {}
        for line in self.read("getenv.log").splitlines():
            prog, name = line.split(" ", 1)
            read.setdefault(name, set()).add(prog)
        self.assertIn("PTXAS_FLAGS", read)
        self.assertIn("CPATH", read)
        missing = sorted(f"{n} (read by {', '.join(sorted(p))})" for n, p in read.items()
                         if n not in table and n != "KACHE_GETENV_LOG")
        self.assertEqual(missing, [], "variables the tools read that env_table.cpp does not list")


class HiddenInputs(KacheTestCase):
    """Inputs a tool reads outside the -MD closure (issue 12, class 3): each is hashed, watched, or the
    compile is not stored; a change to one must never be answered with the old object."""
    build_twice_compare = Traps.build_twice_compare

    def test_incbin_file_edited(self):
        # The assembler reads blob.bin; nvcc -MD does not list it.
        self.write("blob.bin", "first\n")
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1") +
                   'asm(".section .rodata\\n.global blob\\nblob:\\n.incbin \\"blob.bin\\"\\n.previous\\n");\n')
        self.build_twice_compare(["-c", "k.cu"], lambda: self.write("blob.bin", "second\n"))
        self.assertEqual(self.stats()["not_stored_reasons"].get("incbin"), 2)

    HAS_OPT = textwrap.dedent("""
        #if HAVE("opt.h")
        #define OPTVAL 1
        #else
        #define OPTVAL 2
        #endif
        __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
        int host_value() { return OPTVAL; }
        """)

    def test_has_include_target_that_exists_but_is_not_included_is_deleted(self):
        self.write("opt.h", "// present\n")
        self.write("k.cu", self.HAS_OPT.replace('HAVE("opt.h")', '__has_include("opt.h")'))
        self.build_twice_compare(["-c", "k.cu"], lambda: os.unlink(self.path("opt.h")))

    def test_has_include_through_a_wrapper_macro(self):
        # The scan sees __has_include(h) only inside the #define; HAVE("opt.h") names no header to it.
        self.write("k.cu", "#define HAVE(h) __has_include(h)\n" + self.HAS_OPT)
        self.build_twice_compare(["-c", "k.cu"], lambda: self.write("opt.h", "// now present\n"))

    def test_pre_include_appearing_in_the_working_directory(self):
        # -include looks in the cwd before the include path: a new ./pre.cuh shadows inc/pre.cuh.
        self.write("inc/pre.cuh", "#define HOSTVAL 1\n")
        self.write("src/k.cu", HOST_ONLY)
        self.build_twice_compare(["-c", "src/k.cu", "-Iinc", "-include", "pre.cuh"],
                                 lambda: self.write("pre.cuh", "#define HOSTVAL 2\n"))

    def test_pragma_once_duplicate_edited(self):
        # GCC opens b.h, finds it identical to the already included #pragma once a.h, skips it and
        # leaves it out of -MD; once edited it is a different file and gets included.
        t = time.time_ns() - 100 * 10**9
        self.write("a.h", "#pragma once\n", mtime_ns=t)
        self.write("b.h", "#pragma once\n", mtime_ns=t)
        self.write("k.cu", '#include "a.h"\n#include "b.h"\n#ifndef HOSTVAL\n#define HOSTVAL 1\n#endif\n' + HOST_ONLY)
        self.build_twice_compare(["-c", "k.cu"], lambda: self.write("b.h", "#pragma once\n#define HOSTVAL 2\n"))

    def test_timestamp_after_touch(self):
        # __TIMESTAMP__ is the source's mtime: a touch changes the object, not the content.
        now = time.time_ns()
        self.write("k.cu", HOST_ONLY.replace("HOSTVAL", "1") + "const char* stamp() { return __TIMESTAMP__; }\n",
                   mtime_ns=now - 2000 * 10**9)
        def touch():
            os.utime(self.path("k.cu"), ns=(now - 1000 * 10**9,) * 2)
            # utime sets the ctime to now: a compile starting within a clock tick of it would see an
            # input "modified during the compile" (input-changed), which wins over the timestamp reason.
            time.sleep(0.05)
        self.build_twice_compare(["-c", "k.cu"], touch)
        self.assertEqual(self.stats()["not_stored_reasons"].get("timestamp"), 2)

if __name__ == "__main__":
    kachetest.main()
