"""Input audit of C and C++ compiles (gcc 12, clang 14, clang 19 when installed): every file a kache miss
reads and every program it runs must be something kache keys, and every environment variable the
compilers read must be in src/compiler/env_table.cpp.

Files: each case runs one miss under strace (-f; openat, open, execve, and the stat family, so that a
header clang's __has_include only stats is seen too) and checks that every regular file the compile
opened or found, and every program it executed, is
  - in the closure kache recorded (its "closure file" trace lines),
  - in the toolchain id (its "toolchain file" trace lines: the driver, cc1/cc1plus, as, specs), or
  - in the short allow-list below, each entry with the reason it is not an input of the object.
A new hidden input (a file some tool reads that no dependency list names and kache does not hash)
fails the test instead of shipping as a stale hit.

Environment: an LD_PRELOAD getenv() hook over the compilers (their drivers, cc1/cc1plus and as are
dynamically linked) lists every name they ask for; each must have a row that applies to a host
compiler. And each row does what it says for the gcc adapter: a keyed one changes the key, a probe one
the toolchain memo's key, a refused one passes through with its reason.
"""
import glob
import os
import pty
import re
import shutil
import subprocess
import textwrap

import kachetest
from kachetest import KacheTestCase
from test_soundness import GETENV_HOOK, assert_row_effect

STRACE = shutil.which("strace")
COMPILERS = [c for c in ("gcc-12", "g++-12", "clang-14", "clang++-14", "clang-19", "clang++-19") if shutil.which(c)]

# Reads that are not inputs of the object, by path prefix. One reason each.
ALLOWED_PREFIXES = [
    "/etc/ld.so.cache",     # the dynamic loader's cache of library locations
    "/proc/",               # process information (self/exe, meminfo, cpuinfo...)
    "/sys/",                # CPU topology (sysconf of online CPUs)
    "/dev/",                # /dev/null, /dev/urandom (temp names, not object content)
    "/usr/lib/locale/",     # locale data: message language, keyed through LC_ALL/LANG...
    "/usr/share/locale/",   # translated messages, the same
    "/etc/locale.alias",    # locale name aliases, the same
    "/usr/lib/x86_64-linux-gnu/gconv/",  # character set converters for messages
    # Time zone rules, read by localtime(): they only reach an object through __TIMESTAMP__ (not
    # stored: not_stored.timestamp); __DATE__/__TIME__ follow the pinned SOURCE_DATE_EPOCH in UTC.
    "/usr/share/zoneinfo/",
    "/etc/localtime",
]
# Reads by pattern, one reason each.
ALLOWED_PATTERNS = [
    # clang's CUDA installation detection reads the toolkit's version (cuda.h, version.txt/json) on
    # every compile; it acts only in CUDA mode, which kache passes through (clang-cuda).
    re.compile(r"/cuda[^/]*/(include/cuda\.h|version\.(txt|json))$"),
    # kache's scratch directory of this miss (.kache-XXXXXX beside the output): what the compile
    # writes there (clang opens its own output again); created empty for each miss.
    re.compile(r"/\.kache-[^/]+/"),
]
# Shared libraries the tools load: part of the installed tools themselves, like their executables
# (libLLVM, libclang-cpp, libbfd, libc...). Their packages' versions are in the drivers' --version.
SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")
# Files the compilers stat without reading (found by the stat family, never opened): what they
# answer does not reach the object.
STAT_ONLY = [
    # clang locates its installation (resource dir, GCC installation for libstdc++ and crt files)
    # through these; which GCC installation clang picks decides its include dirs: the probe keys them
    # (`clang -E -v`), and the probe memo's key holds the identity of the directories a GCC
    # installation appears in (test_gcc.py: a GCC installation appearing beside clang).
    "/usr/lib/gcc/",
    "/usr/lib/gcc-cross/",
    "/usr/lib/llvm-",
    "/usr/bin/",           # the driver resolving its own name and its tools over PATH
    "/usr/local/bin/",
    "/bin/",
    "/usr/lib/x86_64-linux-gnu/",  # crt1.o and friends (link only) and clang's multiarch probes
    "/lib/",
    "/lib64/",
]
# clang's CUDA installation detection looks for ptxas over PATH and for the toolkit's libdevice on
# every compile (clang 14; clang 19 in the probe's -v): CUDA mode only, which kache passes through.
STAT_ONLY_PATTERN = re.compile(r"/bin/ptxas$|/nvvm/libdevice/libdevice\.[0-9]+\.bc$")

