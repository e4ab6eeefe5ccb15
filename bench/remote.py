#!/usr/bin/python3
"""kache benchmark, "second machine" scenario: remote storage (issue 16).

Run with Debian's /usr/bin/python3 (it has matplotlib):

    /usr/bin/python3 bench/remote.py --kache build/kache [--quick]

Servers: one redis-server and one nginx WebDAV share on free loopback ports, started and stopped here
(tests/integration/servers.py), shared by every tool; each tool keeps its own Redis database and its
own WebDAV directory. kache also shares through S3: an all-in-one OpenStack Swift with its s3api
middleware (a real S3 server that checks SigV4 signatures), when it can run here (--no-s3: not).
Per hit of each warm-remote build (kache): bytes read and written and requests (remote hits, misses,
writes and errors) over the build's hits.

For each tool and remote backend:
  fill         checkout A, empty local cache, empty remote: a cold build that fills both
  warm local   checkout A, fresh build directory, same local cache (the tool's ordinary warm rebuild)
  warm remote  checkout B (a copy of A at another path, A hidden meanwhile), an EMPTY local cache, the
               same remote: what a second machine or a fresh CI worker sees. Every repetition starts
               from an empty local cache again.
Plain nvcc builds checkout B once: its objects are the reference that every warm-remote object is
compared with, section by section (bench/run.py's compare_dirs).

Dead remote (kache): a refused port and a black-holed listener (the kernel completes the connect,
nothing ever answers). First the compiles that open the breaker are timed one by one; then, with the
breaker open, hyperfine compares the same command with the dead remote and with no remote, for a
local hit (nvcc, tiny TU) and for a miss (gcc, a small C file; `kache -C` before each run, untimed):
the difference of the medians is what a dead remote costs per compile.

Writes OUT/remote.json, OUT/remote.md, OUT/remote.png. A benchmark, not a test: nothing fails on time.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import genproject  # noqa: E402
import run as bench  # noqa: E402
import servers  # noqa: E402

TARGET_REMOTE_VS_LOCAL = 1.5  # kache's warm-remote rebuild within 1.5x of its warm-local rebuild
TARGET_DEAD_REMOTE_MS = 5.0  # a dead remote adds under 5 ms per compile once the breaker is open

log = bench.log


def sccache_has_redis() -> bool:
    """Debian's sccache 0.4.0~pre6 is built without its Redis backend (`sccache --help`: Redis: false)."""
    out = subprocess.run(["sccache", "--help"], capture_output=True, text=True).stdout
    return any(ln.split(":")[0].strip() == "Redis" and ln.split(":")[1].strip() == "true"
               for ln in out.splitlines() if ":" in ln)


