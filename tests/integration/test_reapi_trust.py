"""Remote execution's trust boundaries (issue 41, docs/remote-execution.md "Threat model"). The server's
other clients (tests/integration/reapi_raw.py, in BuildGrid's Python) send what they like; the worker
and kache give way to none of it:

  (a) a result another client planted in the ActionCache for kache's action is not restored by default
      (the action runs on a worker); with remote_execution.trusted it is, as before;
  (b) an action sees nothing of the worker's environment (its bearer token), not even through
      /proc/$PPID/environ;
  (c) a malformed input root (a file and a directory of one name, a name twice, "..", a name with '/', an
      empty name, a file whose size is not its digest's) is an action error; the worker serves on;
  (d) an output that is a symbolic link is an action error, never read through;
  (e) a work dir another user made first, or one others can write, is refused in one sentence;
  (f) kache creates kache-reapi's request file 0600 (strace shows the open's mode).

One BuildGrid for (a)-(d). Skipped (exit 77) only without BuildGrid or PostgreSQL (scripts/setup-tests.sh).
"""
import json
import os
import pwd
import struct
import subprocess
import sys
import unittest

import servers
from kachetest import KACHE, KacheTestCase

HELPER = os.path.join(os.path.dirname(os.path.realpath(KACHE)), "kache-reapi")
RAW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reapi_raw.py")
GCC = "/usr/bin/gcc"
OLD_NS = 1_600_000_000 * 10**9
TOKEN = "worker-secret-token-41"
MARK = "worker-environment-mark-41"


# --- CBOR, as far as kache-reapi's request and reply use it (remote_exec/wire.hpp) -------------------
def cbor(value):
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for code, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt)):
                return bytes([major << 5 | code]) + struct.pack(fmt, n)
    if value is True or value is False:
        return b"\xf5" if value else b"\xf4"
    if isinstance(value, int):
        return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, float):
        return b"\xfb" + struct.pack(">d", value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        return head(3, len(value.encode())) + value.encode()
    if isinstance(value, list):
        return head(4, len(value)) + b"".join(cbor(v) for v in value)
    return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())


def uncbor(data, at=0):
    """(value, next offset)."""
    first = data[at]
    major, info = first >> 5, first & 31
    at += 1
    if major == 7:
        simple = {20: False, 21: True, 22: None}
        if info in simple:
            return simple[info], at
        size, fmt = {25: (2, ">e"), 26: (4, ">f"), 27: (8, ">d")}[info]
        return struct.unpack(fmt, data[at:at + size])[0], at + size
    if info < 24:
        n = info
    else:
        size = {24: 1, 25: 2, 26: 4, 27: 8}[info]
        n = int.from_bytes(data[at:at + size], "big")
        at += size
    if major == 0:
        return n, at
    if major == 1:
        return -1 - n, at
    if major in (2, 3):
        raw = data[at:at + n]
        return (raw if major == 2 else raw.decode()), at + n
    if major == 4:
        items = []
        for _ in range(n):
            v, at = uncbor(data, at)
            items.append(v)
        return items, at
    out = {}
    for _ in range(n):
        k, at = uncbor(data, at)
        out[k], at = uncbor(data, at)
    return out, at