C_SOURCE = textwrap.dedent("""
    #include <stdio.h>
    #include <string.h>
    #include "local.h"
    #if __has_include("opt.h")
    #define OPT 1
    #endif
    #include <macro_named.h>
    int value(const char* s) { return (int)strlen(s) + LOCAL + OPT + MACRO_NAMED + PRE; }
    """)
CXX_SOURCE = C_SOURCE + textwrap.dedent("""
    #include <vector>
    #include <string>
    int cxx() { std::vector<std::string> v{"a", "b"}; return (int)v.size(); }
    """)


def realpath(p):
    return os.path.realpath(p)


class GccInputAudit(KacheTestCase):
    def setUp(self):
        super().setUp()
        if STRACE is None:
            self.skipTest("strace is not installed")
        self.assertIn("gcc-12", COMPILERS)
        self.assertIn("clang-14", COMPILERS)

    def traced_miss(self, compiler, args, cwd):
        """One miss under strace. Returns (closure, toolchain files, reads, found, written, execs)."""
        trace = self.path("strace", "t")
        os.makedirs(os.path.dirname(trace), exist_ok=True)
        log_file = self.path("kache.log")
        if os.path.exists(log_file):
            os.unlink(log_file)
        env = dict(self.env)
        env.update({"KACHE_LOG": "kache=trace", "KACHE_LOG_FILE": log_file})
        r = subprocess.run([STRACE, "-f", "-ff", "-qq", "-y", "-o", trace, "-e",
                            "trace=openat,open,execve,stat,lstat,newfstatat,statx,access,faccessat,faccessat2",
                            kachetest.KACHE, compiler] + args, cwd=cwd, env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log_file) as f:
            log = f.read()
        closure = {realpath(m.group(1)) for m in re.finditer(r"closure file (\S+)", log)}
        tools = {realpath(m.group(1)) for m in re.finditer(r"toolchain file \S+ (\S+)", log)}
        self.assertTrue(tools, "the toolchain probe ran in the traced miss")
        reads, found, written, execs = set(), set(), set(), set()
        kache_bin = realpath(kachetest.KACHE)
        for name in glob.glob(trace + ".*"):  # one file per process or thread
            compiler_process = False  # after it executed a program other than kache
            with open(name, errors="replace") as f:
                for line in f:
                    m = re.match(r'execve\("([^"]+)".* = 0$', line)
                    if m:
                        execs.add(realpath(os.path.join(cwd, m.group(1))))
                        compiler_process = realpath(os.path.join(cwd, m.group(1))) != kache_bin
                        continue
                    m = re.match(r'(?:openat|open)\((?:.*?, )?"[^"]*", ([A-Z_|]+)(?:, [0-9]+)?\) = [0-9]+<(.*)>$',
                                 line)
                    if m:
                        flags, path = m.group(1).split("|"), realpath(m.group(2))
                        if "O_WRONLY" in flags or "O_RDWR" in flags or "O_CREAT" in flags:
                            written.add(path)
                        elif "O_DIRECTORY" not in flags:
                            reads.add(path)
                        continue
                    # A stat that succeeded on a file: the compiler learned it exists (a header it
                    # then opens, or only tests, like clang's __has_include). kache's own stats (its
                    # outputs, the memo key's identities, the direct-mode record's lookups) are what
                    # it keys or checks: only the compilers' count.
                    # -y prints a directory descriptor with its path, AT_FDCWD too (AT_FDCWD</dir>):
                    # a relative name is taken from it.
                    m = re.match(r'(\w+)\((?:AT_FDCWD|[0-9]+)(?:<([^>]*)>)?, "([^"]*)"|(\w+)\("([^"]*)"', line)
                    if m and compiler_process and line.rstrip().endswith(" = 0"):
                        call = m.group(1) or m.group(4)
                        path = m.group(3) if m.group(1) else m.group(5)
                        if call.startswith("open") or call == "execve" or not path or path.startswith("/proc/"):
                            continue  # /proc/self/exe would resolve to this test's own interpreter
                        path = realpath(os.path.join((m.group(1) and m.group(2)) or cwd, path))
                        if os.path.isfile(path):
                            found.add(path)
        shutil.rmtree(os.path.dirname(trace))
        return closure, tools, reads, found, written, execs

    def uncovered(self, compiler, args, cwd):
        self.zero()
        closure, tools, reads, found, written, execs = self.traced_miss(compiler, args, cwd)
        s = self.stats()
        self.assertEqual(s["misses"], 1, s)
        self.assertEqual(s.get("not_stored_reasons", {}), {}, "this case is expected to be stored")
        scratch = [realpath(self.cache), realpath(self.env["KACHE_CONFIG"]), realpath(self.path("kache.log"))]
        kache_bin = realpath(kachetest.KACHE)

        def covered(p):
            return (p in closure or p in tools or p in written or p == kache_bin
                    or os.path.isdir(p)
                    or any(p.startswith(a) for a in ALLOWED_PREFIXES)
                    or any(a.search(p) for a in ALLOWED_PATTERNS)
                    or SHARED_LIBRARY.search(p)
                    or any(p.startswith(r) for r in scratch))

        reads_left = sorted(p for p in reads if not covered(p))
        found_left = sorted(p for p in found - reads if not covered(p) and not any(p.startswith(a) for a in STAT_ONLY)
                            and not STAT_ONLY_PATTERN.search(p))
        # A program is covered only by the toolchain id: the key must change when it does.
        progs_left = sorted(p for p in execs if p not in tools and p != kache_bin)
        return reads_left, found_left, progs_left

    def assert_audited(self, compiler, args, cwd):
        reads, found, progs = self.uncovered(compiler, args, cwd)
        self.assertEqual(reads, [], f"{compiler}: files read outside the closure, the toolchain and the allow-list")
        self.assertEqual(found, [], f"{compiler}: files found (stat) outside the closure and the allow-lists")
        self.assertEqual(progs, [], f"{compiler}: programs run outside the toolchain id")

    def project(self):
        self.write("p/inc/local.h", "#define LOCAL 1\n")
        self.write("p/inc/macro_named.h", "#define MACRO_NAMED 2\n")
        self.write("p/src/opt.h", "// only tested by __has_include\n")
        self.write("p/pre/pre.h", "#define PRE 3\n")
        self.write("p/src/a.c", C_SOURCE)
        self.write("p/src/a.cpp", CXX_SOURCE)
        os.makedirs(self.path("p/build"), exist_ok=True)
        return self.path("p/build")

    def test_every_compiler(self):
        build = self.project()
        for compiler in COMPILERS:
            src = "../src/a.cpp" if "++" in compiler else "../src/a.c"
            # The third set: keyed options with files of their own (clang reads the sanitizers'
            # default ignore lists from its resource directory; its -MD output names them).
            for extra in (["-O2", "-g"], ["-MMD", "-MF", "a.d"],
                          ["-fsanitize=address,undefined", "-fopenmp", "-fPIC", "-fstack-protector-strong"]):
                with self.subTest(compiler=compiler, flags=extra):
                    shutil.rmtree(self.cache, ignore_errors=True)
                    self.assert_audited(compiler, ["-c", src, "-I../inc", "-include", "../pre/pre.h",
                                                   "-o", "a.o"] + extra, build)

    def test_assembler_with_cpp(self):
        self.write("inc/v.h", "#define V 7\n")
        self.write("s.S", '#include "v.h"\n.data\n.globl v\nv: .long V\n')
        for compiler in [c for c in COMPILERS if "++" not in c]:
            with self.subTest(compiler=compiler):
                shutil.rmtree(self.cache, ignore_errors=True)
                self.assert_audited(compiler, ["-c", "s.S", "-Iinc", "-o", "s.o"], self.ws)

    def test_a_hidden_input_is_seen(self):
        # The audit itself must see what no compiler dependency list names: the assembler reads
        # blob.bin. GNU as lists it itself (-Wa,--MD), so it is in the closure and the result is stored;
        # clang's integrated assembler lists nothing, so that compile is not stored.
        self.write("blob.bin", "payload\n")
        self.write("k.c", 'asm(".section .rodata\\n.incbin \\"blob.bin\\"\\n.previous\\n");\nint k;\n')
        self.zero()
        closure, tools, reads, found, written, execs = self.traced_miss("gcc-12", ["-c", "k.c", "-o", "k.o"], self.ws)
        self.assertIn(realpath(self.path("blob.bin")), reads)
        self.assertIn(realpath(self.path("blob.bin")), closure)
        self.assertEqual(self.stats().get("not_stored_reasons", {}), {})
        if shutil.which("clang-14"):
            shutil.rmtree(self.cache, ignore_errors=True)
            self.zero()
            closure, tools, reads, found, written, execs = self.traced_miss("clang-14", ["-c", "k.c", "-o", "k.o"],
                                                                            self.ws)
            self.assertIn(realpath(self.path("blob.bin")), reads)
            self.assertNotIn(realpath(self.path("blob.bin")), closure)
            # And what a compiler only stats (newfstatat(AT_FDCWD</dir>, ...) under -y): clang's GCC
            # installation detection finds crtbegin.o without opening it.
            self.assertTrue(any(p.endswith("/crtbegin.o") for p in found - reads), sorted(found))
            self.assertEqual(self.stats().get("not_stored_reasons", {}), {"assembler-inputs": 1})


