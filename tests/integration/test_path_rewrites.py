"""Issue 35 item 5: each class of kache's path rewriting, against the plain compiler in two clones.

Every test builds the same tree in two clones (A, then B at another path), plainly and through kache,
and compares what a build sees in each clone: exit status, stdout and stderr (the clone's path spelled
<dir>), every allocated section of the object (SHF_ALLOC: code, data, .rodata.str1.* strings), the
DWARF names as readelf prints them (.debug_info and .debug_line, byte for byte), the dependency file's
text, and where there is a program, what it prints. The classes: a $PWD the compiler reads as spelled,
roots matched by whole path components (a sibling `<root>-deps`), make's escapes in depfiles, LTO
objects, placeholders only where the compiler put them, names restored byte-exact, clang's
-grecord-command-line and compressed fatbins."""
import os
import re
import shutil
import subprocess
import textwrap
import unittest

import elfsections
import kachetest
from kachetest import KACHE, KacheTestCase

C_COMPILERS = [c for c in ("gcc-12", "clang-14", "clang-19") if shutil.which(c)]
PLACEHOLDER_LENGTH = 160  # core::kPlaceholderLength
PADDED_NAMES = False  # names in string sections are restored byte-exact: compared as readelf prints them


def alloc_sections(path):
    """Every allocated section of an ELF object (elfsections), or the whole file when it is not ELF."""
    try:
        return elfsections.allocated_sections(path)
    except ValueError:
        with open(path, "rb") as f:
            return {"<not ELF64>": f.read()}


def dwarf_text(path, root):
    """DW_AT_name, DW_AT_comp_dir and DW_AT_producer as readelf prints them, then the files the line tables
    name, each joined to its directory (clang lays a table out by how the names it was given relate, which
    kache's placeholders change: the files it names are compared, not the layout)."""
    info = subprocess.run(["readelf", "--debug-dump=info", path], capture_output=True, text=True).stdout
    keep = []
    for line in info.splitlines():
        attribute = re.search(r"DW_AT_(name|comp_dir|producer)\b", line)
        if attribute:
            value = line.rsplit("): ", 1)[-1] if "): " in line else line.split(": ", 1)[-1].strip()
            keep.append(attribute.group(1) + "=" + value)
    lines = subprocess.run(["readelf", "--debug-dump=line", path], capture_output=True, text=True).stdout
    table, dirs, files = None, {}, set()
    for line in lines.splitlines():
        if "The Directory Table" in line or "The File Name Table" in line:
            table, dirs = ("dirs", {}) if "Directory" in line else ("files", dirs)
            continue
        fields = line.strip().split("\t")
        if not table or len(fields) < 2 or not fields[0].isdigit():
            table = table if fields and fields[0] in ("Entry", "") else None
            continue
        value = line.rsplit("): ", 1)[-1] if "): " in line else fields[-1]
        if table == "dirs":
            dirs[fields[0]] = value
        else:
            files.add(os.path.join(dirs.get(fields[1].split()[0], ""), value))
    keep += ["file=" + f for f in sorted(files)]
    if PADDED_NAMES:
        keep = [re.sub(r"=/+", "=/", k) for k in keep]
    return [k.replace(root, "<dir>") for k in keep]


