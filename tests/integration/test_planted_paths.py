"""Planted paths (issue 41's floor): no file kache opens in a cache dir or a file:// share can hang a
command or be redirected by a link.

The paths are discovered, not listed by belief: the commands below (gcc compiles that miss, hit, read
from the share, record verified identities and log a warning, an nvcc compile where nvcc is installed,
-s, -z, -C, -c, --evict-older-than, -x, -X, -p, every form of `report`, `report --mark`, `explain`,
`doctor`), with a file:// share configured, run once under `strace -f -y -e trace=%file`, and every
path a system call names below the cache dir or the share (a stat included) is collected with the
directories on the way, in the table printed first. Names that differ per compile are folded into one
pattern (`<s>` a shard, `<ss>` a subshard, `<key>` an entry's key, `<h16>` a short hash), and one
concrete path of each pattern is planted. Temporary names with a process id or a random part (`<tmp>`)
cannot be planted in advance and are only listed. FLOOR is what discovery must at least find, so that
it cannot silently shrink.

Each case copies the state the commands leave (prepared once), replaces one path by a plant, and runs
every command again, each within BOUND_S seconds:
  - fifo: a FIFO (a reader without writer, or a writer without reader, would wait forever);
  - link: a symbolic link to a sentinel file outside (a file path) or to a directory outside holding
    one sentinel (a directory path);
  - dir: a directory where a file belongs.
A case passes when every command finishes in time with the exit status the unplanted baseline had,
every compile leaves an object equal to the real compiler's, and nothing outside the cache dir and the
share changed (the sentinels' content and mtimes, and no new file beside them). KACHE_PLANT_ONLY=REGEX
runs only the cases whose id matches.
"""
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import elfsections
from kachetest import KACHE

STRACE = shutil.which("strace")
GCC = shutil.which("gcc")
NVCC = shutil.which("nvcc")  # its compile (a toolchain probe with a scratch dir) runs where it is installed
# A command that runs this long waits on a plant: every lock wait is bounded by 2 s below (KACHE_LOCK_TIMEOUT),
# and the slowest command, an nvcc miss, takes a few seconds on two loaded cores.
BOUND_S = 15
OLD_NS = 1_577_836_800 * 10**9  # 2020-01-01: older than any --evict-older-than below

# (name, argv after kache, object the command compiles or None). The order matters: -C empties the
# local store so that the compiles after it read the share; -c and --evict-older-than come after every
# file was aged past their bound, so that they remove something; the compiles after them miss and store.
COMMANDS = [
    ("compile-a", ["gcc", "-c", "a.c", "-o", "a.o"], "a.o"),
    ("compile-b", ["gcc", "-c", "b.c", "-o", "b.o"], "b.o"),
    ("compile-a-touched", ["gcc", "-c", "a.c", "-o", "a.o"], "a.o"),  # a.c's identity moved: identities
    # A new key in every run: a miss that stores (entries, explain records) before -C removes plants.
    ("compile-a-miss", ["gcc", "-c", "a.c", "-o", "a.o", "-DPLANTED_RUN={run}"], "a.o"),
] + ([("compile-cu", ["nvcc", "-c", "k.cu", "-o", "k.o"], "k.o")] if NVCC else []) + [
    ("clear", ["-C"], None),
    ("compile-a-share", ["gcc", "-c", "a.c", "-o", "a.o"], "a.o"),
    ("compile-a-hit", ["gcc", "-c", "a.c", "-o", "a.o"], "a.o"),
    ("compile-b-share", ["gcc", "-c", "b.c", "-o", "b.o"], "b.o"),
    ("stats", ["-s"], None),
    ("stats-json", ["-s", "--json"], None),
    ("zero", ["-z"], None),
    ("report", ["report", "--all"], None),
    ("report-forms", ["report", "--all", "--json", "--html", "r.html", "--trace", "r.trace.json"], None),
    ("report-markdown", ["report", "--markdown"], None),
    ("report-mark", ["report", "--mark", "--label", "planted"], None),
    ("explain", ["explain", "--", "gcc", "-c", "a.c", "-o", "a.o"], None),
    ("explain-last", ["explain", "--last"], None),
    ("doctor", ["doctor"], None),
    ("cleanup", ["-c"], None),
    ("evict", ["--evict-older-than", "30d"], None),
    ("compile-a-warns", ["gcc", "-c", "a.c", "-o", "a.o"], "a.o"),  # COMMAND_ENV: kache.log, warned/
    ("compile-b-over-size", ["gcc", "-c", "b.c", "-o", "b.o"], "b.o"),  # COMMAND_ENV: its put evicts
    ("show-compression", ["-x"], None),
    ("recompress", ["-X", "3"], None),
    ("show-config", ["-p"], None),
]
# A log filter kache cannot parse is a warning, which a compile writes to <cache>/kache.log (once an
# hour: its stamp in warned/ was aged with the rest). A cache.max_size below what the cache holds makes
# the next put evict (cleanup.lock).
COMMAND_ENV = {"compile-a-warns": {"KACHE_LOG": "kache=bogus"}, "compile-b-over-size": {"KACHE_MAX_SIZE": "2K"}}
AGE_BEFORE = "cleanup"  # every file in the cache and the share is aged to OLD_NS before this command
TOUCH_BEFORE = "compile-a-touched"  # a.c gets another (still old) mtime: same content, a new identity
# The outputs the commands write in the source dir: rewritten by every run, checked apart.
OUTPUTS = {"a.o", "b.o", "k.o", "r.html", "r.trace.json"}