class GccHipInstallation(KacheTestCase):
    """clang 19 reads the HIP version file of the first ROCm installation it finds when it prints -v (the
    toolchain probe's `clang -E -v`): /usr/share/hip/version once Debian's hipcc is installed, or
    $HIP_PATH/share/hip/version. Installing, removing or upgrading ROCm must probe again, and a new HIP
    version must key clang's compiles apart. A scratch installation named by HIP_PATH stands for the
    system's, which the test never touches."""

    def setUp(self):
        super().setUp()
        if not shutil.which("clang-19"):
            self.skipTest("clang-19 is not installed")
        self.write("a.c", "int a(void) { return 1; }\n")
        os.makedirs(self.path("rocm", "bin"), exist_ok=True)
        self.hip_env = {"HIP_PATH": self.path("rocm"), "KACHE_LOG": "kache=trace"}

    def compile(self):
        """One compile; returns (toolchain memo key, whether it hit)."""
        before = self.stats()["hits"]
        r = self.kache(["clang-19", "-c", "a.c", "-o", "a.o"], env=self.hip_env)
        key = re.search(r"toolchain memo key = (\w+)", r.stderr)
        self.assertTrue(key, r.stderr)
        return key.group(1), self.stats()["hits"] == before + 1

    def set_version(self, patch):
        self.write("rocm/share/hip/version", f"HIP_VERSION_MAJOR=5\nHIP_VERSION_MINOR=2\nHIP_VERSION_PATCH={patch}\n")

    def test_a_hip_installation_appearing_or_upgraded_misses(self):
        key, hit = self.compile()
        self.assertEqual(self.compile(), (key, True), "no change: the same memo and a hit")
        self.set_version("21153")  # ROCm installed
        installed, hit = self.compile()
        self.assertNotEqual(installed, key, "the memo made before ROCm was installed is not used after")
        self.assertFalse(hit, "a new HIP installation keys clang's compiles apart")
        self.assertEqual(self.compile(), (installed, True))
        self.set_version("30000-upgraded")  # ROCm upgraded: new content (another size, so another identity)
        upgraded, hit = self.compile()
        self.assertNotIn(upgraded, (key, installed))
        self.assertFalse(hit, "a HIP upgrade keys clang's compiles apart")
        self.assertEqual(self.compile(), (upgraded, True))
        os.unlink(self.path("rocm/share/hip/version"))  # ROCm removed
        self.assertEqual(self.compile(), (key, True), "ROCm removed: the memo and the entry made before it was there")


