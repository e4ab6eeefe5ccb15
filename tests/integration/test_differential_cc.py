"""Differential test for gcc/clang: random C/C++ command lines, through kache and plainly, build the same.

The counterpart of test_differential.py (nvcc) for gcc-12, g++-12, clang-14, clang++-14, clang-19 and
clang++-19. Each case draws a compiler and a command line from a vocabulary of what builds pass: source
paths absolute (as CMake writes them) or relative, in-source or out-of-source builds (cwd build/),
outputs in other directories, -g/-g3/-gdwarf-4, -O0/-O2, -MD/-MMD with -MF/-MT/-MP, -I absolute and
relative, the user's own -ffile-prefix-map/-fdebug-prefix-map/-fmacro-prefix-map, -D forms, -flto,
-grecord-command-line, an include directory beside twin A's root whose name extends it ("<A>-deps"),
and sources printing __FILE__ and failing assert(), printing __DATE__/__TIME__, warning and failing to
compile. The twins' paths hold the characters make escapes ('#', '$', ' ').
It runs the case in two twin directories A and B (same tree, different absolute paths):
  plain in A | kache in A (a miss, or a hit of an earlier case) | kache in A again (a hit) |
  kache in B (a hit of A's entry, or a miss where the object names its checkout) | plain in B.
Every kache run must match the plain run of its directory: exit status, stdout and stderr (the
directory's path replaced by <dir>), the files created, depfiles byte for byte, objects by every section
but the debug ones, the DWARF DW_AT_name/DW_AT_comp_dir values (slashes collapsed and normalised: kache
pads a restored root with leading '/'), and, where the object has a main(), the output and exit status
of the program linked from it by the plain g++-12. SOURCE_DATE_EPOCH=0 is exported for every run, plain
and kache, so __DATE__/__TIME__ compare.

CI runs a few cases with a fixed seed; by hand: KACHE_DIFF_COUNT=100 KACHE_DIFF_SEED=7 python3 ...
(case i uses seed SEED+i: a failing case is reproduced alone with KACHE_DIFF_SEED=<its seed>
KACHE_DIFF_COUNT=1)."""
import os
import random
import re
import shlex
import shutil
import struct
import subprocess
import unittest

import kachetest
# snapshot(), normalize() and differences() are test_differential's; imported as a module, so that its
# test class is not collected a second time here.
import test_differential
from kachetest import KACHE, KacheTestCase

COUNT = int(os.environ.get("KACHE_DIFF_COUNT", "16"))
SEED = int(os.environ.get("KACHE_DIFF_SEED", "2700"))  # 16 cases, about 10 s
COMPILERS = [c for c in ("gcc-12", "g++-12", "clang-14", "clang++-14", "clang-19", "clang++-19") if shutil.which(c)]
LINKER = "g++-12"

TREE = {
    "src/main.c": "#include <stdio.h>\n#ifndef VAL\n#define VAL 1\n#endif\n"
                  "int main(void) { printf(\"main %d\\n\", VAL); return VAL == 3; }\n",
    # __FILE__ and assert() name the source as the compiler was given it (or as -f*-prefix-map maps it).
    "src/where.c": "#include <assert.h>\n#include <stdio.h>\n#ifndef VAL\n#define VAL 1\n#endif\n"
                   "int main(int argc, char** argv) {\n  (void)argv;\n"
                   "  printf(\"file %s size %d\\n\", __FILE__, (int)sizeof(__FILE__));\n  fflush(stdout);\n"
                   "  assert(argc == 1 && VAL != 2);\n  return 0;\n}\n",
    "src/where.cpp": "#include <cassert>\n#include <cstdio>\ntemplate <class T> T twice(T t) { return t + t; }\n"
                     "int main() {\n  std::printf(\"file %s %d\\n\", __FILE__, twice(21));\n  std::fflush(stdout);\n"
                     "  assert(twice(1) == 3);\n  return 0;\n}\n",
    "src/date.c": "#include <stdio.h>\nint main(void) { printf(\"built %s %s\\n\", __DATE__, __TIME__); return 0; }\n",
    "src/warn.c": "#include <stdio.h>\n#warning this source warns\n"
                  "int main(void) { int unused = 1; printf(\"warn\\n\"); return 0; }\n",
    "src/err.c": "int main(void) { return 0 }\n",
    "src/inc.c": "#include <stdio.h>\n#include \"h.h\"\nint main(void) { printf(\"inc %d %s\\n\", H_VALUE, H_FILE); return 0; }\n",
    "inc/h.h": "#pragma once\n#define H_VALUE 4\n#define H_FILE __FILE__\n",
}
DIRS = ["build", "out", "deps", "build/out", "build/deps"]  # existing; "nodir" never exists