# What discovery must at least find (patterns, "cache/..." or "share/...").
FLOOR = [
    "cache/<s>", "cache/<s>/size", "cache/<s>/lock", "cache/<s>/<ss>", "cache/<s>/<ss>/<key>",
    "cache/events", "cache/events/events.jsonl", "cache/events/mark", "cache/stats", "cache/stats.journal",
    "cache/explain", "cache/explain/last", "cache/explain/<h16>/<key>.json", "cache/identities",
    "cache/kache.log", "cache/warned", "cache/warned/<h16>", "cache/kache.toml", "cache/cleanup.lock",
    "cache/toolchains", "cache/toolchains/<key>", "cache/toolchains/<key>.lock", "cache/toolchains/content/<key>",
    "cache/remote-state", "cache/remote-state/<h16>.state", "share/<ss>", "share/<ss>/<key>",
]

# One line of `strace -f` ("PID call(args) = result"); an *at call's paths are (dirfd, path) pairs, the
# dirfd spelled with its path by -y ("3</tmp/x/cache>", "AT_FDCWD</tmp/x/src>"); another call's are
# relative to the working directory.
PATH_CALL = re.compile(r"^(?:\[pid +)?(\d+)\]? *([a-z0-9_]+)\((.*)")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
AT_PAIR = re.compile(r'(AT_FDCWD(?:<[^>]*>)?|-?\d+(?:<[^>]*>)?), "((?:[^"\\]|\\.)*)"')
# A stat counts too: kache may look before it opens (a config file, a memo), and what it finds missing in
# an unplanted run is what a plant would be opened as.
NAMES_NO_PATH = {"getcwd", "chdir", "execve", "execveat"}


def fold(rel):
    """The pattern of a path below the cache dir or the share: names that differ per key folded."""
    out = []
    for part in rel.split("/"):
        if ".tmp." in part or part.startswith((".tmp", ".probe-")) or re.search(r"-probe-\d+$", part):
            out.append("<tmp>")
        elif re.fullmatch(r"[0-9a-f]{64}", part):
            out.append("<key>")
        elif re.fullmatch(r"[0-9a-f]{64}\.[a-z.]+", part):
            out.append("<key>" + part[64:])
        elif re.fullmatch(r"p-[0-9a-f]{16}", part):
            out.append("p-<h16>")
        elif re.fullmatch(r"[0-9a-f]{16}(\.[a-z]+)?", part):
            out.append("<h16>" + part[16:])
        elif re.fullmatch(r"[0-9a-f]{2}", part):
            out.append("<ss>")
        elif re.fullmatch(r"[0-9a-f]", part):
            out.append("<s>")
        else:
            out.append(part)
    return "/".join(out)


