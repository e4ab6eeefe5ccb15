"""What `cmake --install` and `cpack -G DEB` ship (issue 22), checked on the tree they make.

The build directory of the kache under test (KACHE_BUILD_DIR, else the directory of KACHE_BIN) is installed
once into a scratch prefix and packaged once; the tests then use only what was installed: one static
program in bin/, the manual page, completions, the masquerade directory lib/kache/ (links named like the
compilers), and a Debian package holding the same, unpacked with `dpkg -x` (the machine stays clean).
Remotes by host name ("localhost", from /etc/hosts) over http and https (nginx, a CA made by the test) are
served by the installed program alone.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import kachetest
import servers
from kachetest import KacheTestCase

BUILD_DIR = os.path.abspath(os.environ.get("KACHE_BUILD_DIR") or os.path.dirname(kachetest.KACHE))
COMPILERS = ["nvcc", "gcc", "g++", "cc", "c++", "clang", "clang++", "hipcc"]
SOURCE = "int twice(int x) { return 2 * x; }\n"


def installed_tree():
    """(prefix, deb, error): the build installed into a scratch prefix and packaged, made once per run."""
    if installed_tree.result is None:
        scratch = tempfile.mkdtemp(prefix="kache-install-")
        prefix = os.path.join(scratch, "usr")
        error = None
        r = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix], capture_output=True, text=True)
        if r.returncode != 0:
            error = f"cmake --install failed: {r.stdout}{r.stderr}"
        deb = None
        config = os.path.join(BUILD_DIR, "CPackConfig.cmake")
        if os.path.exists(config):
            r = subprocess.run(["cpack", "-G", "DEB", "--config", config, "-B", os.path.join(scratch, "pkg")],
                               capture_output=True, text=True)
            debs = glob.glob(os.path.join(scratch, "pkg", "*.deb"))
            deb = debs[0] if r.returncode == 0 and debs else None
        installed_tree.result = (scratch, prefix, deb, error)
    return installed_tree.result


installed_tree.result = None


def source_names(pattern, *globs):
    """Every match of `pattern` (one group) in the files of src/ the globs name."""
    names = set()
    for g in globs:
        for path in glob.glob(os.path.join(kachetest.SOURCE_DIR, "src", g), recursive=True):
            with open(path) as f:
                names.update(re.findall(pattern, f.read()))
    return sorted(names)


class Installed(KacheTestCase):
    def setUp(self):
        super().setUp()
        self.scratch, self.prefix, self.deb, error = installed_tree()
        self.assertIsNone(error, error)
        self.bin = os.path.join(self.prefix, "bin", "kache")

    def run_installed(self, prefix, args, cwd, env=None, masquerade=False):
        e = dict(self.env)
        if masquerade:
            e["PATH"] = os.path.join(prefix, "lib", "kache") + os.pathsep + e["PATH"]
        e.update(env or {})
        exe = args[0] if masquerade else os.path.join(prefix, "bin", "kache")
        r = subprocess.run([exe] + args[1:] if masquerade else [exe] + args, cwd=cwd, env=e, capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(r.returncode, 0, f"{args}: {r.stdout}{r.stderr}")
        return r

    def stats_with(self, prefix, env=None):
        return json.loads(self.run_installed(prefix, ["-s", "--json"], self.ws, env).stdout)

    def compile_twice(self, prefix, via_link, env=None):
        """Two identical compiles of a C file (through the link named gcc when via_link): a miss, then a hit."""
        work = tempfile.mkdtemp(dir=self.ws)
        with open(os.path.join(work, "foo.c"), "w") as f:
            f.write(SOURCE)
        os.utime(os.path.join(work, "foo.c"), (1_600_000_000, 1_600_000_000))
        for _ in range(2):
            self.run_installed(prefix, ["gcc", "-c", "foo.c", "-o", "foo.o"], work, env, masquerade=via_link)
        return self.stats_with(prefix, env)


class Tree(Installed):
    def test_bin_holds_static_programs(self):
        # kache, and kache-reapi beside it: remote execution's gRPC side, which a hit never starts
        # (docs/remote-execution.md).
        self.assertEqual(sorted(os.listdir(os.path.join(self.prefix, "bin"))), ["kache", "kache-reapi"])
        for program in (self.bin, os.path.join(self.prefix, "bin", "kache-reapi")):
            headers = subprocess.run(["readelf", "-l", program], capture_output=True, text=True, check=True).stdout
            self.assertNotIn("INTERP", headers, program)  # no program interpreter: no dynamic loader
            ldd = subprocess.run(["ldd", program], capture_output=True, text=True)
            self.assertIn("not a dynamic executable", ldd.stdout + ldd.stderr)
            self.assertIn("statically linked", subprocess.run(["file", "-L", program], capture_output=True,
                                                              text=True).stdout)

    def test_version_lists_the_features(self):
        out = self.run_installed(self.prefix, ["--version"], self.ws).stdout
        for feature in ("redis", "http", "https", "OpenSSL 3", "c-ares", "zstd", "statically"):
            self.assertIn(feature, out)

    def test_masquerade_links_point_to_kache(self):
        links = os.path.join(self.prefix, "lib", "kache")
        self.assertEqual(sorted(os.listdir(links)), sorted(COMPILERS))
        for name in COMPILERS:
            self.assertEqual(os.readlink(os.path.join(links, name)), "../../bin/kache")

    def test_man_page_names_every_option_setting_and_variable(self):
        page = os.path.join(self.prefix, "share", "man", "man1", "kache.1")
        r = subprocess.run(["man", "-E", "ascii", "-l", page], capture_output=True, text=True,
                           env=dict(self.env, MANWIDTH="200", LC_ALL="C"))
        self.assertEqual(r.returncode, 0, r.stderr)
        text = " ".join(r.stdout.split())
        # The lists come from the code: every KACHE_* name src/ reads, every row of the compilers'
        # environment table, every setting of the config table.
        variables = source_names(r'"(KACHE_[A-Z0-9_]+)"', "**/*.cpp", "**/*.hpp")
        self.assertIn("KACHE_REMOTE_STORAGE", variables)
        compiler_variables = source_names(r'\{"([^"]+)", E::', "compiler/env_table.cpp")
        self.assertGreater(len(compiler_variables), 20)
        settings = [f"{a}.{b}" for a, b in source_names(r'\{"([a-z]+)", "([a-z_]+)", "KACHE_', "core/config.cpp")]
        self.assertIn("remote.ca_file", settings)
        options = ["--show-stats", "--zero-stats", "--clear", "--max-size", "--show-config", "--reasons", "--version",
                   "doctor", "explain"]
        for name in variables + compiler_variables + settings + options:
            self.assertIn(name, text)

    def test_man_page_speaks_to_every_user_and_has_its_sections(self):
        page = os.path.join(self.prefix, "share", "man", "man1", "kache.1")
        r = subprocess.run(["man", "-E", "ascii", "-l", page], capture_output=True, text=True,
                           env=dict(self.env, MANWIDTH="200", LC_ALL="C"))
        self.assertEqual(r.returncode, 0, r.stderr)
        sections = {}
        for block in re.split(r"\n(?=[A-Z][A-Z ]+\n)", r.stdout):
            head, _, body = block.partition("\n")
            sections[head.strip()] = " ".join(body.split())
        self.assertIn("a compiler cache for nvcc, gcc/clang and hipcc", sections["NAME"])
        for recipe in ("kache nvcc", "kache g++", "kache hipcc", "CMAKE_CUDA_COMPILER_LAUNCHER",
                       "CMAKE_CXX_COMPILER_LAUNCHER", 'HIPCC="kache hipcc"'):
            self.assertIn(recipe, sections["DESCRIPTION"])
        for path in ("/etc/kache.toml", "config.toml", "kache.toml", "kache.log"):
            self.assertIn(path, sections["FILES"])
        self.assertIn("compiler's own status", sections["EXIT STATUS"])
        self.assertIn("Copyright", sections["COPYRIGHT"])
        # The environment table's rows no user sets are explained, not listed bare.
        self.assertIn("names no user sets on purpose", sections["COMPILER ENVIRONMENT"])

    def test_completions(self):
        bash = os.path.join(self.prefix, "share", "bash-completion", "completions", "kache")
        r = subprocess.run(["bash", "-c", f"source {bash} && complete -p kache"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("_kache", r.stdout)
        self.assertTrue(os.path.exists(os.path.join(self.prefix, "share", "zsh", "vendor-completions", "_kache")))


class Masquerade(Installed):
    def test_the_link_named_gcc_caches_a_compile(self):
        s = self.compile_twice(self.prefix, via_link=True)
        self.assertEqual((s["misses"], s["hits"]), (1, 1), s)


class RemotesByHostName(Installed):
    def share(self, url, extra=None):
        for checkout in ("one", "two"):
            env = {"KACHE_DIR": self.path("cache-" + checkout), "KACHE_REMOTE_STORAGE": url}
            env.update(extra or {})
            work = self.path(checkout)
            os.makedirs(work)
            with open(os.path.join(work, "foo.c"), "w") as f:
                f.write(SOURCE)
            os.utime(os.path.join(work, "foo.c"), (1_600_000_000, 1_600_000_000))
            self.run_installed(self.prefix, ["gcc", "-c", "foo.c", "-o", "foo.o"], work, env)
            s = self.stats_with(self.prefix, env)
            if checkout == "one":
                self.assertEqual((s["misses"], s["remote_errors"], s["remote_writes"] > 0), (1, 0, True), s)
            else:
                self.assertEqual((s["hits"], s["remote_hits"] > 0, s["remote_errors"]), (1, True, 0), s)

    def test_http(self):
        with servers.Nginx() as nginx:
            self.share(nginx.url.replace("127.0.0.1", "localhost") + "/cache")
            self.assertTrue(nginx.stored_files())

    def test_https(self):
        with servers.Nginx(tls=True) as nginx:
            self.share(nginx.url.replace("127.0.0.1", "localhost") + "/cache|connect-timeout=2000",
                       {"KACHE_REMOTE_CA_FILE": nginx.ca_cert})
            self.assertTrue(nginx.stored_files())


class DebianPackage(Installed):
    def test_package_holds_the_program_and_the_manual(self):
        self.assertIsNotNone(self.deb, "cpack -G DEB made no package")
        listing = subprocess.run(["dpkg-deb", "-c", self.deb], capture_output=True, text=True, check=True).stdout
        for path in ("./usr/bin/kache", "./usr/bin/kache-reapi", "./usr/share/man/man1/kache.1",
                     "./usr/lib/kache/gcc -> ../../bin/kache",
                     "./usr/share/doc/kache/copyright"):
            self.assertIn(path, listing)
        info = subprocess.run(["dpkg-deb", "-I", self.deb], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("Depends:", info)  # static: nothing to depend on
        self.assertIn("Apache License 2.0", info)

    def test_installed_size_counts_links_once_and_the_program_is_stripped(self):
        # Each of the 8 masquerade links was counted as a copy of the program (Installed-Size 133 MiB for
        # a 15 MB program), and the program shipped with its debug info.
        self.assertIsNotNone(self.deb, "cpack -G DEB made no package")
        info = subprocess.run(["dpkg-deb", "-f", self.deb, "Installed-Size"], capture_output=True, text=True,
                              check=True).stdout
        # kache (15 MB stripped) and kache-reapi (16 MB: gRPC, protobuf and abseil): links counted as copies
        # would pass 140 MiB.
        self.assertLess(int(info), 40 * 1024, f"Installed-Size {info.strip()} KiB")
        root = self.path("stripped")
        subprocess.run(["dpkg", "-x", self.deb, root], check=True, capture_output=True)
        program = os.path.join(root, "usr", "bin", "kache")
        described = subprocess.run(["file", program], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("not stripped", described)
        self.assertNotIn(".debug_info", subprocess.run(["readelf", "-S", program], capture_output=True,
                                                       text=True, check=True).stdout)
        # Its debug info is in the dbgsym package beside it, under the program's build id.
        ddebs = glob.glob(os.path.join(os.path.dirname(self.deb), "*-dbgsym_*.ddeb"))
        self.assertEqual(len(ddebs), 1, os.listdir(os.path.dirname(self.deb)))
        listing = subprocess.run(["dpkg-deb", "-c", ddebs[0]], capture_output=True, text=True, check=True).stdout
        self.assertRegex(listing, r"\./usr/lib/debug/\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug")
        # The links stay links: a link named gcc still runs the program (the next test compiles through it).
        links = subprocess.run(["dpkg-deb", "-c", self.deb], capture_output=True, text=True, check=True).stdout
        self.assertIn("./usr/lib/kache/gcc -> ../../bin/kache", links)

    def test_unpacked_package_compiles_and_hits_through_its_link(self):
        self.assertIsNotNone(self.deb, "cpack -G DEB made no package")
        root = self.path("root")
        subprocess.run(["dpkg", "-x", self.deb, root], check=True, capture_output=True)
        prefix = os.path.join(root, "usr")
        direct = self.compile_twice(prefix, via_link=False, env={"KACHE_DIR": self.path("cache-direct")})
        self.assertEqual((direct["misses"], direct["hits"]), (1, 1), direct)
        linked = self.compile_twice(prefix, via_link=True, env={"KACHE_DIR": self.path("cache-link")})
        self.assertEqual((linked["misses"], linked["hits"]), (1, 1), linked)


def tearDownModule():
    if installed_tree.result and os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
        shutil.rmtree(installed_tree.result[0], ignore_errors=True)


if __name__ == "__main__":
    kachetest.main()