SOURCES = ["main.c", "where.c", "where.c", "where.cpp", "date.c", "warn.c", "err.c", "inc.c", "inc.c"]
CWDS = ["build", "build", "."]  # out of source as CMake builds, or in the source tree
OUTPUTS = [None, "{s}.o", "out/{s}.o", "out/{s}.o", "@ROOT@/build/{s}.o", "nodir/{s}.o"]
DEBUG = [[], [], ["-g"], ["-g"], ["-g3"], ["-gdwarf-4"], ["-g", "-gdwarf-4"]]
OPT = [[], ["-O0"], ["-O2"]]
DEPFILES = [[], [], ["-MD"], ["-MMD"], ["-MD", "-MF", "{o}.d"], ["-MD", "-MF", "deps/{s}.d"],
            ["-MMD", "-MF", "deps/{s}.d"], ["-MD", "-MF", "@ROOT@/deps/{s}.d"], ["-MMD", "-MF", "{s}.mmd"]]
TARGETS = [[], [], ["-MT", "custom_target"], ["-MT", "@ROOT@/build/{s}.o"], ["-MT", "one", "-MT", "two"],
           ["-MQ", "$weird"]]  # only with a depfile
# @SIB@: a directory beside twin A's root whose name starts with it ("<A>-deps"), used by both twins: a
# string-prefix match of A's root there named "<B>-deps" in B (issue 35).
INCLUDES = [[], ["-I{rel}inc"], ["-I", "{rel}inc"], ["-I@ROOT@/inc"], ["-iquote", "@ROOT@/inc"], ["-I@SIB@/inc"]]
PREFIX_MAPS = [[], [], [], ["-ffile-prefix-map=@ROOT@=."], ["-fdebug-prefix-map=@ROOT@=/proj"],
               ["-fmacro-prefix-map=@ROOT@=."], ["-fdebug-prefix-map=@ROOT@=.", "-fmacro-prefix-map=@ROOT@/src=s"]]
OPTIONAL = [  # each present or not
    ["-DVAL=2"], ["-DVAL=3"], ["-DVAL"], ["-D", "VAL=2"], ["-UVAL"], ["-DNDEBUG"], ["-Wall"], ["-w"], ["-MP"],
    ["-fPIC"], ["-flto"], ["-grecord-command-line"],
]


def command(rng):
    """(compiler, cwd relative to the twin's root, argument list); @ROOT@ stands for the twin's root."""
    cc = rng.choice(COMPILERS)
    file = rng.choice(SOURCES)
    s = file.split(".")[0]
    cwd = rng.choice(CWDS)
    rel = "../" if cwd == "build" else ""
    src = f"@ROOT@/src/{file}" if rng.random() < 0.5 else f"{rel}src/{file}"
    args = ["-c", src]
    out = rng.choice(OUTPUTS)
    obj = out.format(s=s) if out else f"{s}.o"
    if out:
        args += ["-o", obj]
    args += rng.choice(DEBUG) + rng.choice(OPT)
    dep = [a.format(s=s, o=obj) for a in rng.choice(DEPFILES)]
    args += dep
    if dep:
        args += [a.format(s=s) for a in rng.choice(TARGETS)]
    args += [a.format(rel=rel) for a in rng.choice(INCLUDES)]
    args += rng.choice(PREFIX_MAPS)
    for opt in OPTIONAL:
        if rng.random() < 0.15:
            args += opt
    return cc, cwd, args


def clock_dependent(cc, file):
    """clang before 16 ignores SOURCE_DATE_EPOCH: __DATE__/__TIME__ are the wall clock's, two plain
    compiles differ, and kache (rightly) does not serve such an object from its cache."""
    m = re.match(r"clang(?:\+\+)?-(\d+)$", cc)
    return file == "date.c" and m is not None and int(m.group(1)) < 16


