"""What a compile through kache looks like from outside must be what the plain compiler gives (issue 27
items 4 and 5): the object's recorded command line, -flto section names that two different TUs never
share, a source that is a pipe, an output spelled through a symlink and '..', colours on a terminal, and
a Redis remote that answers a byte at a time."""
import os
import pty
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

from kachetest import KACHE, KacheTestCase

GCC = "gcc-12"
OLD_NS = (int(time.time()) - 3600) * 1_000_000_000


class FidelityCase(KacheTestCase):
    def plain(self, compiler, args, cwd=None, check=True, input=None):
        r = subprocess.run([compiler] + list(args), cwd=cwd or self.ws, env=self.env, capture_output=True,
                           text=True, input=input)
        if check and r.returncode != 0:
            self.fail(f"{compiler} {' '.join(args)} failed:\n{r.stderr}")
        return r

    def readelf(self, *args):
        return subprocess.run(["readelf"] + list(args), capture_output=True, text=True, check=True).stdout


class RandomSeed(FidelityCase):
    def test_two_lto_units_of_one_name_link_after_ld_r(self):
        # Two util.c of one project (a CMake layout): the same normalized source path, other content.
        self.write("a/util.c", "int fa(int x) { return x * 3; }\n", mtime_ns=OLD_NS)
        self.write("b/util.c", "int fb(int x) { return x * 5; }\n", mtime_ns=OLD_NS)
        self.write("main.c", "int fa(int); int fb(int);\nint main(void) { return fa(1) + fb(2) - 13; }\n")
        for d in ("a", "b"):
            self.kache([GCC, "-flto", "-O2", "-c", "util.c", "-o", "util.o"], cwd=self.path(d))
        subprocess.run(["ld", "-r", "a/util.o", "b/util.o", "-o", "both.o"], cwd=self.ws, check=True)
        link = self.plain(GCC, ["-flto", "-O2", "main.c", "both.o", "-o", "m"], check=False)
        self.assertEqual(link.returncode, 0, link.stderr)
        self.assertEqual(subprocess.run([self.path("m")]).returncode, 0)

    def test_recorded_command_line_is_plain(self):
        self.write("u.c", "static int f(int a) { return a + 1; }\nint g(int b) { return f(b); }\n",
                   mtime_ns=OLD_NS)
        for flags, dump in ((["-g"], ["--debug-dump=info"]),
                            (["-frecord-gcc-switches"], ["-p", ".GCC.command.line"])):
            with self.subTest(flags=flags):
                self.kache([GCC] + flags + ["-c", "u.c", "-o", "k.o"])
                self.plain(GCC, flags + ["-c", "u.c", "-o", "plain.o"])
                recorded = [line for line in self.readelf(*dump, self.path("k.o")).splitlines()
                            if "DW_AT_producer" in line or "-f" in line]
                plain = [line for line in self.readelf(*dump, self.path("plain.o")).splitlines()
                         if "DW_AT_producer" in line or "-f" in line]
                self.assertTrue(plain)
                self.assertEqual(recorded, plain)
                self.assertNotIn("random-seed", "\n".join(recorded))


class SpecialSource(FidelityCase):
    def test_fifo_source_does_not_hang(self):
        src = "int from_the_fifo(void) { return 42; }\n"
        os.mkfifo(self.path("f.c"))

        def feed():
            # Opening blocks until a reader opens the FIFO; every reader gets the source once.
            with open(self.path("f.c"), "w") as f:
                f.write(src)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        # A generous bound that only a hang reaches (the compile itself takes a fraction of a second);
        # a hung compile's whole process group (the compiler blocked on the FIFO) is killed.
        p = subprocess.Popen([KACHE, GCC, "-x", "c", "-c", "f.c", "-o", "k.o"], cwd=self.ws, env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.fail("the compile of a FIFO source hung")
        self.assertEqual(p.returncode, 0, err)
        feeder.join(timeout=60)
        self.assertIn("from_the_fifo", subprocess.run(["nm", self.path("k.o")], capture_output=True,
                                                      text=True).stdout)
        self.assertEqual(self.stats()["passthrough_reasons"].get("source-special"), 1)
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        self.plain(GCC, ["-x", "c", "-c", "f.c", "-o", "plain.o"])
        feeder.join(timeout=60)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))

    def test_stdin_source_is_compiled_not_hashed(self):
        src = "int from_stdin(void) { return 7; }\n"
        self.kache([GCC, "-x", "c", "-c", "/dev/stdin", "-o", "k.o"], input=src)
        self.plain(GCC, ["-x", "c", "-c", "/dev/stdin", "-o", "plain.o"], input=src)
        self.assertIn("from_stdin", subprocess.run(["nm", self.path("k.o")], capture_output=True, text=True).stdout)
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))