class ReapiTrustTest(KacheTestCase):
    grid = None
    worker = None

    @classmethod
    def setUpClass(cls):
        if servers.missing_buildgrid():
            return
        cls.grid = servers.BuildGrid()
        # One worker, of gcc's toolchain: whole gcc compiles and the raw actions (pinned to that id) all go to it.
        cls.worker = servers.KacheWorker(KACHE, cls.grid.url, "trust", compiler=GCC,
                                         env={"KACHE_REMOTE_EXECUTION_BEARER_TOKEN": TOKEN, "KACHE_TEST_MARK": MARK})
        with open(cls.worker.log) as f:
            toolchain = [l.split()[2] for l in f if l.startswith("kache-worker: toolchain ")][0]
        cls.platform = {"kache-toolchain": toolchain, "OSFamily": "Linux"}

    @classmethod
    def tearDownClass(cls):
        if cls.worker:
            cls.worker.stop()
        if cls.grid:
            cls.grid.stop()

    def setUp(self):
        self.private_workspace("kache-trust-")

    def need_grid(self):
        why = servers.missing_buildgrid()
        if why:
            self.skipTest(why)

    def raw(self, request):
        request = dict(request, url=self.grid.url)
        r = subprocess.run([os.path.join(servers.BUILDGRID_VENV, "bin", "python"), RAW], input=json.dumps(request),
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def raw_execute(self, argv, root, outputs=(), env=None):
        return self.raw({"op": "execute", "argv": argv, "root": root, "outputs": list(outputs), "env": env or {},
                         "platform": self.platform})

    def helper_execute(self, trusted):
        """kache-reapi (kache's own client) runs one fixed action; its reply as a dict."""
        request = {"settings": {"url": self.grid.url, "instance": "", "ca_file": "", "timeout_s": 300.0,
                                "trusted": trusted},
                   "arguments": ["/bin/sh", "-c", "printf built-by-the-worker > out.txt"],
                   "environment": [], "working_directory": "", "output_files": ["out.txt"], "inputs": [],
                   "platform": [[k, v] for k, v in sorted(self.platform.items())]}
        path = self.path("request")
        with open(path, "wb") as f:
            f.write(cbor(request))
        r = subprocess.run([HELPER, "execute", path], capture_output=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        return uncbor(r.stdout)[0]

    def test_planted_action_cache_result_is_not_restored_unless_trusted(self):
        self.need_grid()
        first = self.helper_execute(trusted=False)["outcome"]
        self.assertEqual([(o["path"], o["bytes"]) for o in first["outputs"]], [("out.txt", b"built-by-the-worker")])
        action = self.worker.ran("sh")[-1].split()[-1]
        # Another client of the server writes its own object for kache's action.
        plant = {"op": "plant", "action": action, "outputs": {"out.txt": "planted-by-another-client"}}
        self.raw(plant)
        runs = len(self.worker.ran())
        again = self.helper_execute(trusted=False)["outcome"]
        self.assertEqual(again["outputs"][0]["bytes"], b"built-by-the-worker")
        self.assertFalse(again["cached"])
        self.assertEqual(len(self.worker.ran()), runs + 1, "the action ran again on the worker")
        self.raw(plant)  # the run just now stored the worker's result there again
        trusted = self.helper_execute(trusted=True)["outcome"]
        self.assertEqual(trusted["outputs"][0]["bytes"], b"planted-by-another-client")
        self.assertTrue(trusted["cached"])

    def counters(self, env, prefix):
        out = self.kache(["--print-stats"], env=env).stdout
        return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()
                if line.startswith(prefix) and len(line.split()) == 2}

    def test_remote_result_reaches_the_shared_store_only_when_trusted(self):
        self.need_grid()
        self.write("main.c", "int f(void) { return 41; }\n", mtime_ns=OLD_NS)
        for trusted in ("0", "1"):
            share = self.path(f"share-{trusted}")
            os.mkdir(share)
            env = {"KACHE_REMOTE_EXECUTION": self.grid.url, "KACHE_REMOTE_EXECUTION_TIMEOUT": "300",
                   "KACHE_REMOTE_STORAGE": "file://" + share, "KACHE_DIR": self.path(f"cache-{trusted}"),
                   "KACHE_REMOTE_EXECUTION_TRUSTED": trusted}
            self.kache(["gcc", "-c", "main.c", "-O1", "-o", f"main-{trusted}.o"], env=env)
            self.assertEqual(self.counters(env, "remote_ran."), {"remote_ran.compile": 1})
            self.assertEqual(self.counters(env, "stored"), {"stored": 1}, "stored in the local store either way")
            published = [f for _, _, files in os.walk(share) for f in files]
            if trusted == "1":
                self.assertTrue(published, "a trusted service's result is published")
            else:
                self.assertEqual(published, [], "an untrusted service's result stays on this machine")

    def test_action_sees_nothing_of_the_worker_environment(self):
        self.need_grid()
        r = self.raw_execute(["/bin/sh", "-c", "cat /proc/$PPID/environ; echo; env"], {}, env={"ACTION_VAR": "mine"})
        self.assertEqual((r["code"], r["exit_code"]), (0, 0), r)
        self.assertIn("ACTION_VAR=mine", r["stdout"])
        self.assertNotIn(TOKEN, r["stdout"])
        self.assertNotIn(MARK, r["stdout"])

    def test_malformed_input_roots_are_action_errors(self):
        self.need_grid()
        cases = {
            "file and directory of one name": {"files": [["a", "x", False]], "dirs": [["a", {}]]},
            "a name twice": {"files": [["a", "x", False], ["a", "y", False]]},
            "..": {"dirs": [["..", {"files": [["escaped", "x", False]]}]]},
            "a name with /": {"files": [["d/e", "x", False]]},
            "an empty name": {"files": [["", "x", False]]},
            "a size that is not the digest's": {"files": [["a", "x", False, 1 << 40]]},
        }
        for what, root in cases.items():
            r = self.raw_execute(["/bin/true"], root)
            self.assertNotEqual(r["code"], 0, f"{what}: {r}")
        # The worker serves on.
        r = self.raw_execute(["/bin/sh", "-c", "cat a"], {"files": [["a", "fine", False]]})
        self.assertEqual((r["code"], r["stdout"]), (0, "fine"), r)
        self.assertIsNone(self.worker.proc.poll())

    def test_output_that_is_a_link_is_an_action_error(self):
        self.need_grid()
        secret = self.write("secret.txt", "not for the server\n")
        r = self.raw_execute(["/bin/ln", "-s", secret, "out.txt"], {}, outputs=["out.txt"])
        self.assertNotEqual(r["code"], 0, r)
        self.assertIn("symbolic link", r["message"])

    def start_worker(self, work_dir):
        return subprocess.run([KACHE, "worker", "--server", f"grpc://127.0.0.1:{servers.free_port()}", "--work-dir",
                               work_dir, "--toolchain-id", "trust-toolchain", "--max-actions", "1"],
                              capture_output=True, text=True, timeout=120)

    def test_work_dir_of_another_user_or_writable_by_others_is_refused(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to make a directory of another user")
        other = pwd.getpwnam("nobody")
        foreign = self.path("foreign")
        os.mkdir(foreign, 0o700)
        os.chown(foreign, other.pw_uid, other.pw_gid)
        shared = self.path("shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        for work_dir in (foreign, shared):
            r = self.start_worker(work_dir)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(f"the work dir {work_dir} is not a directory of this user's", r.stderr)
        self.assertEqual(os.listdir(foreign), [])

    def test_request_file_is_created_private(self):
        self.write("main.c", "int f(void) { return 1; }\n", mtime_ns=1_600_000_000 * 10**9)
        log = self.path("strace.log")
        env = dict(self.env, KACHE_REMOTE_EXECUTION=f"grpc://127.0.0.1:{servers.free_port()}", KACHE_DIR=self.path("c"))
        subprocess.run(["strace", "-f", "-e", "trace=openat", "-o", log, KACHE, "gcc", "-c", "main.c", "-o", "main.o"],
                       cwd=self.ws, env=env, check=True, capture_output=True)
        with open(log) as f:
            opens = [l for l in f if "kache-reapi-request" in l and "O_CREAT" in l]
        self.assertTrue(opens, "kache wrote no request file")
        for line in opens:
            self.assertIn(", 0600)", line)


if __name__ == "__main__":
    # 77 (CTest's skip) only when every test skipped.
    result = unittest.main(verbosity=2, exit=False).result
    if result.wasSuccessful() and result.testsRun > 0 and len(result.skipped) == result.testsRun:
        sys.exit(77)
    sys.exit(0 if result.wasSuccessful() else 1)