def elf_sections(path):
    """Every section of an ELF64 object but the debug ones (and their relocations), by name: bytes."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return {"<not ELF64>": data}
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]
    out = {}
    for i, h in enumerate(heads[1:], 1):
        name = data[strtab + h[0]:data.index(b"\0", strtab + h[0])].decode()
        if re.match(r"\.(rela?\.)?z?debug", name):
            continue
        if re.match(r"\.gnu\.(debug)?lto_.*\.[0-9a-f]+$", name):  # named after GCC's random seed, as plain's are
            continue
        out[f"{name}#{i}"] = b"" if h[1] == 8 else data[h[4]:h[4] + h[5]]  # SHT_NOBITS has no bytes
        if name == ".shstrtab":  # those names, the seed's part masked
            out[f"{name}#{i}"] = re.sub(rb"(\.gnu\.(?:debug)?lto_[^\0]*\.)[0-9a-f]+\0", rb"\1<seed>\0", out[f"{name}#{i}"])
    return out


def dwarf_names(path, root):
    """DW_AT_name and DW_AT_comp_dir values in order; a path's leading slashes collapsed to one, then
    os.path.normpath (kache pads a restored root with '/'), the root spelled <dir>."""
    r = subprocess.run(["readelf", "--debug-dump=info", path], capture_output=True, text=True)
    names = []
    for line in r.stdout.splitlines():
        m = re.search(r"DW_AT_(name|comp_dir)\s*:\s*(?:\([^)]*\):\s*)?(.*)$", line)
        if m:
            v = m.group(2).strip()
            if "/" in v:
                v = os.path.normpath(re.sub(r"^/+", "/", v))
            names.append(f"{m.group(1)}={v.replace(root, '<dir>')}")
    return names


@unittest.skipUnless(COMPILERS and shutil.which(LINKER) and shutil.which("readelf"), "needs gcc-12/clang, readelf")
class DifferentialCC(KacheTestCase):
    PLAIN = "plain"

    def setUp(self):
        super().setUp()
        self.env["SOURCE_DATE_EPOCH"] = "0"  # plain and kache alike: __DATE__/__TIME__ compare
        self.prog_dir = self.path("progs")
        os.makedirs(self.prog_dir)
        # Roots holding the characters make escapes ('#', '$', ' '), twin A's with a sibling beside it.
        self.twins = test_differential.make_twins(self, TREE, DIRS, prefix="tw#1 $x ")
        self.sibling = self.twins["A"][0] + "-deps"
        os.makedirs(os.path.join(self.sibling, "inc"))
        with open(os.path.join(self.sibling, "inc", "h.h"), "w") as f:
            f.write(TREE["inc/h.h"])
        os.utime(os.path.join(self.sibling, "inc", "h.h"), (1_700_000_000, 1_700_000_000))

    def run_in(self, twin, tool, cc, cwd, args, clock=False):
        """Runs the case in a twin; returns what a build sees, normalized, and removes what it created."""
        root, initial = self.twins[twin]
        args = [a.replace("@ROOT@", root).replace("@SIB@", self.sibling) for a in args]
        cmd = ([KACHE, cc] if tool == "kache" else [cc]) + args
        r = subprocess.run(cmd, cwd=os.path.join(root, cwd), env=self.env, capture_output=True, text=True)
        norm = test_differential.Differential.normalize
        created = sorted(test_differential.snapshot(root) - initial)
        files = {}
        for rel in created:
            p = os.path.join(root, rel)
            if os.path.isdir(p):
                files[rel] = ("dir",)
            elif rel.endswith(".o"):
                sections = elf_sections(p)
                sections["DWARF names"] = dwarf_names(p, root)
                if r.returncode == 0:
                    sections["program"] = self.program(p, root)
                if clock:  # the time the compile ran at: its strings, and what the program prints
                    sections = {k: v for k, v in sections.items() if not k.startswith(".rodata")}
                    prog = sections.get("program")
                    if prog and len(prog) == 3:
                        sections["program"] = (prog[0], re.sub(r"built .*", "built <clock>", prog[1]), prog[2])
                files[rel] = ("object", sections)
            else:
                with open(p, "rb") as f:  # depfiles byte for byte, this twin's root and all
                    files[rel] = ("bytes", f.read())
        for rel in sorted(created, key=len, reverse=True):  # contents before their directories
            p = os.path.join(root, rel)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                os.unlink(p)
        return {"exit": r.returncode, "stdout": norm(r.stdout, root), "stderr": norm(r.stderr, root), "files": files}

    def program(self, obj, root):
        """The object linked by the plain g++-12 and run from the twin's build directory: exit, stdout, stderr."""
        prog = os.path.join(self.prog_dir, "prog")
        if os.path.exists(prog):
            os.unlink(prog)
        link = subprocess.run([LINKER, obj, "-o", prog], capture_output=True, text=True)
        if link.returncode != 0:
            return ("link failed", link.returncode, link.stderr.replace(root, "<dir>"))
        r = subprocess.run([prog], cwd=os.path.join(root, "build"), capture_output=True, text=True, env=self.env)
        return (r.returncode, r.stdout.replace(root, "<dir>"), r.stderr.replace(root, "<dir>"))

    def differences(self, plain, got):
        out = test_differential.Differential.differences(self, plain, got)
        for rel in sorted(set(plain["files"]) & set(got["files"])):  # which sections, and how
            a, b = plain["files"][rel], got["files"][rel]
            if a[0] == "object" and b[0] == "object":
                for sec in sorted(set(a[1]) | set(b[1])):
                    if a[1].get(sec) != b[1].get(sec) and sec in ("DWARF names", "program"):
                        out.append(f"{rel} {sec}: plain {a[1].get(sec)!r:.600} / kache {b[1].get(sec)!r:.600}")
                    elif sec not in a[1] or sec not in b[1]:
                        out.append(f"{rel}: section {sec} only in {'plain' if sec in a[1] else 'kache'}")
        return out

    def test_random_cc_command_lines_build_like_the_compiler(self):
        failures = []
        for i in range(COUNT):
            seed = SEED + i
            cc, cwd, args = command(random.Random(f"kache-diff-cc-{seed}"))  # a string seed is hashed
            label = f"case {i} (KACHE_DIFF_SEED={seed} KACHE_DIFF_COUNT=1): cd {cwd}; {cc} {shlex.join(args)}"
            print(label, flush=True)
            clock = clock_dependent(cc, os.path.basename(args[1]))
            plain_a = self.run_in("A", "plain", cc, cwd, args, clock)
            runs = [("kache in A", plain_a, self.run_in("A", "kache", cc, cwd, args, clock)),
                    ("kache in A again", plain_a, self.run_in("A", "kache", cc, cwd, args, clock)),
                    ("kache in B", None, self.run_in("B", "kache", cc, cwd, args, clock))]
            runs[2] = ("kache in B", self.run_in("B", "plain", cc, cwd, args, clock), runs[2][2])
            for what, plain, got in runs:
                for d in self.differences(plain, got):
                    failures.append(f"{label}\n  {what}: {d}")
        s = self.stats()
        print(f"{COUNT} cases: hits {s['hits']} misses {s['misses']} passthrough {s['passthrough']} "
              f"compile_failed {s.get('compile_failed')} errors {s['errors']} {s['passthrough_reasons']} "
              f"{s['error_reasons']}", flush=True)
        self.assertEqual(failures, [], "\n".join(failures))
        self.assertEqual(s["errors"], 0, s["error_reasons"])

    def test_dependency_modifiers_without_a_depfile_fail_as_plain(self):
        # gcc 12 fails on -MP/-MT/-MQ without -MD/-MMD (first seen: KACHE_DIFF_SEED=70); kache exited 0.
        for cc, modifier in [(c, m) for c in COMPILERS for m in (["-MP"], ["-MT", "t"], ["-MQ", "t"])]:
            with self.subTest(compiler=cc, modifier=modifier):
                args = ["-c", "@ROOT@/src/main.c", "-o", "main.o"] + modifier
                self.assertEqual(self.differences(self.run_in("A", "plain", cc, "build", args),
                                                  self.run_in("A", "kache", cc, "build", args)), [])


if __name__ == "__main__":
    kachetest.main()
