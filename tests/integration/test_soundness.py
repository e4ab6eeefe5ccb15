"""Stale-hit traps: each builds through kache, changes one input, rebuilds, and compares with a plain
nvcc build of the current files. Peers (ccache 4.7, sccache 0.4) serve stale objects in these cases."""
import os
import stat
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
        self.build_twice_compare(["-c", "k.cu"], lambda: os.utime(self.path("k.cu"), ns=(now - 1000 * 10**9,) * 2))
        self.assertEqual(self.stats()["not_stored_reasons"].get("timestamp"), 2)

if __name__ == "__main__":
    kachetest.main()