class Scenario:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.nvcc = shutil.which("nvcc")
        if not self.nvcc:
            sys.exit("nvcc not found on PATH")
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("CCACHE_", "SCCACHE_", "KACHE_", "RUSTC_WRAPPER"))
                    and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH", "CPLUS_INCLUDE_PATH")}
        self.checkout_a = os.path.join(self.work, "checkout-a")
        self.checkout_b = os.path.join(self.work, "second-machine", "checkout-b")
        self.r: dict = {"builds": {}, "correctness": {}, "dead_remote": {}, "anomalies": [], "skipped": {}}

    def anomaly(self, msg: str) -> None:
        log("ANOMALY: " + msg)
        self.r["anomalies"].append(msg)

    # -- tools -----------------------------------------------------------------------------------

    def make_tool(self, name: str, cache_dir: str, remote: dict[str, str], checkout: str) -> bench.Tool:
        """A run.py tool whose local cache is cache_dir (created empty), with the remote settings in
        `remote` and the checkout root as base directory (kache's paths.base_dirs, ccache's base_dir)."""
        env = dict(self.env)
        os.makedirs(cache_dir, exist_ok=True)
        if name == "kache":
            t = bench.Kache(self.work, env, self.args.kache)
            env["KACHE_CONFIG"] = os.path.join(cache_dir, "..", os.path.basename(cache_dir) + ".toml")
            env["KACHE_PATHS_BASE_DIRS"] = checkout
            env["KACHE_DIR"] = t.dir = cache_dir
        elif name == "ccache":
            t = bench.Ccache(self.work, env)
            env["CCACHE_BASEDIR"] = checkout
            env["CCACHE_NOHASHDIR"] = "1"  # ccache 4.7.5 hashes the working directory otherwise (seen in its
            # CCACHE_DEBUG input text): no hit from another checkout path. Its manual's advice for relocation.
            env["CCACHE_DIR"] = t.dir = cache_dir
        elif name == "sccache":
            t = bench.Sccache(self.work, env)
            env["SCCACHE_DIR"] = t.dir = cache_dir
        else:
            t = bench.Nvcc(self.work, env)
        env.update(remote)
        t.setup()
        return t

    # -- builds ----------------------------------------------------------------------------------

    def build(self, tool: bench.Tool, checkout: str, label: str, rep: int, fresh: bool = True) -> dict:
        bdir = os.path.join(checkout, f"build-{tool.name}")
        if fresh:
            shutil.rmtree(bdir, ignore_errors=True)
            genproject.write_ninja(bdir, self.tus, shlex.join(tool.launcher), self.nvcc)
        tool.zero()
        logf = os.path.join(self.work, "logs", f"{label}-{rep}.log")
        la = bench.loadavg()
        cpu0 = bench.children_cpu_s() + tool.cpu_s()
        start = time.perf_counter()
        with open(logf, "w") as f:
            p = subprocess.run(["ninja", "-C", bdir, "-j", str(self.args.jobs)], env=tool.env, stdout=f,
                               stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
        cpu = bench.children_cpu_s() + tool.cpu_s() - cpu0
        stats = tool.stats()
        if tool.name == "kache":
            raw = json.loads(tool._run([tool.launcher[0], "--show-stats", "--json"]).stdout)
            stats["remote"] = {k: v for k, v in raw.items() if k.startswith("remote_")}
        elif tool.name == "ccache":
            raw = tool._run([tool.launcher[0], "--print-stats"]).stdout
            stats["remote"] = {ln.split("\t")[0]: int(ln.split("\t")[1]) for ln in raw.splitlines()
                               if ln.startswith("remote_storage") and ln.split("\t")[1].strip().isdigit()}
        if p.returncode != 0:
            self.anomaly(f"{label}: build failed (ninja exit {p.returncode}), see {logf}")
        log(f"  {label:28s} {wall:8.2f} s (cpu {cpu:7.2f} s, load {la[0] if la else '?'})  hits={stats.get('hits')} "
            f"misses={stats.get('misses')} uncached={stats.get('uncached')} remote={stats.get('remote', {})}")
        return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "ok": p.returncode == 0, "stats": stats,
                "loadavg_before": la}

    def summary(self, runs: list[dict]) -> dict:
        ok = [x["wall_s"] for x in runs if x["ok"]]
        return {"runs": runs, "median_s": bench.median(ok)}

    def hide_checkout_a(self, hidden: bool) -> None:
        """On a second machine the first checkout does not exist: nothing may be read from it."""
        away = self.checkout_a + ".away"
        if hidden:
            os.rename(self.checkout_a, away)
        elif os.path.exists(away):
            os.rename(away, self.checkout_a)

    def run_tool(self, name: str, backends: dict[str, dict[str, str]], fill_remote: dict[str, str]) -> None:
        """fill (all backends at once), warm local, then a warm-remote rebuild per backend."""
        a = self.args
        base = os.path.join(self.work, "caches", name)
        log(f"{name}: fill from checkout A (local + {', '.join(backends)})")
        t = self.make_tool(name, os.path.join(base, "local-a"), fill_remote, self.checkout_a)
        try:
            res = {"fill": self.summary([self.build(t, self.checkout_a, f"{name} fill", 0)])}
            if res["fill"]["runs"][0]["stats"].get("misses") != len(self.tus):
                self.anomaly(f"{name}: the fill build had {res['fill']['runs'][0]['stats'].get('misses')} misses, "
                             f"expected {len(self.tus)}")
            res["warm_local"] = self.summary([self.build(t, self.checkout_a, f"{name} warm local", r)
                                              for r in range(a.reps)])
        finally:
            t.teardown()
        self.hide_checkout_a(True)
        # The entries were written on this machine: their manifests name the toolchain's headers by the
        # identities they have here. Another machine's copies have others.
        moved = self.move_toolchain_identities()
        if moved is not None:
            self.r["config"]["moved_identities"] = moved
        try:
            for backend, remote in backends.items():
                for primed in (False, True):
                    key = f"warm_remote_{backend}" + ("_primed" if primed else "")
                    label = f"{name} warm remote ({backend}{', primed' if primed else ''})"
                    runs = []
                    for r in range(a.reps):
                        cache = os.path.join(base, f"local-b-{key}-{r}")  # a second machine's empty cache
                        t = self.make_tool(name, cache, remote, self.checkout_b)
                        try:
                            if primed:
                                self.prime(t, label)
                            runs.append(self.build(t, self.checkout_b, label, r))
                        finally:
                            t.teardown()
                        st = runs[-1]["stats"]
                        if st.get("hits") != len(self.tus):
                            self.anomaly(f"{label} rep {r}: {st.get('hits')} hits of {len(self.tus)} "
                                         f"(misses {st.get('misses')}, uncached {st.get('uncached')})")
                        if r < a.reps - 1:
                            shutil.rmtree(cache, ignore_errors=True)
                    res[key] = self.summary(runs)
                    self.check_objects(f"{name}+{backend}" + (" primed" if primed else ""),
                                       os.path.join(self.checkout_b, f"build-{name}"))
        finally:
            self.hide_checkout_a(False)
        self.r["builds"][name] = res

    def toolchain_header_dirs(self) -> list[str]:
        """Where the project's system headers come from: the CUDA toolkit's include directory, the host
        compiler's own and /usr/include (headers only: the programs keep their identities, so a primed
        cache dir's toolchain memo stays valid, as it would on that machine)."""
        cuda = os.path.realpath(os.path.join(os.path.dirname(os.path.realpath(self.nvcc)), "..", "targets",
                                             "x86_64-linux", "include"))
        gcc = subprocess.run(["gcc", "-print-file-name=include"], capture_output=True, text=True).stdout.strip()
        return [d for d in (cuda, gcc, "/usr/include") if d and os.path.isdir(d)]

    def move_toolchain_identities(self) -> int | None:
        """Another machine's copy of the toolchain: the same headers under other identities. A no-op chmod
        of every header and directory gives each a new ctime, so every tool verifies them by content, as
        it would there; the wait puts the new times outside the clock tick (a file changed just now is
        trusted by no tool). None when the headers cannot be changed (not root, not their owner)."""
        if self.args.same_machine_identities:
            return None
        n = 0
        try:
            for top in self.toolchain_header_dirs():
                for d, _, files in os.walk(top):
                    for p in [d] + [os.path.join(d, f) for f in files]:
                        st = os.lstat(p)
                        if not stat.S_ISLNK(st.st_mode):
                            os.chmod(p, stat.S_IMODE(st.st_mode))
                            n += 1
        except PermissionError as e:
            self.r["skipped"]["moved identities"] = f"the toolchain's headers cannot be changed here ({e})"
            return None
        time.sleep(1.1)
        return n

    def prime(self, tool: bench.Tool, label: str) -> None:
        """A machine that has built with this toolchain before and lost its entries (cleared, evicted):
        the warm-remote build once in the new cache dir, then its entries removed (`-C`). What each tool
        keeps of the machine stays: kache's toolchain memo (`toolchains/`) and its record of verified
        identities (`identities`); ccache keeps nothing of the kind."""
        self.build(tool, self.checkout_b, f"{label} (priming)", 0)
        tool.clear()
        tool.zero()

    def check_objects(self, label: str, build_dir: str) -> None:
        ref = os.path.join(self.checkout_b, "build-nvcc")
        res = bench.compare_dirs(ref, build_dir, self.tus)
        self.r["correctness"][label] = res
        bad = len(res["mismatched"]) + len(res["missing"])
        log(f"  objects {label} (warm remote) vs plain nvcc: {res['identical']}/{res['objects']} identical by section")
        if bad:
            msg = f"{label}: {bad} of {res['objects']} objects of the warm-remote build differ from plain nvcc's"
            self.anomaly(("KACHE OBJECT MISMATCH! " if label.startswith("kache") else "") + msg)

    def explain_mismatches(self) -> None:
        """An object of a warm-remote build that differs from plain nvcc's in checkout B was built in
        checkout A (by the fill). Plain nvcc builds those TUs in checkout A too: when the served object
        equals that one, the difference is nvcc's own dependence on the checkout's absolute path
        (anonymous-namespace and _INTERNAL_ names hash the source's path), which both kache (with
        paths.base_dirs) and ccache (with base_dir) share across checkouts by design."""
        bad = sorted({m["object"] for res in self.r["correctness"].values() for m in res["mismatched"]})
        if not bad:
            return
        log(f"plain nvcc in checkout A for the {len(bad)} objects that differ from checkout B's")
        ref_a = os.path.join(self.checkout_a, "build-nvcc-a")
        os.makedirs(os.path.join(ref_a, "obj"), exist_ok=True)
        out = {}
        for tu in [t for t in self.tus if t.obj in bad]:
            cmd = [self.nvcc, *genproject.CFLAGS.split(), "-I../include", *tu.arch.split(), "-c", f"../{tu.src}",
                   "-o", tu.obj]
            subprocess.run(cmd, cwd=ref_a, env=self.env, capture_output=True)
            a = os.path.join(ref_a, tu.obj)
            row = {"plain_a_equals_plain_b": bench.section_digest(a) == bench.section_digest(
                os.path.join(self.checkout_b, "build-nvcc", tu.obj))}
            for tool in self.r["builds"]:
                served = os.path.join(self.checkout_b, f"build-{tool}", tu.obj)
                if tool != "nvcc" and os.path.exists(served):
                    row[f"{tool}_equals_plain_a"] = bench.section_digest(served) == bench.section_digest(a)
            out[tu.obj] = row
            log(f"  {tu.obj}: {row}")
            same = [k.split("_")[0] for k, v in row.items() if k.endswith("_plain_a") and v]
            if not row["plain_a_equals_plain_b"] and same:
                self.r["anomalies"].append(
                    f"explained: {tu.obj}: plain nvcc's own object differs between checkouts A and B; what "
                    f"{', '.join(same)} served in B equals plain nvcc's object built in A")
        self.r["mismatch_explained"] = out

    # -- dead remote -----------------------------------------------------------------------------

    def hyperfine_pair(self, env: dict, cmds: list[list[str]], names: list[str], runs: int, tag: str,
                       prepare: list[str] | None) -> list[dict]:
        jf = os.path.join(self.work, "logs", f"{tag}.json")
        argv = ["hyperfine", "-N", "--style", "none", "--warmup", "3", "--runs", str(runs), "--export-json", jf]
        if prepare:
            argv += ["--prepare", shlex.join(prepare)]
        for n, c in zip(names, cmds):
            argv += ["-n", n, shlex.join(c)]
        p = subprocess.run(argv, cwd=self.dead_dir, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            self.anomaly(f"dead remote {tag}: hyperfine failed: {p.stderr[-600:]}")
            return []
        with open(jf) as f:
            out = []
            for x in json.load(f)["results"]:
                ms = [v * 1000 for v in x["times"]]
                out.append({"name": x["command"], "median_ms": round(statistics.median(ms), 3),
                            "mean_ms": round(x["mean"] * 1000, 3), "min_ms": round(min(ms), 3),
                            "max_ms": round(max(ms), 3), "runs": len(ms)})
            return out

    def paired(self, env: dict, url: str, cmd: list[str], prepare: list[str] | None, rounds: int) -> dict:
        """The command with the dead remote and with none, alternating (the order swapped every round), so
        that the load of a shared machine drifts across both alike; the median of the paired differences."""
        dead_env, none_env = dict(env, KACHE_REMOTE_STORAGE=url), dict(env, KACHE_REMOTE_STORAGE="")
        dead, none, dead_cpu, none_cpu = [], [], [], []
        for i in range(rounds):
            for which in (("dead", "none") if i % 2 == 0 else ("none", "dead")):
                if prepare:
                    subprocess.run(prepare, cwd=self.dead_dir, env=env, capture_output=True)
                e = dead_env if which == "dead" else none_env
                c0 = bench.children_cpu_s()
                t0 = time.perf_counter_ns()
                subprocess.run(cmd, cwd=self.dead_dir, env=e, capture_output=True)
                (dead if which == "dead" else none).append((time.perf_counter_ns() - t0) / 1e6)
                (dead_cpu if which == "dead" else none_cpu).append((bench.children_cpu_s() - c0) * 1000)
        diffs = [d - n for d, n in zip(dead, none)]
        cpu_diffs = [d - n for d, n in zip(dead_cpu, none_cpu)]
        return {"delta_cpu_median_ms": round(statistics.median(cpu_diffs), 3),
                "dead_cpu_median_ms": round(statistics.median(dead_cpu), 3),
                "none_cpu_median_ms": round(statistics.median(none_cpu), 3),"dead_median_ms": round(statistics.median(dead), 3), "none_median_ms": round(statistics.median(none), 3),
                "dead_mean_ms": round(statistics.mean(dead), 3), "none_mean_ms": round(statistics.mean(none), 3),
                "delta_median_ms": round(statistics.median(diffs), 3), "delta_mean_ms": round(statistics.mean(diffs), 3),
                "rounds": rounds, "dead_ms": [round(x, 2) for x in dead], "none_ms": [round(x, 2) for x in none]}

    def run_dead_remote(self) -> None:
        a = self.args
        kache = self.args.kache
        self.dead_dir = os.path.join(self.work, "dead")
        os.makedirs(self.dead_dir, exist_ok=True)
        tiny = next(t for t in self.tus if t.kind == "tiny")
        shutil.copy(os.path.join(self.checkout_b, tiny.src), os.path.join(self.dead_dir, "tiny.cu"))
        shutil.copytree(os.path.join(self.checkout_b, "include"), os.path.join(self.dead_dir, "include"))
        with open(os.path.join(self.dead_dir, "small.c"), "w") as f:
            f.write("#include <stdio.h>\n#include <string.h>\n"
                    "int small(const char* s) { return (int)strlen(s) + printf(\"%s\\n\", s); }\n")
        past = time.time() - 60  # no 'file too new' condition (racy-file rule)
        for d, _, files in os.walk(self.dead_dir):
            for n in files:
                os.utime(os.path.join(d, n), (past, past))
        nvcc_cmd = [self.nvcc, *genproject.CFLAGS.split(), "-Iinclude", *tiny.arch.split(), "-c", "tiny.cu",
                    "-o", "tiny.o", "-MD", "-MF", "tiny.o.d", "-MT", "tiny.o"]
        gcc_cmd = [shutil.which("gcc"), "-O2", "-c", "small.c", "-o", "small.o"]
        with servers.BlackHole() as hole:
            refused_port = servers.free_port()
            deads = {"refused port": f"redis://127.0.0.1:{refused_port}",
                     "black hole (redis)": hole.url("redis"), "black hole (http)": hole.url("http")}
            for n, (label, url) in enumerate(deads.items()):
                env = dict(self.env)
                env.update({"KACHE_DIR": os.path.join(self.work, "caches", f"dead-{n}"),
                            "KACHE_CONFIG": os.path.join(self.work, "kache-dead.toml"), "KACHE_MAX_SIZE": "20G"})
                open(env["KACHE_CONFIG"], "w").close()
                res: dict = {"url": url}

                def counters():
                    st = json.loads(subprocess.run([kache, "-s", "--json"], env=env, capture_output=True,
                                                   text=True).stdout)
                    return {k: st.get(k) for k in ("hits", "misses", "remote_skipped", "remote_errors",
                                                   "remote_timeouts")}

                # 1. The compiles that open the breaker, one by one: each local miss asks the dead remote.
                first = []
                for _ in range(4):
                    subprocess.run([kache, "-C"], env=env, capture_output=True)
                    subprocess.run([kache, "-z"], env=env, capture_output=True)
                    t0 = time.perf_counter()
                    p = subprocess.run([kache, *gcc_cmd], cwd=self.dead_dir, env=dict(env, KACHE_REMOTE_STORAGE=url),
                                       capture_output=True, text=True)
                    first.append({"ms": round((time.perf_counter() - t0) * 1000, 1), **counters()})
                    if p.returncode != 0:
                        self.anomaly(f"dead remote {label}: compile failed: {p.stderr[-400:]}")
                res["first_compiles"] = first
                subprocess.run([kache, *nvcc_cmd], cwd=self.dead_dir, env=env, capture_output=True)  # the hit's entry
                # 2. With the breaker open: the same command with the dead remote and with none.
                res["pairs"] = {}
                for what, cmd, prepare, runs in (
                        ("hit", [kache, *nvcc_cmd], None, a.dead_hit_runs),
                        ("miss", [kache, *gcc_cmd], [kache, "-C"], a.dead_miss_runs)):
                    subprocess.run([kache, "-z"], env=env, capture_output=True)
                    hf = self.hyperfine_pair(
                        env, [["env", f"KACHE_REMOTE_STORAGE={url}", *cmd], ["env", "KACHE_REMOTE_STORAGE=", *cmd]],
                        ["dead remote", "no remote"], runs, f"dead-{n}-{what}", prepare)
                    hf_stats = counters()
                    subprocess.run([kache, "-z"], env=env, capture_output=True)
                    pr = self.paired(env, url, cmd, prepare, runs)
                    pr["stats"] = counters()
                    v = {"hyperfine": None, "paired": pr, "hyperfine_stats": hf_stats}
                    if len(hf) == 2:
                        v["hyperfine"] = {"dead": hf[0], "none": hf[1],
                                          "delta_median_ms": round(hf[0]["median_ms"] - hf[1]["median_ms"], 3)}
                    res["pairs"][what] = v
                    log(f"  dead remote {label:20s} {what}: paired delta {pr['delta_median_ms']:+.2f} ms (median), "
                        f"{pr['delta_mean_ms']:+.2f} ms (mean); hyperfine "
                        f"{v['hyperfine']['delta_median_ms'] if v['hyperfine'] else '?'} ms; {pr['stats']}")
                self.r["dead_remote"][label] = res

    # -- driver ----------------------------------------------------------------------------------

    def run(self) -> dict:
        a = self.args
        if os.path.exists(self.work):
            shutil.rmtree(self.work)
        os.makedirs(os.path.join(self.work, "logs"))
        fake = argparse.Namespace(kache=a.kache, kache_rev=None)
        self.r["machine"] = bench.Bench.machine(argparse.Namespace(nvcc=self.nvcc, args=fake))
        self.r["machine"]["redis"] = bench.first_line([servers.find("redis-server"), "--version"])
        self.r["machine"]["nginx"] = bench.first_line([servers.find("nginx"), "-v"])
        self.tus = genproject.generate(self.checkout_a, a.tiny, a.thrust)
        # checkout B: the same files at another path (a new clone on another machine)
        shutil.copytree(self.checkout_a, self.checkout_b, copy_function=shutil.copy2)
        past = time.time() - 60
        for root in (self.checkout_a, self.checkout_b):
            for d, _, files in os.walk(root):
                for n in files:
                    os.utime(os.path.join(d, n), (past, past))
        self.r["config"] = {"quick": a.quick, "jobs": a.jobs, "tus": len(self.tus), "tiny_tus": a.tiny,
                            "thrust_tus": a.thrust, "reps": a.reps, "checkout_a": self.checkout_a,
                            "checkout_b": self.checkout_b, "dead_hit_runs": a.dead_hit_runs,
                            "dead_miss_runs": a.dead_miss_runs}
        swift_why = "--no-s3" if a.no_s3 else servers.swift_missing()
        swift = None if swift_why else servers.Swift()
        if swift_why:
            self.r["skipped"]["s3"] = f"no S3 server: {swift_why}"
        try:
            self.run_with_servers(swift)
        finally:
            if swift:
                swift.stop()
        if "kache" in a.tools and not a.no_dead:
            log("dead remote (kache): breaker opening, then hit and miss with the breaker open")
            self.run_dead_remote()
        self.r["machine"]["loadavg_end"] = bench.loadavg()
        self.r["targets"] = self.targets()
        self.r["duration_s"] = round(time.monotonic() - bench.T0, 1)
        return self.r

    def run_with_servers(self, swift) -> None:
        a = self.args
        with servers.Redis() as redis, servers.Nginx() as nginx:
            self.r["servers"] = {"redis": redis.url, "nginx": nginx.url}
            log(f"redis-server {redis.url}, nginx WebDAV {nginx.url}; work {self.work}")
            log("plain nvcc, checkout B (the reference objects)")
            nv = self.make_tool("nvcc", os.path.join(self.work, "caches", "nvcc"), {}, self.checkout_b)
            self.r["builds"]["nvcc"] = {"cold": self.summary([self.build(nv, self.checkout_b, "nvcc cold", 0)])}
            kache_backends = {"redis": {"KACHE_REMOTE_STORAGE": f"{redis.url}/1"},
                              "http": {"KACHE_REMOTE_STORAGE": f"{nginx.url}/kache"}}
            if swift:
                swift.create_bucket("kache-bench")
                self.r["servers"]["swift"] = swift.endpoint
                kache_backends["s3"] = {"KACHE_REMOTE_STORAGE": f"s3://kache-bench/kache|endpoint={swift.endpoint}",
                                        "AWS_ACCESS_KEY_ID": swift.access_key,
                                        "AWS_SECRET_ACCESS_KEY": swift.secret_key}
            tools = {
                "kache": (kache_backends, "KACHE_REMOTE_STORAGE"),
                "ccache": ({"redis": {"CCACHE_REMOTE_STORAGE": f"{redis.url}/2"},
                            "http": {"CCACHE_REMOTE_STORAGE": f"{nginx.url}/ccache"}}, "CCACHE_REMOTE_STORAGE"),
            }
            if "sccache" in a.tools:
                if sccache_has_redis():
                    tools["sccache"] = ({"redis": {"SCCACHE_REDIS": f"{redis.url}/3"}}, None)
                else:
                    why = ("this sccache (" + bench.first_line(["sccache", "--version"]) + ") is built without its "
                           "Redis backend (`sccache --help`: Redis: false), and it has no WebDAV backend; only "
                           "Debian's packages can be installed here, so no sccache with Redis can be built")
                    self.r["skipped"]["sccache"] = why
                    log("sccache skipped: " + why)
            for name, (backends, var) in tools.items():
                if name not in a.tools:
                    continue
                # One fill writes to every backend (both tools write to all their remotes on a miss);
                # sccache has one backend at a time.
                fill = ({var: " ".join(b[var] for b in backends.values())} if var
                        else next(iter(backends.values())))
                for b in backends.values():  # the other settings (S3 credentials) go along
                    fill.update({k: v for k, v in b.items() if k != var})
                self.run_tool(name, backends, fill)
            self.explain_mismatches()
            self.r["servers"]["redis_keys"] = len(redis.keys())
            self.r["servers"]["nginx_files"] = len(nginx.stored_files())
            if swift:
                self.r["servers"]["s3_objects"] = len(swift.keys("kache-bench"))

    def targets(self) -> list[dict]:
        b = self.r["builds"]
        out = []

        def med(tool, key):
            return b.get(tool, {}).get(key, {}).get("median_s")

        for backend in ("redis", "http", "s3"):
            for suffix, what in (("", "new cache dir"), ("_primed", "primed cache dir")):
                remote, local = med("kache", f"warm_remote_{backend}{suffix}"), med("kache", "warm_local")
                if remote and local:
                    out.append({"target": f"kache warm-remote ({backend}, {what}) rebuild ÷ its warm-local rebuild",
                                "goal": f"<= {TARGET_REMOTE_VS_LOCAL:g}", "value": round(remote / local, 3),
                                "pass": remote / local <= TARGET_REMOTE_VS_LOCAL})
                for peer in ("ccache", "sccache"):
                    p = med(peer, f"warm_remote_{backend}{suffix}")
                    if remote and p:
                        out.append({"target": f"kache warm-remote ({backend}, {what}) ÷ {peer}'s",
                                    "goal": "< 1", "value": round(remote / p, 3), "pass": remote < p})
        for label, res in self.r["dead_remote"].items():
            for what, v in res.get("pairs", {}).items():
                d = v["paired"]["delta_median_ms"]
                out.append({"target": f"dead remote ({label}), breaker open: added per compile, {what} "
                                      "(median of paired differences)",
                            "goal": f"< {TARGET_DEAD_REMOTE_MS:g} ms", "value": d, "pass": d < TARGET_DEAD_REMOTE_MS})
        return out


# ---------------------------------------------------------------------------------------------------
# Reporting

ROWS = [("fill", "fill: cold build, checkout A (writes local + remotes)"),
        ("warm_local", "warm local: checkout A, clean build dir, same local cache"),
        ("warm_remote_redis", "warm remote (redis): checkout B, new empty cache dir"),
        ("warm_remote_http", "warm remote (http/WebDAV): checkout B, new empty cache dir"),
        ("warm_remote_s3", "warm remote (s3 on Swift): checkout B, new empty cache dir"),
        ("warm_remote_redis_primed", "warm remote (redis), primed: checkout B, cache dir that built it before, entries cleared"),
        ("warm_remote_http_primed", "warm remote (http/WebDAV), primed: checkout B, cache dir that built it before, entries cleared"),
        ("warm_remote_s3_primed", "warm remote (s3 on Swift), primed: checkout B, cache dir that built it before, entries cleared")]


def per_hit(stats: dict) -> dict | None:
    """A warm-remote build's remote traffic over its hits: bytes read, bytes written, requests."""
    rem, hits = stats.get("remote", {}), stats.get("hits") or 0
    if not hits or not rem:
        return None
    # remote_reads: values read (a hit reads a manifest and an entry); remote_hits counts compiles.
    reads = rem.get("remote_reads", rem.get("remote_hits", 0))
    requests = reads + sum(rem.get(k, 0) for k in ("remote_misses", "remote_writes", "remote_errors",
                                                   "remote_timeouts", "remote_oversized"))
    return {"bytes_read": rem.get("remote_bytes_read", 0) / hits, "bytes_written": rem.get("remote_bytes_written", 0) / hits,
            "requests": requests / hits}


def report_md(r: dict) -> str:
    m, c = r["machine"], r["config"]
    fmt = bench.fmt_num
    L = ["# kache benchmark: second machine (remote storage)\n",
         f"{m['date']} · {m['cpu']} · {m['cores_usable']} cores · {m['ram']} RAM · Linux {m['kernel']} · {m['os']}  ",
         f"{m['nvcc_release']} · {m['ccache']} · {m['sccache']} · {m['kache']} (commit {m['kache_commit'][:12]}) · "
         f"{m['redis']} · {m['nginx']}  ",
         f"Load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')} (shared 2-core machine; "
         f"each run's load is in the JSON). Total run time {r.get('duration_s', 0) / 60:.1f} min.  ",
         f"Command: `{m['command']}`\n",
         f"Project: bench/genproject.py, {c['tus']} TUs ({c['tiny_tus']} tiny, {c['thrust_tus']} thrust+cub), "
         f"`ninja -j {c['jobs']}`, medians of {c['reps']} runs for the warm rebuilds. Checkout A "
         f"`{c['checkout_a']}`, checkout B `{c['checkout_b']}` (a copy; A is renamed away while B builds from "
         f"the remote). Each warm-remote run starts with a new, empty local cache (\"primed\": one that built "
         f"checkout B from the remote before and was then cleared with `-C`, keeping what the tool keeps of a "
         f"machine)"
         + (f"; before them the toolchain's {c['moved_identities']} headers and include directories got new "
            f"identities (a no-op chmod: a new ctime), as another machine's copy has them, so the manifests "
            f"written by the fill no longer match them by identity" if c.get("moved_identities")
            else ", on this machine's toolchain (the fill's identities)")
         + f". Base directory = the "
         f"checkout root (kache `paths.base_dirs`, ccache `base_dir`). One redis-server and one nginx "
         f"WebDAV share for all tools.\n",
         "## Rebuilds\n",
         "| build | plain nvcc | kache | ccache | sccache |", "|---|---:|---:|---:|---:|"]
    b = r["builds"]
    L.append(f"| cold build, checkout B (reference objects) | {fmt(b.get('nvcc', {}).get('cold', {}).get('median_s'), 's')} | | | |")
    for key, label in ROWS:
        cells = []
        for tool in ("kache", "ccache", "sccache"):
            v = b.get(tool, {}).get(key, {}).get("median_s")
            cell = fmt(v, "s")
            local = b.get(tool, {}).get("warm_local", {}).get("median_s")
            if key.startswith("warm_remote") and v and local:
                cell += f" ({v / local:.2f}× warm local)"
            cells.append(cell if tool not in r["skipped"] else "n/a")
        L.append(f"| {label} | | " + " | ".join(cells) + " |")
    L.append("")
    L.append("Hits of the last run (hits / misses / uncached; remote counters):\n")
    L.append("| tool | build | hits / misses / uncached | remote |")
    L.append("|---|---|---|---|")
    for tool in ("kache", "ccache", "sccache"):
        for key, label in ROWS:
            runs = b.get(tool, {}).get(key, {}).get("runs")
            if runs:
                s = runs[-1]["stats"]
                rem = ", ".join(f"{k}={v}" for k, v in s.get("remote", {}).items() if v)
                L.append(f"| {tool} | {label.split(':')[0]} | {s.get('hits')} / {s.get('misses')} / {s.get('uncached')} | {rem} |")
    L.append("")
    L.append("Remote traffic per hit of kache's warm-remote builds (last run; requests = values read + "
             "misses + writes + errors and timeouts, each one request):\n")
    L.append("| build | bytes read / hit | bytes written / hit | requests / hit |")
    L.append("|---|---:|---:|---:|")
    for key, label in ROWS:
        runs = b.get("kache", {}).get(key, {}).get("runs")
        ph = per_hit(runs[-1]["stats"]) if runs and key.startswith("warm_remote") else None
        if ph:
            L.append(f"| {label.split(':')[0]} | {ph['bytes_read']:.0f} | {ph['bytes_written']:.0f} | {ph['requests']:.2f} |")
    L.append("")
    if r["skipped"]:
        L.append("Not measured:\n")
        for t, why in r["skipped"].items():
            L.append(f"- **{t}**: {why}.")
        L.append("")
    L.append("## Objects of the warm-remote builds vs plain nvcc's (by section: .text* .data* .rodata* .nv_fatbin)\n")
    L.append("| build | identical | differing |")
    L.append("|---|---:|---|")
    for label, res in r["correctness"].items():
        bad = [x["object"] for x in res["mismatched"]] + [f"{x} (missing)" for x in res["missing"]]
        L.append(f"| {label} | {res['identical']}/{res['objects']} | {', '.join(bad[:8]) if bad else 'none'} |")
    L.append("")
    if r.get("mismatch_explained"):
        L.append("The objects that differ, built by plain nvcc in checkout A (where the fill built them): "
                 "equal to plain nvcc's object in checkout B? equal to what each tool served in B?\n")
        tools = sorted({k.split("_")[0] for v in r["mismatch_explained"].values() for k in v if k.endswith("_plain_a")})
        L.append("| object | plain nvcc A = plain nvcc B | " + " | ".join(f"{t} (B) = plain nvcc A" for t in tools) + " |")
        L.append("|---|---|" + "---|" * len(tools))
        for obj, v in r["mismatch_explained"].items():
            L.append(f"| {obj} | {v['plain_a_equals_plain_b']} | "
                     + " | ".join(str(v.get(f"{t}_equals_plain_a")) for t in tools) + " |")
        L.append("")
    if r["dead_remote"]:
        L.append("## Dead remote (kache)\n")
        L.append("Breaker opening: a local miss (gcc, small C file, local cache emptied before each) asks the "
                 "remote; the failure is paid until 3 consecutive failures open the breaker (then the remote is "
                 "skipped for 30 s, after which one process probes it). With the breaker open, the same command "
                 "with the dead remote and with none: alternating runs, the order swapped every round (the target "
                 "figure: the median of the paired differences), and hyperfine (`-N`, 3 warm-ups, "
                 "`env KACHE_REMOTE_STORAGE=...` in both commands; its runs are blocks, so load drift between "
                 "the blocks shows in its difference). `hit`: nvcc, tiny TU, a local hit. `miss`: gcc, small C "
                 "file, `kache -C` before each run (untimed).\n")
        L.append("| dead remote | first 4 compiles, ms (remote errors, timeouts, skipped after each) |")
        L.append("|---|---|")
        for label, res in r["dead_remote"].items():
            L.append(f"| {label} (`{res['url']}`) | " + ", ".join(
                f"{x['ms']:g} ({x.get('remote_errors')}, {x.get('remote_timeouts')}, {x.get('remote_skipped')})"
                for x in res["first_compiles"]) + " |")
        L.append("")
        L.append("| dead remote | compile | dead / none, median (paired) | added: median / mean of paired differences | "
                 "CPU (user+sys) added, median of paired differences | remote skipped | hyperfine dead / none, median | "
                 "hyperfine added |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for label, res in r["dead_remote"].items():
            for what, v in res.get("pairs", {}).items():
                pr, hf = v["paired"], v.get("hyperfine")
                L.append(f"| {label} | {what} | {fmt(pr['dead_median_ms'], 'ms')} / {fmt(pr['none_median_ms'], 'ms')} | "
                         f"{pr['delta_median_ms']:+.2f} ms / {pr['delta_mean_ms']:+.2f} ms | "
                         f"{pr['delta_cpu_median_ms']:+.2f} ms | "
                         f"{pr['stats'].get('remote_skipped')} of {pr['rounds']} | "
                         + (f"{fmt(hf['dead']['median_ms'], 'ms')} / {fmt(hf['none']['median_ms'], 'ms')} | "
                            f"{hf['delta_median_ms']:+.2f} ms |" if hf else "– | – |"))
        L.append("")
    L.append("## Targets\n")
    L.append("| target | goal | value | result |")
    L.append("|---|---|---:|---|")
    for t in r["targets"]:
        L.append(f"| {t['target']} | {t['goal']} | {t['value']} | {'PASS' if t['pass'] else '**FAIL**'} |")
    L.append("")
    if r["anomalies"]:
        L.append("## Anomalies\n")
        L += [f"- {x}" for x in r["anomalies"]]
        L.append("")
    return "\n".join(L)


def draw_png(r: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"kache": "#2ca02c", "ccache": "#1f77b4", "sccache": "#ff7f0e"}
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    tools = [t for t in ("kache", "ccache", "sccache") if t in r["builds"]]
    keys = [(k, lab.split(":")[0].replace(" (", "\n(").replace(", primed", "\nprimed")) for k, lab in ROWS]
    w = 0.8 / max(1, len(tools))
    ax = axes[0]
    for i, t in enumerate(tools):
        xs, ys = [], []
        for g, (k, _) in enumerate(keys):
            v = r["builds"][t].get(k, {}).get("median_s")
            if v:
                xs.append(g + (i - (len(tools) - 1) / 2) * w)
                ys.append(v)
        bars = ax.bar(xs, ys, w, label=t, color=colors[t])
        for rect, y in zip(bars, ys):
            ax.annotate(f"{y:.2f}", (rect.get_x() + rect.get_width() / 2, y), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")
    nv = r["builds"].get("nvcc", {}).get("cold", {}).get("median_s")
    if nv:
        ax.axhline(nv, color="#7f7f7f", ls="--", lw=1, label=f"plain nvcc cold build {nv:.0f} s")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([lab for _, lab in keys], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("wall time, s (log)")
    ax.set_title(f"{r['config']['tus']} TUs, ninja -j {r['config']['jobs']}: fill, warm local, warm remote "
                 "(empty local cache, new checkout path)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3, which="both")
    ax = axes[1]
    labels, dead, none = [], [], []
    for label, res in r["dead_remote"].items():
        for what, v in res.get("pairs", {}).items():
            labels.append(f"{label.replace(' (', chr(10) + '(')}\n{what}")
            dead.append(v["paired"]["dead_median_ms"])
            none.append(v["paired"]["none_median_ms"])
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], none, 0.4, label="no remote", color="#9edae5")
    ax.bar([x + 0.2 for x in xs], dead, 0.4, label="dead remote, breaker open", color="#d62728")
    deltas = [v["paired"]["delta_median_ms"] for res in r["dead_remote"].values() for v in res.get("pairs", {}).values()]
    for x, d, n, dd in zip(xs, dead, none, deltas):
        ax.annotate(f"{dd:+.2f} ms", (x, max(d, n)), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("per compile, ms (median, log)")
    ax.set_title("kache with a dead remote (target: < 5 ms added)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    m = r["machine"]
    fig.suptitle(f"kache remote storage · {m['date'][:10]} · {m['cpu']} ×{m['cores_usable']} · load {m['loadavg_start']}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 TUs (1 thrust+cub), 2 repetitions")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--work", default=None, help="scratch directory (default OUT/tmp/remote; wiped at start)")
    ap.add_argument("--tools", default="kache,ccache,sccache")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--kache", default=os.path.join(REPO, "build", "kache"))
    ap.add_argument("--tiny", type=int, help="tiny kernel TUs (default 16; quick 3)")
    ap.add_argument("--thrust", type=int, help="thrust+cub TUs (default 2; quick 1)")
    ap.add_argument("--reps", type=int, help="warm rebuild repetitions (default 3; quick 2)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--same-machine-identities", action="store_true",
                    help="do not give the toolchain's headers new identities before each warm-remote build")
    ap.add_argument("--name", default="remote")
    ap.add_argument("--no-s3", action="store_true", help="no S3 backend (Swift is not started)")
    ap.add_argument("--no-dead", action="store_true", help="skip the dead-remote measurements")
    args = ap.parse_args()
    q = args.quick
    args.tiny = args.tiny if args.tiny is not None else (3 if q else 16)
    args.thrust = args.thrust if args.thrust is not None else (1 if q else 2)
    args.reps = args.reps or (2 if q else 3)
    args.dead_hit_runs, args.dead_miss_runs = (10, 10) if q else (30, 30)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    args.kache = os.path.abspath(args.kache)
    if not os.access(args.kache, os.X_OK):
        sys.exit(f"kache binary not found: {args.kache} (build it, or pass --kache)")
    for exe in ["ninja", "hyperfine", "ccache", "sccache", "gcc"]:
        if not shutil.which(exe):
            sys.exit(f"{exe} not found on PATH")
    for srv in ("redis-server", "nginx"):
        if servers.missing(srv):
            sys.exit(servers.missing(srv))
    out = os.path.abspath(args.out)
    args.work = args.work or os.path.join(out, "tmp", "remote")
    os.makedirs(out, exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    results = Scenario(args).run()
    bench.write_results(out, args.name, results, report_md(results), draw_png)
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