class OutputThroughLink(FidelityCase):
    def test_output_and_depfile_through_symlink_and_dotdot(self):
        # lnk -> some/deep/dir, so lnk/../obj is some/deep/obj to the kernel, obj to a lexical normalizer.
        os.makedirs(self.path("some/deep/dir"))
        os.makedirs(self.path("some/deep/obj"))
        os.makedirs(self.path("obj"))
        os.symlink("some/deep/dir", self.path("lnk"))
        self.write("a.c", "int a;\n", mtime_ns=OLD_NS)
        self.kache([GCC, "-c", "a.c", "-o", "lnk/../obj/a.o", "-MD", "-MF", "lnk/../obj/a.d"])
        self.assertTrue(os.path.exists(self.path("some/deep/obj/a.o")))
        self.assertTrue(os.path.exists(self.path("some/deep/obj/a.d")))
        self.assertFalse(os.path.exists(self.path("obj/a.o")))
        self.assertFalse(os.path.exists(self.path("obj/a.d")))
        self.assertEqual(self.stats()["passthrough_reasons"].get("output-path-through-link"), 1)

    def test_output_through_symlink_where_the_normal_form_has_no_directory(self):
        # lnk/../out exists (some/deep/out); the lexical normal form's out/ does not.
        os.makedirs(self.path("some/deep/dir"))
        os.makedirs(self.path("some/deep/out"))
        os.symlink("some/deep/dir", self.path("lnk"))
        self.write("a.c", "int a;\n", mtime_ns=OLD_NS)
        self.kache([GCC, "-c", "a.c", "-o", "lnk/../out/a.o"])
        self.assertTrue(os.path.exists(self.path("some/deep/out/a.o")))
        self.assertFalse(os.path.exists(self.path("out")))


def run_in_pty(argv, cwd, env):
    """Runs argv with a pseudo-terminal as its stderr; returns (exit code, bytes written there)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(), out


class Colours(FidelityCase):
    def test_colours_on_a_terminal_as_plain_miss_and_hit(self):
        self.write("w.c", "int f(int a) { int unused; return a; }\n", mtime_ns=OLD_NS)
        env = dict(self.env, TERM="xterm")
        env.pop("GCC_COLORS", None)
        args = ["-Wall", "-c", "w.c", "-o", "k.o"]
        for compiler in [GCC] + [c for c in ("clang-14",) if shutil.which(c)]:
            with self.subTest(compiler=compiler):
                self.zero()
                code, plain = run_in_pty([compiler] + args, self.ws, env)
                self.assertEqual(code, 0)
                self.assertIn(b"\x1b[", plain)
                for run in ("miss", "hit"):
                    code, through = run_in_pty([KACHE, compiler] + args, self.ws, env)
                    self.assertEqual((code, through), (0, plain), run)
                # A pipe gets no colour, from an entry of its own.
                piped = self.kache([compiler] + args, env={"TERM": "xterm"})
                self.assertNotIn("\x1b[", piped.stderr)
                self.assert_counts(hits=1, misses=2)


class TricklingRedis:
    """A loopback server that reads a command and answers with a long bulk string, one byte every 50 ms
    (a Redis server behind a congested link): each byte arrives well within any per-read timeout."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.trickle, args=(conn,), daemon=True).start()

    def trickle(self, conn):
        with conn:
            try:
                conn.recv(65536)
                reply = b"$100000\r\n" + b"x" * 100000 + b"\r\n"
                for i in range(len(reply)):
                    if self.stopping.wait(0.05):
                        return
                    conn.sendall(reply[i:i + 1])
            except OSError:  # the client gave up and closed
                return

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.listener.close()


class RedisDeadline(FidelityCase):
    def test_trickling_server_does_not_stall_the_compile(self):
        self.write("r.c", "int r(int x) { return x + 11; }\n", mtime_ns=OLD_NS)
        with TricklingRedis() as server:
            url = f"redis://127.0.0.1:{server.port}|connect-timeout=1000|operation-timeout=300"
            env = dict(self.env, KACHE_REMOTE_STORAGE=url)
            # 20 s: far beyond the 300 ms deadline, far below the many seconds a per-read timeout lets the
            # server take (100000 bytes at 50 ms each).
            r = subprocess.run([KACHE, GCC, "-c", "r.c", "-o", "k.o"], cwd=self.ws, env=env, capture_output=True,
                               text=True, timeout=20)
            self.assertEqual(r.returncode, 0, r.stderr)
            s = self.stats()
            self.assertGreater(s["remote_timeouts"], 0, s)
        self.plain(GCC, ["-c", "r.c", "-o", "plain.o"])
        self.assert_same_object(self.path("k.o"), self.path("plain.o"))


if __name__ == "__main__":
    unittest.main()