def split_at_args(args):
    """(dirfd text, path) pairs of an *at call's argument text, in order (renameat2 has two)."""
    return AT_PAIR.findall(args)


def traced_paths(line, cwd):
    """The absolute paths one strace line's system call names."""
    m = PATH_CALL.match(line)
    if not m or m.group(2) in NAMES_NO_PATH:
        return []
    pairs = split_at_args(m.group(3))  # openat, newfstatat, statx, renameat2, utimensat...
    if pairs:
        result = []
        for dirfd, path in pairs:
            if path.startswith("/"):
                result.append(path)
            elif "<" in dirfd:
                base = dirfd[dirfd.index("<") + 1:-1]
                result.append(os.path.join(base, path) if path else base)
            elif dirfd == "AT_FDCWD":
                result.append(os.path.join(cwd, path))
        return result
    return [p if p.startswith("/") else os.path.join(cwd, p) for p in QUOTED.findall(m.group(3))]


def tree_state(top, skip=()):
    """{relative path: (kind, size, mtime_ns, sha256 or link target)} of everything below top (links not
    followed)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = os.path.relpath(dirpath, top)
        dirnames[:] = [d for d in dirnames if os.path.normpath(os.path.join(rel_dir, d)) not in skip]
        for name in dirnames + filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel in skip:
                continue
            st = os.lstat(os.path.join(dirpath, name))
            digest = ""
            if stat.S_ISREG(st.st_mode):
                with open(os.path.join(dirpath, name), "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(os.path.join(dirpath, name))
            # A directory's mtime too: a file created in it and removed again leaves only that.
            state[rel] = (stat.S_IFMT(st.st_mode), st.st_size if not stat.S_ISDIR(st.st_mode) else 0, st.st_mtime_ns,
                          digest)
    return state


def changes(before, after):
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def with_run(args):
    """args with {run} replaced by a name no run used before (the key of a miss)."""
    run = f"{os.getpid()}_{time.monotonic_ns()}"
    return [a.replace("{run}", run) for a in args]


def age_everything(top):
    """Every entry below top gets OLD_NS as its times, links themselves and not their targets."""
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), ns=(OLD_NS, OLD_NS), follow_symlinks=False)


def run_bounded(argv, cwd, env):
    """(exit status or None when it ran past BOUND_S, output, seconds); a command past the bound is
    killed with every process of its session, so that no child keeps the pipes open."""
    start = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=BOUND_S)
        return p.returncode, out.decode(errors="replace"), time.monotonic() - start
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out.decode(errors="replace"), time.monotonic() - start


class Layout:
    """One fixed set of directories, reused by every case so that keys and paths stay the same."""

    def __init__(self, root):
        self.root = root
        self.cache = os.path.join(root, "cache")
        self.share = os.path.join(root, "share")
        self.src = os.path.join(root, "src")
        self.outside = os.path.join(root, "outside")
        self.template = os.path.join(root, "template")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KACHE_") and k != "CPATH"}
        self.env.update({
            "KACHE_DIR": self.cache,
            "KACHE_CONFIG": os.path.join(root, "kache.toml"),
            "XDG_CONFIG_HOME": os.path.join(root, "config"),
            "KACHE_REMOTE_STORAGE": f"file://{self.share}|max-size=1K",
            "KACHE_BUILD_ID": "planted",
            "KACHE_LOCK_TIMEOUT": "2",
        })

    def reset(self, from_template):
        for d in (self.cache, self.share, self.outside):
            shutil.rmtree(d, ignore_errors=True)
        for name in OUTPUTS:
            if os.path.lexists(os.path.join(self.src, name)):
                os.unlink(os.path.join(self.src, name))
        for name in ("a.c", "b.c", "k.cu"):  # as the template's entries recorded them
            os.utime(os.path.join(self.src, name), ns=(OLD_NS, OLD_NS))
        if from_template:
            shutil.copytree(os.path.join(self.template, "cache"), self.cache, symlinks=True)
            shutil.copytree(os.path.join(self.template, "share"), self.share, symlinks=True)
        else:
            os.makedirs(self.share)
        os.makedirs(self.outside)

    def before_command(self, name):
        if name == AGE_BEFORE:
            age_everything(self.cache)
            age_everything(self.share)
        if name == TOUCH_BEFORE:
            os.utime(os.path.join(self.src, "a.c"), ns=(OLD_NS + 10**9, OLD_NS + 10**9))

    def outside_state(self):
        skip = {"cache", "share", "template"} | {os.path.join("src", o) for o in OUTPUTS}
        return tree_state(self.root, skip)


class PlantedPaths(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if STRACE is None or GCC is None:
            raise unittest.SkipTest("strace and gcc are needed")
        cls.root = tempfile.mkdtemp(prefix="kache-plant-")
        cls.lay = Layout(cls.root)
        os.makedirs(cls.lay.src)
        for name, body in (("a.c", "int f(void) { return 42; }\n"), ("b.c", "int g(void) { return 43; }\n"),
                           ("k.cu", "__global__ void k(float* x) { x[0] = 1; }\n")):
            path = os.path.join(cls.lay.src, name)
            with open(path, "w") as f:
                f.write(body)
            os.utime(path, ns=(OLD_NS, OLD_NS))  # older than any compile: stored
        cls.reference = {}
        for tool, src, obj in ((GCC, "a.c", "a.o"), (GCC, "b.c", "b.o"), (NVCC, "k.cu", "k.o")):
            if tool:
                subprocess.run([tool, "-c", src, "-o", "ref-" + obj], cwd=cls.lay.src, check=True)
                cls.reference[obj] = elfsections.allocated_sections(os.path.join(cls.lay.src, "ref-" + obj))
        cls.table = cls.discover()

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(cls.root, ignore_errors=True)

    # --- discovery ----------------------------------------------------------------------------------
    @classmethod
    def discover(cls):
        """{pattern: {"example": a concrete relative path, "commands": [names]}} from one traced run.
        The template (the state the planted runs start from) is the cache and share after this run."""
        lay = cls.lay
        lay.reset(from_template=False)
        trace_dir = os.path.join(cls.root, "trace")
        os.makedirs(trace_dir)
        table = {}
        for name, args, _ in COMMANDS:
            if name == AGE_BEFORE:
                # The planted runs start from the state before the removals.
                os.makedirs(lay.template)
                shutil.copytree(lay.cache, os.path.join(lay.template, "cache"), symlinks=True)
                shutil.copytree(lay.share, os.path.join(lay.template, "share"), symlinks=True)
            lay.before_command(name)
            trace = os.path.join(trace_dir, name)
            subprocess.run([STRACE, "-f", "-qq", "-y", "-e", "trace=%file", "-o", trace, KACHE] + with_run(args),
                           cwd=lay.src, env=dict(lay.env, **COMMAND_ENV.get(name, {})), capture_output=True,
                           timeout=120)
            with open(trace, errors="replace") as f:
                for line in f:
                    for path in traced_paths(line.rstrip("\n"), lay.src):
                        cls.note(table, os.path.normpath(path), name)
        return table

    @classmethod
    def note(cls, table, path, command):
        for top, label in ((cls.lay.cache, "cache"), (cls.lay.share, "share")):
            if not path.startswith(top + "/"):
                continue
            rel = os.path.relpath(path, top)
            parts = rel.split("/")
            for i in range(1, len(parts) + 1):  # the directories on the way too
                concrete = label + "/" + "/".join(parts[:i])
                pattern = label + "/" + fold("/".join(parts[:i]))
                row = table.setdefault(pattern, {"example": concrete, "commands": []})
                if command not in row["commands"]:
                    row["commands"].append(command)
                template_has = os.path.lexists(os.path.join(cls.lay.template, row["example"]))
                if not template_has and os.path.lexists(os.path.join(cls.lay.template, concrete)):
                    row["example"] = concrete  # prefer a path the prepared state holds

    def test_discovery_finds_at_least_the_floor(self):
        sys.stderr.write("\npaths kache names below the cache dir and the share:\n")
        for pattern in sorted(self.table):
            row = self.table[pattern]
            sys.stderr.write(f"  {pattern:40} {row['example']:60} {','.join(row['commands'])}\n")
        missing = [p for p in FLOOR if p not in self.table]
        self.assertEqual(missing, [], "discovery no longer finds these paths")

    # --- planting -----------------------------------------------------------------------------------
    def cases(self):
        only = re.compile(os.environ.get("KACHE_PLANT_ONLY", ""))
        result = [("baseline", None, None, False)]
        for pattern in sorted(self.table):
            if "<tmp>" in pattern:
                continue  # a name with a process id and a random part: nothing to plant in advance
            example = self.table[pattern]["example"]
            is_dir = any(other.startswith(pattern + "/") for other in self.table)
            for kind in (("fifo", "link") if is_dir else ("fifo", "link", "dir")):
                result.append((f"{pattern}-{kind}", example, kind, is_dir))
        return [c for c in result if c[0] == "baseline" or only.search(c[0])]

    def plant(self, example, kind, is_dir):
        lay = self.lay
        top, rel = example.split("/", 1)
        path = os.path.join(lay.cache if top == "cache" else lay.share, rel)
        was_dir = os.path.isdir(path) and not os.path.islink(path)
        original = None
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                original = f.read()
        if was_dir:
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            os.mkdir(path)
        elif is_dir:
            target = os.path.join(lay.outside, "dir")
            os.makedirs(target)
            with open(os.path.join(target, "sentinel"), "wb") as f:
                f.write(b"sentinel\n")
            os.utime(os.path.join(target, "sentinel"), ns=(OLD_NS, OLD_NS))
            os.symlink(target, path)
        else:
            target = os.path.join(lay.outside, "sentinel")
            with open(target, "wb") as f:
                f.write(original if original is not None else b"sentinel\n")
            os.utime(target, ns=(OLD_NS, OLD_NS))
            os.symlink(target, path)

    def run_case(self, example, kind, is_dir):
        """(problems, {command: exit status}, outside changes) of one case."""
        lay = self.lay
        lay.reset(from_template=True)
        if kind:
            self.plant(example, kind, is_dir)
        before = lay.outside_state()
        statuses, problems = {}, []
        for name, args, obj in COMMANDS:
            lay.before_command(name)
            rc, out, took = run_bounded([KACHE] + with_run(args), lay.src, dict(lay.env, **COMMAND_ENV.get(name, {})))
            statuses[name] = rc
            if rc is None:
                problems.append(f"{name} ran past {BOUND_S} s (killed):\n{out[-2000:]}")
                break  # the next commands would wait the same way
            if obj and rc == 0 and elfsections.allocated_sections(os.path.join(lay.src, obj)) != self.reference[obj]:
                problems.append(f"{name}: {obj} differs from the compiler's own object")
            if rc != self.expected.get(name, rc):
                problems.append(f"{name} exited {rc}, {self.expected[name]} without the plant:\n{out[-2000:]}")
        changed = changes(before, lay.outside_state())
        return problems, statuses, changed

    def test_no_plant_hangs_a_command_or_changes_anything_outside(self):
        self.expected = {}
        cases = self.cases()
        problems, statuses, allowed = self.run_case(None, None, False)
        self.assertEqual(problems, [], "the baseline itself failed")
        self.assertIsNone(next((n for n, rc in statuses.items() if rc is None), None))
        self.expected = statuses
        sys.stderr.write(f"\n{len(cases) - 1} planted cases; baseline exit statuses {statuses}\n")
        failed = []
        for case_id, example, kind, is_dir in cases[1:]:
            with self.subTest(case=case_id):
                start = time.monotonic()
                problems, _, changed = self.run_case(example, kind, is_dir)
                outside = [c for c in changed if c not in allowed]
                if outside:
                    problems.append(f"changed outside the cache dir and the share: {outside}")
                if problems:
                    failed.append(case_id)
                sys.stderr.write(f"  {case_id:50} {'FAIL' if problems else 'ok'} ({time.monotonic() - start:.1f} s)\n")
                self.assertEqual(problems, [], f"{case_id}: {example} planted as {kind}:\n" + "\n".join(problems))
        sys.stderr.write(f"failing cases: {failed}\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