# Variables without a row of env_table.cpp that the gcc adapter's toolchain memo keys itself, with why.
TOOLCHAIN_MEMO_VARIABLES = {
    # Variables the toolchain memo keys that env_table.cpp has no row for yet: none today (HIP_PATH,
    # clang 19's HIP installation search, has its Probe row).
}


def host_env_table():
    """The host and nvcc rows of src/compiler/env_table.cpp: {name: (effect, reason, nvcc_only)} (the hip and
    hipcc rows apply to the HIP routes only: test_hip_input_audit.py audits them)."""
    with open(os.path.join(kachetest.SOURCE_DIR, "src", "compiler", "env_table.cpp")) as f:
        text = f.read()
    rows = re.findall(r'\{"([^"]+)", E::(\w+), "([^"]*)", R::(host|nvcc)\}', text)
    return {name: (effect, reason, reader == "nvcc") for name, effect, reason, reader in rows}


class GccEnvironmentAudit(KacheTestCase):
    def test_every_variable_the_compilers_read_is_in_the_table(self):
        table = host_env_table()
        self.write("hook.c", GETENV_HOOK)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", self.path("hook.so"), self.path("hook.c"), "-ldl"],
                       check=True, capture_output=True)
        self.write("inc/h.h", "#define H 1\n")
        self.write("a.c", '#include <stdio.h>\n#include "h.h"\nconst char* d(void) { return __DATE__ __TIMESTAMP__; }\n'
                   "int f(int x) { int unused; return x + H; }\n")
        self.write("a.cpp", '#include <vector>\n#include "h.h"\nint f() { return (int)std::vector<int>{H}.size(); }\n')
        self.write("s.S", '#include "h.h"\n.data\nv: .long H\n')
        env = {"LD_PRELOAD": self.path("hook.so"), "KACHE_GETENV_LOG": self.path("getenv.log")}
        e = dict(self.env, **env)
        for compiler in COMPILERS:
            src = "a.cpp" if "++" in compiler else "a.c"
            # -fdiagnostics-urls=always (gcc only) makes gcc read GCC_URLS and TERM_URLS; -fopenmp and
            # the sanitizers are the common options with a runtime of their own.
            urls = [] if compiler.startswith("clang") else ["-fdiagnostics-urls=always"]
            for extra in (["-O2", "-g", "-Wall"], ["-MD", "-MF", "a.d", "-Wa,--noexecstack"],
                          ["-fdiagnostics-color=always", "-Wall", "-flto"] + urls,
                          ["-fopenmp", "-fsanitize=address,undefined", "-fPIC", "-fstack-protector-strong"]):
                subprocess.run([compiler, "-c", src, "-Iinc", "-o", "a.o"] + extra, cwd=self.ws, env=e, check=True,
                               capture_output=True)
            if "++" not in compiler:
                subprocess.run([compiler, "-c", "s.S", "-Iinc", "-o", "s.o"], cwd=self.ws, env=e, check=True,
                               capture_output=True)
            # The toolchain probe's question (driver_probe.cpp): clang reads more when it prints -v
            # (its HIP and CUDA installation searches), in the probe, whose environment must be keyed too.
            for language in ("c", "c++"):
                subprocess.run([compiler, "-E", "-x", language, "-v", "/dev/null", "-o", "/dev/null"], cwd=self.ws,
                               env=e, check=True, capture_output=True)
            # With stderr on a terminal the compilers read more (the caret line's width, terminfo; clang
            # 14 also HOME, for ~/.terminfo: env_table.cpp's COLUMNS row says why HOME has no row).
            primary, secondary = pty.openpty()
            try:
                subprocess.run([compiler, "-c", src, "-Iinc", "-o", "a.o", "-Wall"], cwd=self.ws, env=e, check=True,
                               stdout=subprocess.DEVNULL, stderr=secondary)
            finally:
                os.close(secondary)
                os.close(primary)
        read = {}
        for line in self.read("getenv.log").splitlines():
            prog, name = line.split(" ", 1)
            read.setdefault(name, set()).add(prog)
        self.assertIn("CPATH", read)  # the hook works for cc1
        self.assertIn("COLUMNS", read)  # the terminal run happened
        missing = sorted(f"{n} (read by {', '.join(sorted(p))})" for n, p in read.items()
                         if (n not in table or table[n][2]) and n not in ("KACHE_GETENV_LOG", "HOME")
                         and n not in TOOLCHAIN_MEMO_VARIABLES)
        self.assertEqual(missing, [], "variables gcc/clang read that env_table.cpp has no host-compiler row for")

    def keys_of(self, env):
        r = self.kache(["gcc-12", "-c", "e.c", "-o", "e.o"], env=dict(env, KACHE_LOG="kache=trace"), check=False)
        log = r.stderr
        direct = re.search(r"direct key = (\w+)", log)
        memo = re.search(r"toolchain memo key = (\w+)", log)
        passthrough = re.search(r"passthrough \((\w+)\)", log)
        return (direct.group(1) if direct else None, memo.group(1) if memo else None,
                passthrough.group(1) if passthrough else None, log)

    def test_every_host_row_is_keyed_probed_or_refused(self):
        # A source that fails at once: the key is computed (and logged) before the compiler runs.
        self.write("e.c", "#error audit\n")
        base_direct, base_memo, _, log = self.keys_of({})
        self.assertTrue(base_direct and base_memo, log)
        # Values gcc survives: GCC_EXEC_PREFIX and the *_ROOT variables replace gcc's own prefixes.
        values = {"PATH": self.env.get("PATH", "") + ":/kache-audit", "GCC_EXEC_PREFIX": "/usr/lib/gcc/",
                  "GCC_ROOT": "/usr", "G++_ROOT": "/usr", "BINUTILS_ROOT": "/usr"}
        rows = 0
        for name, (effect, reason, nvcc_only) in host_env_table().items():
            if nvcc_only or effect in ("Modeled", "Inert"):
                continue  # the row's comment says why; Modeled rows have tests of their own
            rows += 1
            with self.subTest(variable=name, effect=effect):
                assert_row_effect(self, effect, reason, self.keys_of({name: values.get(name, "/kache-audit")}),
                                  base_direct, base_memo)
        self.assertGreater(rows, 20)
        for name, effect in TOOLCHAIN_MEMO_VARIABLES.items():
            with self.subTest(variable=name, effect=effect):
                self.assertNotIn(name, host_env_table(), "a row of its own now: drop it from TOOLCHAIN_MEMO_VARIABLES")
                assert_row_effect(self, effect, "", self.keys_of({name: "/kache-audit"}), base_direct, base_memo)


if __name__ == "__main__":
    kachetest.main()