class PathRewrites(KacheTestCase):
    def setUp(self):
        self.private_workspace("kache-rewrites-")

    def clone(self, root, tree, dirs=()):
        for rel, text in tree.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
            os.utime(p, (1_700_000_000, 1_700_000_000))  # older than any compile: every miss may store
        for d in dirs:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        return root

    def run_tool(self, tool, argv, cwd, env=None):
        e = dict(self.env)
        e.update(env or {})
        cmd = ([KACHE] if tool == "kache" else []) + argv
        return subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True)

    def build(self, tool, root, cwd, argv, outputs, env=None, link=None):
        """Runs argv (a list of commands: one compile or several) in root/cwd with the tool; returns
        what a build sees, root spelled <dir>. outputs: files to compare (objects by allocated sections
        and DWARF names, others by text); link: a plain command run after the compiles (its
        diagnostics, the program's DWARF names and what the program prints are compared too)."""
        seen = {}
        for i, cmd in enumerate(argv):
            r = self.run_tool(tool, cmd, os.path.join(root, cwd), env)
            seen[f"run{i}"] = (r.returncode, r.stdout.replace(root, "<dir>"), r.stderr.replace(root, "<dir>"))
        for rel in outputs:
            p = os.path.join(root, cwd, rel)
            if rel.endswith(".o") and os.path.exists(p):
                seen[rel] = (alloc_sections(p), dwarf_text(p, root))
            elif os.path.exists(p):
                with open(p) as f:
                    seen[rel] = f.read().replace(root, "<dir>")
            else:
                seen[rel] = None
        if link:
            r = self.run_tool("plain", link, os.path.join(root, cwd))
            seen["link"] = (r.returncode, r.stderr.replace(root, "<dir>"))
            prog = os.path.join(root, cwd, "prog")
            if r.returncode == 0:
                run = subprocess.run([prog], cwd=os.path.join(root, cwd), capture_output=True, text=True)
                seen["program"] = (run.returncode, run.stdout.replace(root, "<dir>"),
                                   run.stderr.replace(root, "<dir>"))
                seen["program DWARF"] = dwarf_text(prog, root)
        return seen

    def assert_like_plain(self, roots, cwd, argv_of, outputs, env_of=None, link_of=None, label=""):
        """For each clone root: plain, then kache twice (a miss or a hit of the earlier clone's entry,
        then a hit) must see the same."""
        for root in roots:
            argv = argv_of(root)
            env = env_of(root) if env_of else None
            link = link_of(root) if link_of else None
            plain = self.build("plain", root, cwd, argv, outputs, env, link)
            for attempt in ("first", "again"):
                got = self.build("kache", root, cwd, argv, outputs, env, link)
                for k in sorted(set(plain) | set(got)):
                    self.assertEqual(plain.get(k), got.get(k), f"{label} {root} kache ({attempt}) {k}")

    def test_a_pwd_is_read_as_the_compiler_reads_it(self):
        # GCC and clang write $PWD verbatim as DW_AT_comp_dir when it names the working directory,
        # "tools/../build" included; kache ignored a spelling that was not lexically normal, so B's hit
        # named A's build directory.
        for cc in C_COMPILERS:
            roots = [self.clone(self.path(cc, n), {"src/x.c": "int f(void) { return 1; }\n"}, ["tools", "build"])
                     for n in ("A", "clone-B")]
            self.assert_like_plain(roots, "build", lambda r: [[cc, "-g", "-c", r + "/src/x.c", "-o", "x.o"]],
                                   ["x.o"], env_of=lambda r: {"PWD": r + "/tools/../build"}, label=cc)

    def test_lto_objects_name_their_clone_and_no_placeholder(self):
        # GCC's .gnu.lto_* sections are compressed and clang's bitcode bit-packed: kache's placeholders
        # went in there unpatched (the link's -Wlto-type-mismatch and the program's line table named
        # /kache.root.src_...), and __FILE__ in them escaped the scan, so clone B's program printed A's path.
        tree = {
            "src/main.c": textwrap.dedent("""\
                #include <assert.h>
                #include <stdio.h>
                extern int shared;
                int main(int argc, char** argv) {
                  (void)argv;
                  printf("%s %d\\n", __FILE__, shared);
                  fflush(stdout);
                  assert(argc == 2);
                  return 0;
                }
                """),
            "src/other.c": "long shared = 7;\n",  # a type mismatch the link reports (-Wlto-type-mismatch)
        }
        # clang-19's bitcode needs an lld of its own version, which Debian 12 does not ship: its objects are
        # compared byte for byte, unlinked.
        linkers = {"gcc-12": ["gcc-12", "-flto"], "clang-14": ["clang-14", "-flto", "-fuse-ld=lld"]}
        for cc in C_COMPILERS:
            for flags in (["-flto", "-g", "-O1"], ["-flto=auto", "-O2"]):
                if cc != "gcc-12" and flags[0] != "-flto":
                    continue
                roots = [self.clone(self.path(cc + flags[0], n), tree, ["build"]) for n in ("A", "clone-B")]
                compiles = lambda r: [[cc] + flags + ["-c", f"{r}/src/{f}.c", "-o", f"{f}.o"] for f in ("main", "other")]
                link = (lambda r: linkers[cc] + flags[1:] + ["main.o", "other.o", "-o", "prog"]) if cc in linkers else None
                self.assert_like_plain(roots, "build", compiles, ["main.o", "other.o"], link_of=link,
                                       label=f"{cc} {flags}")
        s = self.stats()
        self.assertEqual(s["passthrough"], 0, s["passthrough_reasons"])
        self.assertGreater(s["hits"], 0)

    def test_clang_recording_its_command_line_is_served_as_plain(self):
        # clang records its driver's command line (-grecord-command-line: DW_AT_producer;
        # -frecord-command-line: .GCC.command.line), kache's prefix maps and scratch -o included: the
        # object was never stored (a silent miss every time) and named kache's flags.
        clangs = [c for c in C_COMPILERS if c.startswith("clang")]
        for cc in clangs:
            for flags in (["-g", "-grecord-command-line"], ["-frecord-command-line"]):
                roots = [self.clone(self.path(cc + flags[-1], n), {"src/x.c": "int f(void) { return 1; }\n"}, ["build"])
                         for n in ("A", "clone-B")]
                self.assert_like_plain(roots, "build", lambda r: [[cc] + flags + ["-c", r + "/src/x.c", "-o", "x.o"]],
                                       ["x.o"], label=f"{cc} {flags}")
                for root in roots:
                    sec = subprocess.run(["readelf", "-p", ".GCC.command.line", os.path.join(root, "build", "x.o")],
                                         capture_output=True, text=True).stdout
                    self.assertNotIn("prefix-map", sec)
        if clangs:
            s = self.stats()
            self.assertEqual(s["misses"], 0, s)
            # -frecord-command-line is no flag kache's table knows (passthrough.unknown-flag) before this.
            self.assertEqual(s["passthrough_reasons"].get("records-command-line"), 2 * 2 * len(clangs), s)

    def test_depfiles_escape_paths_as_the_compiler_does(self):
        # GCC and clang write '#' as "\\#" and '$' as "$$" (and ' ' as "\\ "); kache's templating knew the
        # escaped space only, so clone B's depfile named A's generated header.
        tree = {"src/x.c": '#include "gen.h"\nint f(void) { return GEN; }\n', "build/gen.h": "#define GEN 1\n"}
        for cc in C_COMPILERS:
            roots = [self.clone(self.path(cc, n, "proj"), tree, ["build/out"]) for n in ("fix#12 $HOME", "b#2 $$ x")]
            for dep in (["-MD", "-MF", "out/x.d"], ["-MMD", "-MP"]):
                compiles = lambda r: [[cc, "-c", r + "/src/x.c", "-I" + r + "/build", "-o", "out/x.o"] + dep]
                self.assert_like_plain(roots, "build", compiles, ["out/x.d"], label=f"{cc} {dep}")
        s = self.stats()
        self.assertGreater(s["hits"], 0)
        self.assertEqual(s["passthrough"], 0, s["passthrough_reasons"])

    def test_a_sibling_of_a_root_keeps_its_own_path(self):
        # kache's -fdebug-prefix-map=<p>=<placeholder> also rewrote <p>-deps (GCC and clang match a
        # string prefix), and diagnostics were templated by substring: clone B's hit named <B>-deps/...
        deps = self.clone(self.path("p", "proj-deps"), {"include/dep.h": textwrap.dedent("""\
            #warning the dependency warns
            static inline int dep(int x) { return x * 2; }
            """)})
        tree = {"x.c": '#include "dep.h"\nint f(int x) { return dep(x); }\n'}
        for cc in C_COMPILERS:
            roots = [self.clone(self.path("p", "proj"), tree), self.clone(self.path("q", "proj2"), tree)]
            compiles = lambda r: [[cc, "-g", "-c", r + "/x.c", "-I", deps + "/include", "-MD", "-o", "x.o"]]
            self.assert_like_plain(roots, "", compiles, ["x.o", "x.d"], label=cc)
            shutil.rmtree(self.path("q"))
        self.assertGreater(self.stats()["hits"], 0)

    @unittest.skipUnless(kachetest.NVCC, "needs nvcc")
    def test_compressed_device_code_is_scanned_for_roots(self):
        # nvcc --compress-mode=size compresses the fatbin's entries (zstd, measured on CUDA 13.0): the
        # -lineinfo name of a header in the build directory was invisible to the object scan, so a second
        # build directory of the checkout got the first's path in its device line table.
        project = self.clone(self.path("proj"), {
            "src/k.cu": '#include "gen.cuh"\n__global__ void k(int* p) { p[threadIdx.x] = g(p[0]); }\n',
            "b1/gen.cuh": "#pragma once\n__device__ int g(int x) { return x * 3; }\n",
            "b2/gen.cuh": "#pragma once\n__device__ int g(int x) { return x * 3; }\n"})
        for mode in ("size", "none"):
            compiles = lambda r: [[kachetest.NVCC, "-c", project + "/src/k.cu", "-I", r, "-lineinfo",
                                   f"--compress-mode={mode}", "-o", "k.o"]]
            self.assert_like_plain([project + "/b1", project + "/b2"], "", compiles, ["k.o"], label=mode)
        # Read back, not given up on: each build directory's entry is its own because its object names it.
        per_checkout = self.stats().get("stored_per_checkout", {})
        self.assertNotIn("compressed-fatbin", per_checkout)
        self.assertEqual(per_checkout.get("path-in-object"), 4, per_checkout)

    def test_a_placeholder_spelled_in_a_source_is_the_programs_own(self):
        # The placeholder search covered the whole object: a string literal spelled like a placeholder was
        # "restored" in .rodata, and the program printed a path it never held.
        ph = "/kache.root.src".ljust(PLACEHOLDER_LENGTH, "_")
        tree = {"src/main.c": f'#include <stdio.h>\nint main(void) {{ puts("{ph}/x.c"); return 0; }}\n'}
        for cc in C_COMPILERS:
            roots = [self.clone(self.path(cc, n), tree, ["build"]) for n in ("A", "clone-B")]
            compiles = lambda r: [[cc, "-g", "-O1", "-c", r + "/src/main.c", "-o", "main.o"]]
            self.assert_like_plain(roots, "build", compiles, ["main.o"], link_of=lambda r: [cc, "main.o", "-o", "prog"],
                                   label=cc)

    @unittest.skipUnless(shutil.which("gdb") and shutil.which("addr2line"), "needs gdb and addr2line")
    def test_names_read_as_plain_in_gdb_and_addr2line(self):
        # Restored roots were padded with '/' to the placeholder's length: gdb's `info source` and
        # addr2line printed "//////.../src/x.c", and `set substitute-path <root> <elsewhere>` matched nothing.
        tree = {"src/main.c": "#include <stdio.h>\n#include \"h.h\"\nint main(void) { return twice(0); }\n",
                "src/h.h": "static inline int twice(int x) { return 2 * x; }\n"}
        for cc in C_COMPILERS:
            roots = [self.clone(self.path(cc, n), tree, ["build", "moved"]) for n in ("A", "clone-B")]
            for root in roots:
                seen = {}
                for tool in ("plain", "kache"):
                    r = self.run_tool(tool, [cc, "-g", "-O0", "-c", root + "/src/main.c", "-o", "main.o"],
                                      os.path.join(root, "build"))
                    self.assertEqual(r.returncode, 0, r.stderr)
                    prog = os.path.join(root, "build", "prog")
                    subprocess.run([cc, "main.o", "-o", prog], cwd=os.path.join(root, "build"), check=True)
                    seen[tool] = self.debugger_view(prog, root)
                self.assertEqual(seen["plain"], seen["kache"], f"{cc} {root}")
        self.assertGreater(self.stats()["hits"], 0)

    def debugger_view(self, prog, root):
        """What gdb (info source, before and after set substitute-path) and addr2line say of main."""
        gdb = subprocess.run(["gdb", "-nx", "-batch", "-ex", "list main", "-ex", "info source",
                              "-ex", f"set substitute-path {root}/src {root}/moved", "-ex", "info line twice",
                              "-ex", "list twice", prog], capture_output=True, text=True)
        nm = subprocess.run(["nm", prog], capture_output=True, text=True).stdout
        main = next(line.split()[0] for line in nm.splitlines() if line.endswith(" main"))
        a2l = subprocess.run(["addr2line", "-e", prog, main], capture_output=True, text=True)
        keep = [ln for ln in gdb.stdout.splitlines() if "/" in ln or "No such file" in ln]
        return [ln.replace(root, "<dir>") for ln in keep + gdb.stderr.splitlines() + [a2l.stdout]]


if __name__ == "__main__":
    kachetest.main()
