#!/usr/bin/python3
"""kache benchmark, mixed C++/CUDA project (issue 9) and sharing across build dirs/checkouts (issue 10).

Plain compilers (g++ and nvcc), ccache, sccache and kache, each in front of both g++ and nvcc, build
the project of bench/mixedproject.py (CMake-style build directories: absolute -I and source paths, a
generated header in the build directory). Scenarios, in this order:
  cold          empty cache, new build directory
  warm          build directory removed and written again (a clean + configure), rebuilt from the cache
  builddir2     a second build directory of the same checkout (fresh), built warm
  checkout2     the checkout copied to another absolute path (sources only), the first one deleted, a
                fresh build directory there, built warm
  cpp-hit       per-invocation latency of one C++ TU's hit, hyperfine -N, ccache/sccache/kache in one run
  cpp-miss      per-invocation cold compile of fresh copies of one C++ TU, tools interleaved; kache's own
                CPU time per miss (its log) besides
ccache gets CCACHE_BASEDIR and kache KACHE_PATHS_BASE_DIRS set to the checkout root (the one in use);
sccache 0.4 has no base directory setting and runs with its defaults.

Run through run.py (`bash bench/run.sh --scenarios mixed`) or alone: /usr/bin/python3 bench/mixed.py [--quick].
Writes OUT/mixed.json, OUT/mixed.md, OUT/mixed.png. Asserts nothing about time; compares every object
with the plain build's by section and reports mismatches as anomalies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mixedproject  # noqa: E402
import run as core  # noqa: E402  (the tool classes, object comparison and machine facts)

TOOLS = ["plain", "ccache", "sccache", "kache"]
CACHED = ["ccache", "sccache", "kache"]

# Targets of issue 9 (C/C++ through kache).
TARGET_HIT_RATIO_VS_CCACHE_DIRECT = 0.5
TARGET_MISS_OVERHEAD_PCT = 3.0

log = core.log
median = core.median
loadavg = core.loadavg


class MixedBench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.root = os.path.join(self.work, "checkout")  # moved for checkout2
        self.nvcc = shutil.which("nvcc")
        self.cxx = shutil.which("g++")
        if not self.nvcc or not self.cxx:
            sys.exit("nvcc and g++ must be on PATH")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CCACHE_", "SCCACHE_", "KACHE_", "RUSTC_WRAPPER"))
               and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH", "CPLUS_INCLUDE_PATH")}
        self.env = env
        self.tools = {
            "plain": core.Nvcc(self.work, env),
            "ccache": core.Ccache(self.work, env),
            "sccache": core.Sccache(self.work, env),
            "kache": core.Kache(self.work, env, args.kache),
        }
        self.tools = {k: v for k, v in self.tools.items() if k in args.tools}
        for tool, note in (("ccache", "CCACHE_BASEDIR = the checkout root"),
                           ("kache", "KACHE_PATHS_BASE_DIRS = the checkout root"),
                           ("sccache", "no base directory setting in sccache 0.4")):
            if tool in self.tools:
                self.tools[tool].notes.append(note)
        self.set_root(self.root)
        self.r: dict = {"scenarios": {}, "correctness": {}, "anomalies": [], "cpp_hit": {}, "cpp_miss": {}}

    def set_root(self, root: str) -> None:
        self.root = root
        self.env["CCACHE_BASEDIR"] = root
        self.env["KACHE_PATHS_BASE_DIRS"] = root

    def anomaly(self, msg: str) -> None:
        log("ANOMALY: " + msg)
        self.r["anomalies"].append(msg)

    def launcher(self, tool: str) -> list[str]:
        return self.tools[tool].launcher

    # -- builds ------------------------------------------------------------------------------------

    def build_dir(self, tool: str, variant: str = "build") -> str:
        return os.path.join(self.root, f"{variant}-{tool}")

    def configure(self, tool: str, variant: str = "build") -> str:
        d = self.build_dir(tool, variant)
        shutil.rmtree(d, ignore_errors=True)
        mixedproject.write_build(self.root, d, self.units, shlex.join(self.launcher(tool)), self.cxx, self.nvcc)
        return d

    def ninja(self, tool: str, d: str, scenario: str, rep: int) -> dict:
        t = self.tools[tool]
        t.zero()
        logf = os.path.join(self.work, "logs", f"{scenario}-{tool}-{rep}.log")
        la = loadavg()
        cpu0 = core.children_cpu_s() + t.cpu_s()
        start = time.perf_counter()
        with open(logf, "w") as f:
            p = subprocess.run(["ninja", "-C", d, "-j", str(self.args.jobs)], env=self.env, stdout=f,
                               stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
        cpu = core.children_cpu_s() + t.cpu_s() - cpu0
        with open(logf) as f:
            steps = len(re.findall(r"^\[\d+/\d+\] ", f.read(), re.M))
        stats = t.stats()
        if p.returncode != 0:
            self.anomaly(f"{tool}: {scenario} build failed (ninja exit {p.returncode}), see {logf}")
        if steps != len(self.units):
            self.anomaly(f"{tool}: {scenario} ran {steps} compile steps, expected {len(self.units)}")
        log(f"  {scenario:9s} {tool:8s} {wall:8.2f} s (cpu {cpu:7.2f} s, load {la[0] if la else '?'})  steps={steps} "
            f"hits={stats.get('hits')} misses={stats.get('misses')} uncached={stats.get('uncached')}")
        return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "steps": steps, "ok": p.returncode == 0,
                "stats": stats, "loadavg_before": la, "build_dir": d}

    def scenario(self, name: str, variant: str, reps: dict[str, int], clear: bool = False) -> None:
        out = {}
        for tool in self.tools:
            if not reps.get(tool):
                continue
            runs = []
            for rep in range(reps[tool]):
                if clear:
                    self.tools[tool].clear()
                d = self.configure(tool, variant)
                runs.append(self.ninja(tool, d, name, rep))
            out[tool] = {"runs": runs, "median_s": median([x["wall_s"] for x in runs if x["ok"]]),
                         "median_cpu_s": median([x["cpu_s"] for x in runs if x["ok"]])}
        self.r["scenarios"][name] = out

    def compare(self, scenario: str, ref: tuple[str, str], variant: str,
                extra: dict[str, tuple[str, str, str]] | None = None) -> None:
        """Each cached tool's objects against the plain build's (ref = (build dir, checkout root)); extra
        holds baseline pairs of plain builds (label -> (objects dir, the build dir and root they were
        built in)). An object that differs only in how it spells paths in its strings (__FILE__: plain
        nvcc writes the absolute source path, ccache's base_dir makes it relative, kache's prefix map
        writes /kache/src/...) is counted apart from a real mismatch, which is an anomaly."""
        res = {}
        for label, (d, built_in, root) in (extra or {}).items():
            res[label] = compare_objects(self.units, (d, built_in, root), (ref[0], ref[0], ref[1]))
        for tool in self.tools:
            if tool == "plain":
                continue
            d = self.build_dir(tool, variant)
            c = compare_objects(self.units, (ref[0], ref[0], ref[1]), (d, d, self.root))
            res[tool] = c
            log(f"  objects {scenario}: {tool} vs plain: {c['identical']}/{c['objects']} identical by section, "
                f"{len(c['path_spelling_only'])} differing only in path strings")
            bad = len(c["mismatched"]) + len(c["missing"])
            if bad:
                msg = (f"{tool}: after '{scenario}', {bad} of {c['objects']} objects differ from the plain build's "
                       "beyond path strings: " + ", ".join(m["object"] for m in c["mismatched"][:6]) + (" ..." if bad > 6 else ""))
                self.anomaly(("KACHE OBJECT MISMATCH! " if tool == "kache" else "") + msg)
        for label, c in res.items():
            if label not in self.tools and (c["mismatched"] or c["missing"]):
                self.anomaly(f"{label}: {len(c['mismatched'])} objects differ beyond path strings "
                             "(plain builds not reproducible)")
        self.r["correctness"][scenario] = res

    def run_builds(self) -> None:
        a = self.args
        n = len(self.units)
        log(f"cold build ({n} TUs, ninja -j {a.jobs})")
        self.scenario("cold", "build", {t: 1 for t in self.tools}, clear=True)
        snap = os.path.join(self.work, "plain-cold-objects")
        if "plain" in self.tools:
            shutil.copytree(os.path.join(self.build_dir("plain"), "CMakeFiles"), os.path.join(snap, "CMakeFiles"))
        log("warm rebuild (build directory removed and configured again)")
        self.scenario("warm", "build", {t: (1 if t == "plain" else a.build_reps) for t in self.tools})
        if "plain" in self.tools:
            self.compare("warm", (self.build_dir("plain"), self.root), "build",
                         {"plain(cold) vs plain(warm)": (snap, self.build_dir("plain"), self.root)})

        log("second build directory of the same checkout")
        self.scenario("builddir2", "other-build", {t: 1 for t in self.tools if t != "plain"})
        if "plain" in self.tools:
            self.compare("builddir2", (self.build_dir("plain"), self.root), "other-build")

        log("second checkout: sources copied to another absolute path, the first checkout deleted")
        first_plain = os.path.join(self.work, "plain-first-checkout-objects")
        if "plain" in self.tools:
            shutil.copytree(os.path.join(self.build_dir("plain"), "CMakeFiles"), os.path.join(first_plain, "CMakeFiles"))
        old = self.root
        first_plain_built_in = self.build_dir("plain")
        new = os.path.join(self.work, "elsewhere", "second-checkout")
        shutil.copytree(old, new, ignore=lambda d, names: [x for x in names if d == old and "build-" in x])
        shutil.rmtree(old)
        self.set_root(new)
        self.r["checkout2"] = {"first": old, "second": new}
        self.scenario("checkout2", "build", {t: 1 for t in self.tools})
        if "plain" in self.tools:
            self.compare("checkout2", (self.build_dir("plain"), self.root), "build",
                         {"plain(first checkout) vs plain(second checkout)": (first_plain, first_plain_built_in, old)})

    # -- per invocation ----------------------------------------------------------------------------

    def lat_dir(self) -> str:
        d = os.path.join(self.root, "build-lat")
        mixedproject.write_gen_header(d)
        return d

    def run_cpp_hit(self) -> None:
        a = self.args
        u = self.lat_unit
        d = self.lat_dir()
        cmds = {}
        for tool in self.tools:
            if tool == "plain":
                continue
            obj = f"lat-{tool}/{u.name}.o"
            os.makedirs(os.path.join(d, f"lat-{tool}"), exist_ok=True)
            cmd = mixedproject.cxx_command(self.launcher(tool), self.cxx, self.root, d, u.src, obj)
            p = subprocess.run(cmd, cwd=d, env=self.env, capture_output=True, text=True)  # fill
            if p.returncode != 0:
                self.anomaly(f"{tool}: C++ hit-latency fill failed: {p.stderr[-400:]}")
                continue
            self.tools[tool].zero()
            cmds[tool] = cmd
        if not cmds:
            return
        jf = os.path.join(self.work, "logs", "cpp-hit.json")
        server0 = {t: self.tools[t].cpu_s() for t in cmds}
        hp = subprocess.run(["hyperfine", "-N", "--style", "none", "--warmup", str(a.hit_warmup), "--runs",
                             str(a.hit_runs), "--export-json", jf] + [shlex.join(c) for c in cmds.values()],
                            cwd=d, env=self.env, capture_output=True, text=True)
        if hp.returncode != 0:
            self.anomaly(f"C++ hit latency: hyperfine failed: {hp.stderr[-500:]}")
            return
        with open(jf) as f:
            results = json.load(f)["results"]
        expected = a.hit_runs + a.hit_warmup
        for (tool, cmd), h in zip(cmds.items(), results):
            t = self.tools[tool]
            stats = t.stats()
            times = [x * 1000 for x in h["times"]]
            server_ms = (t.cpu_s() - server0[tool]) * 1000 / expected
            if stats.get("hits") != expected:
                self.anomaly(f"{tool}: C++ hit latency: {stats.get('hits')} hits of {expected} invocations "
                             f"(misses={stats.get('misses')}, uncached={stats.get('uncached')})")
            if tool == "ccache" and stats.get("direct_hits") != expected:
                self.anomaly(f"ccache: C++ hit latency: {stats.get('direct_hits')} direct-mode hits of {expected}")
            self.r["cpp_hit"][tool] = {
                "median_ms": round(statistics.median(times), 3), "mean_ms": round(h["mean"] * 1000, 3),
                "min_ms": round(min(times), 3), "max_ms": round(max(times), 3),
                "cpu_ms": round(((h.get("user") or 0) + (h.get("system") or 0)) * 1000 + server_ms, 3),
                "runs": len(times), "stats": stats, "command": shlex.join(cmd), "loadavg_after": loadavg()}
            log(f"  C++ hit {tool:8s} median {self.r['cpp_hit'][tool]['median_ms']:7.2f} ms "
                f"(min {min(times):.2f}, hits {stats.get('hits')}/{expected})")

    def run_cpp_miss(self) -> None:
        """Fresh copies of one C++ TU (a uniquely named empty namespace appended, so that sccache, which
        keys on preprocessed output, misses too), tools in a rotating order. No cache is emptied between
        runs: each copy is new content, so every run misses (the statistics are checked), and kache keeps
        its toolchain memo as in an edit-compile loop (`kache --clear` drops it, and the next compile
        probes g++ again: measured apart, after the loop)."""
        a = self.args
        u = self.lat_unit
        d = self.lat_dir()
        with open(os.path.join(self.root, u.src)) as f:
            base = f.read()
        tools = list(self.tools)
        plan = []
        for rep in range(a.miss_reps):
            for tool in tools[rep % len(tools):] + tools[:rep % len(tools)]:
                src = f"src/cpp/miss_{tool}_{rep}.cpp"
                with open(os.path.join(self.root, src), "w") as f:
                    f.write(base + f"\nnamespace kb_bench_miss_{tool}_{rep}_{time.time_ns()} {{}}\n")
                plan.append((rep, tool, src))
        time.sleep(2.0)
        runs: dict = {t: [] for t in tools}
        for rep, tool, src in plan:
            t = self.tools[tool]
            t.zero()
            obj = f"miss-{tool}/{os.path.basename(src)}.o"
            os.makedirs(os.path.join(d, f"miss-{tool}"), exist_ok=True)
            cmd = mixedproject.cxx_command(self.launcher(tool), self.cxx, self.root, d, src, obj)
            la = loadavg()
            cpu0 = core.children_cpu_s() + t.cpu_s()
            start = time.perf_counter_ns()
            p = subprocess.run(cmd, cwd=d, env=self.env, capture_output=True, text=True)
            ms = (time.perf_counter_ns() - start) / 1e6
            cpu_ms = (core.children_cpu_s() + t.cpu_s() - cpu0) * 1000
            stats = t.stats()
            if p.returncode != 0:
                self.anomaly(f"{tool}: C++ miss compile failed: {p.stderr[-400:]}")
                continue
            if tool != "plain" and stats.get("misses") != 1:
                self.anomaly(f"{tool}: C++ miss rep {rep} was not counted as one miss: {stats}")
            runs[tool].append({"ms": round(ms, 2), "cpu_ms": round(cpu_ms, 1), "rep": rep, "loadavg_before": la})
            log(f"  C++ miss rep {rep} {tool:8s} {ms:8.1f} ms (cpu {cpu_ms:8.1f} ms, load {la[0] if la else '?'})")
        ref = median([x["ms"] for x in runs.get("plain", [])])
        cref = median([x["cpu_ms"] for x in runs.get("plain", [])])
        for tool in tools:
            m = median([x["ms"] for x in runs[tool]])
            cm = median([x["cpu_ms"] for x in runs[tool]])
            self.r["cpp_miss"][tool] = {
                "median_ms": round(m, 2) if m else None, "median_cpu_ms": round(cm, 1) if cm else None,
                "overhead_pct": round((m / ref - 1) * 100, 2) if (m and ref) else None,
                "cpu_overhead_pct": round((cm / cref - 1) * 100, 2) if (cm and cref) else None,
                "runs": runs[tool]}
        if "kache" in self.tools:
            self.run_kache_after_clear(base, d, ref)
            self.run_kache_own_cpu(base, d, cref)

    def run_kache_after_clear(self, base: str, d: str, plain_ms: float | None) -> None:
        """The first miss after `kache --clear`: the toolchain memo is gone, so kache probes g++ again
        (--version, -dumpmachine, -print-prog-name, an empty -E -v per language) before compiling."""
        t = self.tools["kache"]
        vals, cpus = [], []
        reps = max(2, self.args.miss_reps // 2)
        for rep in range(reps):
            with open(os.path.join(self.root, f"src/cpp/cleared_{rep}.cpp"), "w") as f:
                f.write(base + f"\nnamespace kb_bench_cleared_{rep}_{time.time_ns()} {{}}\n")
        time.sleep(2.0)  # older than the racy-timestamp window: a miss is stored, as in the runs above
        for rep in range(reps):
            src = f"src/cpp/cleared_{rep}.cpp"
            t.clear()
            os.makedirs(os.path.join(d, "cleared"), exist_ok=True)
            cmd = mixedproject.cxx_command(self.launcher("kache"), self.cxx, self.root, d, src, f"cleared/{rep}.o")
            cpu0 = core.children_cpu_s()
            start = time.perf_counter_ns()
            p = subprocess.run(cmd, cwd=d, env=self.env, capture_output=True, text=True)
            ms = (time.perf_counter_ns() - start) / 1e6
            if p.returncode != 0:
                self.anomaly(f"kache after --clear: compile failed: {p.stderr[-300:]}")
                continue
            vals.append(ms)
            cpus.append((core.children_cpu_s() - cpu0) * 1000)
            log(f"  C++ miss after kache --clear: {ms:8.1f} ms (cpu {cpus[-1]:.1f} ms)")
        m = median(vals)
        self.r["cpp_miss_kache_after_clear"] = {
            "runs_ms": [round(v, 1) for v in vals], "median_ms": round(m, 1) if m else None,
            "median_cpu_ms": round(median(cpus), 1) if cpus else None,
            "overhead_pct": round((m / plain_ms - 1) * 100, 2) if (m and plain_ms) else None}

    def run_kache_own_cpu(self, base: str, d: str, plain_cpu_ms: float | None) -> None:
        """kache's own CPU time per C++ miss (the kache process, all threads, logged at exit under
        KACHE_LOG=kache=debug), without g++ and cc1plus: the part of a miss kache adds. Toolchain memo
        warm, as in the miss runs."""
        t = self.tools["kache"]
        u = self.lat_unit
        vals = []
        for rep in range(self.args.own_reps):
            with open(os.path.join(self.root, f"src/cpp/own_{rep}.cpp"), "w") as f:
                f.write(base + f"\nnamespace kb_bench_own_{rep}_{time.time_ns()} {{}}\n")
        # Written up front and left 2 s: a file changed (ctime) just before the compile is within kache's
        # racy-timestamp window, and the miss is then not stored (`input-changed`), a shorter path.
        time.sleep(2.0)
        for rep in range(self.args.own_reps):
            src = f"src/cpp/own_{rep}.cpp"
            logf = os.path.join(self.work, "logs", f"cpp-own-{rep}.log")
            env = dict(self.env, KACHE_LOG="kache=debug", KACHE_LOG_FILE=logf)
            cmd = mixedproject.cxx_command(self.launcher("kache"), self.cxx, self.root, d, src, f"own/{u.name}_{rep}.o")
            os.makedirs(os.path.join(d, "own"), exist_ok=True)
            p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
            if p.returncode != 0:
                self.anomaly(f"kache own-CPU C++ run failed: {p.stderr[-300:]}")
                continue
            with open(logf) as f:
                text = f.read()
            m = re.search(r"own CPU time ([0-9.]+) ms", text)
            if not m or "miss: stored" not in text:
                self.anomaly(f"kache own-CPU C++ run {rep}: no stored miss or no CPU line in its log: "
                             + " | ".join(text.strip().splitlines())[-400:])
                continue
            vals.append(float(m.group(1)))
        m = median(vals)
        self.r["kache_own_cpu_per_cpp_miss"] = {
            "runs_ms": [round(v, 2) for v in vals], "median_ms": round(m, 2) if m else None,
            "pct_of_plain_compile_cpu": round(m / plain_cpu_ms * 100, 2) if (m and plain_cpu_ms) else None}
        log(f"  kache's own CPU per C++ miss: {vals} ms")

    # -- driver ------------------------------------------------------------------------------------

    def run(self) -> dict:
        a = self.args
        if os.path.exists(self.work):
            shutil.rmtree(self.work)
        os.makedirs(os.path.join(self.work, "logs"))
        machine_args = argparse.Namespace(kache=a.kache, kache_rev=a.kache_rev)
        self.r["machine"] = core.Bench.machine(argparse.Namespace(nvcc=self.nvcc, args=machine_args))
        self.units = mixedproject.generate(self.root, a.cpp, a.tiny, a.thrust)
        # the C++ TU measured per invocation: the first that includes both project headers
        self.lat_unit = next(u for u in self.units if u.kind == "cpp" and u.uses_math)
        self.r["config"] = {
            "quick": a.quick, "jobs": a.jobs, "tus": len(self.units),
            "cpp_tus": a.cpp, "tiny_tus": a.tiny, "thrust_tus": a.thrust,
            "cxxflags": mixedproject.CXXFLAGS, "cuflags": mixedproject.CUFLAGS,
            "example_cxx_command": shlex.join(mixedproject.cxx_command(
                ["LAUNCHER"], self.cxx, "/ROOT", "/ROOT/build-TOOL", self.units[0].src, self.units[0].obj)),
            "build_reps_cached_tools": a.build_reps, "hit_runs": a.hit_runs, "hit_warmup": a.hit_warmup,
            "miss_reps": a.miss_reps, "own_reps": a.own_reps, "latency_tu": self.lat_unit.src,
        }
        log(f"mixed: work dir {self.work}; {len(self.units)} TUs ({a.cpp} C++, {a.tiny} tiny CUDA, "
            f"{a.thrust} thrust+cub); tools {', '.join(self.tools)}")
        self.r["tools"] = {}
        try:
            for name, t in self.tools.items():
                t.setup()
                self.r["tools"][name] = {"version": t.version() if name != "plain" else
                                         f"plain {self.cxx} and {self.nvcc} (no cache)",
                                         "launcher": t.launcher, "notes": t.notes}
            self.run_builds()
            log("C++ hit latency (hyperfine, one run for all cached tools)")
            self.run_cpp_hit()
            log("C++ miss (cold compile of fresh copies, tools interleaved)")
            self.run_cpp_miss()
        finally:
            for t in self.tools.values():
                try:
                    t.teardown()
                except Exception as e:  # noqa: BLE001
                    log(f"teardown {t.name}: {e}")
        self.r["machine"]["loadavg_end"] = loadavg()
        self.r["targets"] = self.targets()
        self.r["duration_s"] = round(time.monotonic() - self.t0, 1)
        return self.r

    def targets(self) -> list[dict]:
        r = self.r
        out = []

        def sc(name, tool):
            return r["scenarios"].get(name, {}).get(tool, {}).get("median_s")

        k, c = sc("warm", "kache"), sc("warm", "ccache")
        out.append({"target": "warm rebuild (clean), wall", "goal": "kache <= ccache", "kache": k, "ccache": c,
                    "sccache": sc("warm", "sccache"), "unit": "s", "pass": None if None in (k, c) else k <= c})
        hit = {t: r["cpp_hit"].get(t, {}).get("median_ms") for t in CACHED}
        k, c = hit["kache"], hit["ccache"]
        out.append({"target": "C++ hit latency (median)",
                    "goal": f"kache <= {TARGET_HIT_RATIO_VS_CCACHE_DIRECT:g} x ccache's direct-mode hit"
                            + (f" = {c * TARGET_HIT_RATIO_VS_CCACHE_DIRECT:.2f} ms" if c else ""),
                    "kache": k, "ccache": c, "sccache": hit["sccache"], "unit": "ms",
                    "pass": None if None in (k, c) else k <= TARGET_HIT_RATIO_VS_CCACHE_DIRECT * c})
        ovh = {t: r["cpp_miss"].get(t, {}).get("overhead_pct") for t in CACHED}
        out.append({"target": "C++ miss overhead vs plain g++ (wall, median)",
                    "goal": f"<= {TARGET_MISS_OVERHEAD_PCT:g} %", "kache": ovh["kache"], "ccache": ovh["ccache"],
                    "sccache": ovh["sccache"], "unit": "%",
                    "pass": None if ovh["kache"] is None else ovh["kache"] <= TARGET_MISS_OVERHEAD_PCT})
        cov = {t: r["cpp_miss"].get(t, {}).get("cpu_overhead_pct") for t in CACHED}
        out.append({"target": "C++ miss overhead vs plain g++ (CPU time, median; less load-sensitive)",
                    "goal": f"<= {TARGET_MISS_OVERHEAD_PCT:g} %", "kache": cov["kache"], "ccache": cov["ccache"],
                    "sccache": cov["sccache"], "unit": "%",
                    "pass": None if cov["kache"] is None else cov["kache"] <= TARGET_MISS_OVERHEAD_PCT})
        own = r.get("kache_own_cpu_per_cpp_miss", {}).get("pct_of_plain_compile_cpu")
        out.append({"target": "kache's own CPU per C++ miss, share of plain g++'s CPU",
                    "goal": f"<= {TARGET_MISS_OVERHEAD_PCT:g} %", "kache": own, "unit": "%",
                    "pass": None if own is None else own <= TARGET_MISS_OVERHEAD_PCT})
        return out


# ---------------------------------------------------------------------------------------------------
# Object comparison that tells path spellings apart from real differences

KACHE_ROOT_NAMES = ("/kache/base0/", "/kache/build/", "/kache/src/", "/kache/out/")


def normalized_path_string(s: str, src: str, obj: str, build: str, root: str) -> str:
    """A string of an object's .rodata.str* sections with any path in it spelled one way: kache's fixed
    root names and paths relative to the build directory resolved, then the build directory and the
    checkout root replaced by placeholders."""
    for name, real in (("/kache/base0/", root), ("/kache/build/", build), ("/kache/src/", os.path.dirname(src)),
                       ("/kache/out/", os.path.dirname(os.path.join(build, obj)))):
        if s.startswith(name):
            s = os.path.join(real, s[len(name):])
    if s.startswith(("../", "./")):
        s = os.path.normpath(os.path.join(build, s))
    return s.replace(build.rstrip("/") + "/", "<BUILD>/").replace(root.rstrip("/") + "/", "<ROOT>/")


def object_digest_paths_normalized(path: str, src: str, obj: str, build: str, root: str) -> tuple[list, list]:
    other, strings = [], []
    for name, content in core.elf_sections(path):
        if not core.SECTION_RE.match(name):
            continue
        if name.startswith(".rodata.str"):
            strings += [normalized_path_string(x.decode("latin-1"), src, obj, build, root)
                        for x in content.split(b"\0") if x]
        else:
            other.append((name, hashlib.sha256(content).hexdigest()))
    return sorted(other), sorted(strings)


def compare_objects(units, a: tuple[str, str, str], b: tuple[str, str, str]) -> dict:
    """a and b: (directory holding the objects, build directory they were built in, checkout root)."""
    c = core.compare_dirs(a[0], b[0], units)
    c["path_spelling_only"] = []
    real = []
    by_obj = {u.obj: u for u in units}
    for m in c["mismatched"]:
        u = by_obj[m["object"]]
        da = object_digest_paths_normalized(os.path.join(a[0], u.obj), os.path.join(a[2], u.src), u.obj, a[1], a[2])
        db = object_digest_paths_normalized(os.path.join(b[0], u.obj), os.path.join(b[2], u.src), u.obj, b[1], b[2])
        if da == db:
            ex_a = sorted(set(x.decode("latin-1") for n, cc in core.elf_sections(os.path.join(a[0], u.obj))
                              if n.startswith(".rodata.str") for x in cc.split(b"\0") if b"/" in x))
            ex_b = sorted(set(x.decode("latin-1") for n, cc in core.elf_sections(os.path.join(b[0], u.obj))
                              if n.startswith(".rodata.str") for x in cc.split(b"\0") if b"/" in x))
            c["path_spelling_only"].append({"object": u.obj, "paths_a": ex_a[:4], "paths_b": ex_b[:4]})
        else:
            real.append(m)
    c["mismatched"] = real
    return c


# ---------------------------------------------------------------------------------------------------
# Reporting

fmt_num = core.fmt_num
ratio = core.ratio

SCENARIO_LABELS = {
    "cold": "cold build (empty cache)",
    "warm": "warm rebuild after clean",
    "builddir2": "second build directory, warm",
    "checkout2": "second checkout (first deleted), warm",
}


def pct(v) -> str:
    return "–" if v is None else f"{v:.2f} %"


def stats_cell(tool: str, s: dict) -> str:
    if tool == "plain":
        return "–"
    cell = f"{s.get('hits')} / {s.get('misses')} / {s.get('uncached')}"
    if tool == "ccache" and s.get("hits"):
        cell += f" (direct {s.get('direct_hits')})"
    if tool == "kache" and s.get("hits"):
        cell += f" (direct {s.get('direct_hits')})"
    return cell


def misses_by_kind(r: dict, scenario: str, tool: str) -> dict | None:
    """Which kinds of TU missed in a scenario, from the cache statistics (they have no per-TU list): the
    counts, checked against the number of CUDA and C++ TUs."""
    run = (r["scenarios"].get(scenario, {}).get(tool) or {}).get("runs")
    if not run:
        return None
    return {"misses": run[-1]["stats"].get("misses"), "hits": run[-1]["stats"].get("hits")}


def sharing_notes(r: dict) -> list[str]:
    c = r["config"]
    n_cuda = c["tiny_tus"] + c["thrust_tus"]
    out = []
    for sc, what in (("builddir2", "the second build directory"), ("checkout2", "the second checkout")):
        cc = misses_by_kind(r, sc, "ccache")
        if cc and cc["misses"] == n_cuda:
            out.append(f"ccache, {what}: {n_cuda} misses, as many as there are CUDA TUs. For nvcc compiles ccache "
                       "hashes the working directory (checked by hand on one CUDA TU: `CCACHE_DEBUG=1` logs `Hashing CWD <build dir>`; `hash_dir` is on "
                       "by default), so a CUDA object is keyed per build directory even with `base_dir`; its C++ "
                       "compiles share.")
        sc_ = misses_by_kind(r, sc, "sccache")
        if sc_ and sc_["misses"] == n_cuda:
            out.append(f"sccache, {what}: {n_cuda} misses, as many as there are CUDA TUs; its C++ compiles hit "
                       "(not investigated further: sccache 0.4 has no base-directory setting).")
        elif sc_ and sc_["misses"] == 0:
            out.append(f"sccache, {what}: no misses without a base-directory setting.")
    return out


def report_md(r: dict) -> str:
    tools = list(r["tools"])
    m, c = r["machine"], r["config"]
    L = ["# kache benchmark: mixed C++/CUDA project, sharing across build directories and checkouts\n"]
    L.append(f"{m['date']} · {m['cpu']} · {m['cores_usable']} cores · {m['ram']} RAM · Linux {m['kernel']} · {m['os']}  ")
    L.append(f"{m['nvcc_release']} · {m['host_compiler']} · {m['ccache']} · {m['sccache']} · {m['kache']} "
             f"(commit {m['kache_commit'][:12]})  ")
    L.append(f"Load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')} (shared 2-core machine; "
             f"each build and miss run records its own in the json). Total run time {r.get('duration_s', 0) / 60:.1f} min.  ")
    L.append(f"Command: `{m['command']}`\n")
    L.append(f"Project (`bench/mixedproject.py`): {c['tus']} TUs: {c['cpp_tus']} C++ (standard-library-heavy: "
             f"containers, algorithms, streams, regex, futures, variant; all include `proj/core.hpp` and the "
             f"generated `proj_config.h` in the build directory, half `proj/registry.hpp`), {c['tiny_tus']} tiny "
             f"CUDA kernels and {c['thrust_tus']} thrust+cub TUs (`bench/genproject.py`). CMake-style build "
             f"directories: absolute `-I` and source paths, objects below `CMakeFiles/`, compiles run in the "
             f"build directory; `ninja -j {c['jobs']}`. A C++ compile:\n\n    {c['example_cxx_command']}\n")
    L.append(f"Cached tools sit in front of both g++ and nvcc. ccache: `CCACHE_BASEDIR` = checkout root; kache: "
             f"`KACHE_PATHS_BASE_DIRS` = checkout root; sccache 0.4: no base-directory setting exists. Warm: median "
             f"of {c['build_reps_cached_tools']} for the cached tools, 1 run for plain; other builds 1 run. "
             f"C++ hit: one `hyperfine -N` run of all cached tools, {c['hit_warmup']} warm-up + {c['hit_runs']} "
             f"runs each, `{c['latency_tu']}`. C++ miss: {c['miss_reps']} interleaved runs per tool on fresh copies "
             f"of that TU (no cache emptied: each copy misses).\n")

    L.append("## Builds (wall time, ratio to plain in parentheses)\n")
    L.append("| scenario | " + " | ".join(tools) + " |")
    L.append("|---|" + "---:|" * len(tools))
    for sc, label in SCENARIO_LABELS.items():
        per = r["scenarios"].get(sc)
        if not per:
            continue
        ref = per.get("plain", {}).get("median_s")
        if sc == "builddir2":
            ref = r["scenarios"].get("warm", {}).get("plain", {}).get("median_s")
        cells = []
        for t in tools:
            v = per.get(t, {}).get("median_s")
            cells.append(fmt_num(v, "s") + (f" ({ratio(v, ref)})" if t != "plain" and v is not None else ""))
        L.append(f"| {label} | " + " | ".join(cells) + " |")
    L.append("| CPU time (" + " / ".join(s for s in SCENARIO_LABELS if s in r["scenarios"]) + ") | " + " | ".join(
        " / ".join(fmt_num(r["scenarios"][s].get(t, {}).get("median_cpu_s"), "s") for s in SCENARIO_LABELS
                   if s in r["scenarios"]) for t in tools) + " |")
    L.append("\nThe second build directory has no plain run of its own; its ratio is to plain's warm build.\n")

    L.append("## Cache statistics per build (hits / misses / uncached; last run)\n")
    cached = [t for t in tools if t != "plain"]
    L.append("| scenario | compile steps | " + " | ".join(cached) + " |")
    L.append("|---|---:|" + "---|" * len(cached))
    for sc, label in SCENARIO_LABELS.items():
        per = r["scenarios"].get(sc)
        if not per:
            continue
        steps = next((per[t]["runs"][-1]["steps"] for t in per if per[t]["runs"]), "")
        L.append(f"| {label} | {steps} | " + " | ".join(
            stats_cell(t, per[t]["runs"][-1]["stats"]) if t in per and per[t]["runs"] else "–" for t in cached) + " |")
    L.append("")

    L.append("## Sharing across build directories and checkouts (issue 10)\n")
    L.append(f"Second checkout: `{r.get('checkout2', {}).get('first')}` copied (sources only) to "
             f"`{r.get('checkout2', {}).get('second')}`, the first deleted, a fresh build directory configured "
             "there. Second build directory: `other-build-TOOL` beside `build-TOOL` in the first checkout.\n")
    L.append("| tool | second build dir: wall | hits / misses | second checkout: wall | hits / misses | objects = plain's (up to path strings) |")
    L.append("|---|---:|---|---:|---|---|")
    for t in tools:
        b2 = r["scenarios"].get("builddir2", {}).get(t)
        c2 = r["scenarios"].get("checkout2", {}).get(t)

        def hm(x):
            if not x or t == "plain":
                return "–"
            s = x["runs"][-1]["stats"]
            return f"{s.get('hits')} / {s.get('misses')}"

        objs = []
        for sc in ("builddir2", "checkout2"):
            cc = r["correctness"].get(sc, {}).get(t)
            if cc:
                objs.append(f"{cc['identical'] + len(cc.get('path_spelling_only', []))}/{cc['objects']}")
        L.append(f"| {t} | {fmt_num(b2['median_s'], 's') if b2 else '–'} | {hm(b2)} | "
                 f"{fmt_num(c2['median_s'], 's') if c2 else '–'} | {hm(c2)} | {', '.join(objs) or '–'} |")
    L.append("")

    notes = sharing_notes(r)
    if notes:
        L.append("Observed causes of the peers' misses:\n")
        L += [f"- {x}" for x in notes]
        L.append("")

    L.append("## C++ hit latency (hyperfine -N, one run)\n")
    L.append("| tool | median | min | mean | CPU (user+sys; sccache incl. server) | ÷ ccache |")
    L.append("|---|---:|---:|---:|---:|---:|")
    ccm = r["cpp_hit"].get("ccache", {}).get("median_ms")
    for t, v in r["cpp_hit"].items():
        L.append(f"| {t} | {fmt_num(v['median_ms'], 'ms')} | {fmt_num(v['min_ms'], 'ms')} | {fmt_num(v['mean_ms'], 'ms')} "
                 f"| {fmt_num(v['cpu_ms'], 'ms')} | {ratio(v['median_ms'], ccm)} |")
    pm = r["cpp_miss"].get("plain", {}).get("median_ms")
    if pm:
        L.append(f"| plain g++ (compile) | {fmt_num(pm, 'ms')} | | | {fmt_num(r['cpp_miss']['plain']['median_cpu_ms'], 'ms')} | |")
    L.append("")

    L.append("## C++ miss (cold compile of a fresh copy)\n")
    L.append("| tool | wall (median) | overhead vs plain g++ | CPU (median) | CPU overhead | runs (ms) |")
    L.append("|---|---:|---:|---:|---:|---|")
    for t, v in r["cpp_miss"].items():
        L.append(f"| {t} | {fmt_num(v['median_ms'], 'ms')} | {fmt_num(v['overhead_pct'], '%') if t != 'plain' else '–'} | "
                 f"{fmt_num(v['median_cpu_ms'], 'ms')} | {fmt_num(v['cpu_overhead_pct'], '%') if t != 'plain' else '–'} | "
                 + ", ".join(f"{x['ms']:.0f}" for x in v["runs"]) + " |")
    ac = r.get("cpp_miss_kache_after_clear")
    if ac:
        L.append(f"\nNo cache is emptied between these runs (each copy is new content, so each run misses; the "
                 f"statistics are checked), so kache's toolchain memo is warm, as in an edit-compile loop. The first "
                 f"miss after `kache --clear` probes g++ again (`--version`, `-dumpmachine`, `-print-prog-name=...`, "
                 f"`-print-file-name=specs`, an empty `-E -v` for C and for C++): median {fmt_num(ac['median_ms'], 'ms')} "
                 f"wall, {fmt_num(ac['median_cpu_ms'], 'ms')} CPU ({fmt_num(ac['overhead_pct'], '%')} vs plain g++'s "
                 f"median; runs {', '.join(f'{x:.0f}' for x in ac['runs_ms'])} ms).")
    own = r.get("kache_own_cpu_per_cpp_miss")
    if own:
        L.append(f"\nkache's own CPU time per C++ miss (the kache process alone, all threads, logged at exit under "
                 f"`KACHE_LOG=kache=debug`; fresh copies, toolchain memo warm): median {fmt_num(own['median_ms'], 'ms')} "
                 f"(runs {', '.join(f'{x:g}' for x in own['runs_ms'])} ms), {pct(own['pct_of_plain_compile_cpu'])} of "
                 f"plain g++'s CPU time for the compile.")
    L.append("")

    L.append("## Targets (issue 9; kache, peers for reference)\n")
    L.append("| target | goal | kache | ccache | sccache | result |")
    L.append("|---|---|---:|---:|---:|---|")
    for t in r.get("targets", []):
        res = "–" if t["pass"] is None else ("PASS" if t["pass"] else "**FAIL**")
        L.append(f"| {t['target']} | {t['goal']} | {fmt_num(t['kache'], t['unit'])} | {fmt_num(t.get('ccache'), t['unit'])} "
                 f"| {fmt_num(t.get('sccache'), t['unit'])} | {res} |")
    L.append("")

    if r.get("run_notes"):
        L.append("## Notes on this run\n")
        L += [f"- {x}" for x in r["run_notes"]]
        L.append("")

    L.append("## Objects compared with the plain build's, by section (.text* .data* .rodata* .nv_fatbin)\n")
    L.append("\"path strings only\": the object differs from plain's only in how a string names a path, once "
             "kache's root names (`/kache/src/...`) and paths relative to the build directory are resolved: "
             "`__FILE__` (the CUDA TUs' error macro) is the absolute source path under plain nvcc, relative under "
             "ccache's `base_dir` (it rewrites the command line), `/kache/src/<file>` under kache's prefix map. "
             "Anything else is \"differing\" and an anomaly.\n")
    L.append("| after | comparison | identical | path strings only | differing |")
    L.append("|---|---|---:|---:|---|")
    example = None
    for sc, res in r["correctness"].items():
        for name, cc in res.items():
            bad = [x["object"] for x in cc["mismatched"]] + [f"{x} (missing)" for x in cc["missing"]]
            label = name if name.startswith("plain(") else f"{name} vs plain"
            L.append(f"| {sc} | {label} | {cc['identical']}/{cc['objects']} | {len(cc.get('path_spelling_only', []))} | "
                     + (", ".join(bad[:6]) + (" …" if len(bad) > 6 else "") if bad else "none") + " |")
            if name == "kache" and cc.get("path_spelling_only") and not example:
                example = cc["path_spelling_only"][0]
    if example:
        L.append(f"\nExample (`{example['object']}`): plain's strings name {example['paths_a']}, kache's {example['paths_b']}.")
    L.append("")
    L += core.anomalies_and_tools_md(r)
    return "\n".join(L)


def draw_png(r: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tools = list(r["tools"])
    colors = {"plain": "#7f7f7f", "ccache": "#1f77b4", "sccache": "#ff7f0e", "kache": "#2ca02c"}
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.6), gridspec_kw={"width_ratios": [4, 2, 2]})

    def bars(ax, groups, series, getter, fmt, log_scale):
        w = 0.8 / max(1, len(series))
        for i, t in enumerate(series):
            xs, ys = [], []
            for g, key in enumerate(groups):
                v = getter(key, t)
                if v is not None:
                    xs.append(g + (i - (len(series) - 1) / 2) * w)
                    ys.append(v)
            b = ax.bar(xs, ys, w, label=t, color=colors.get(t))
            for rect, y in zip(b, ys):
                ax.annotate(fmt(y), (rect.get_x() + rect.get_width() / 2, y), ha="center",
                            va="bottom" if y >= 0 else "top", fontsize=7, rotation=90 if log_scale else 0,
                            xytext=(0, 2), textcoords="offset points")
        if log_scale:
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo, hi * 4)
        ax.grid(axis="y", alpha=0.3, which="both")

    c = r["config"]
    groups = [s for s in SCENARIO_LABELS if s in r["scenarios"]]
    bars(axes[0], groups, tools, lambda s, t: r["scenarios"][s].get(t, {}).get("median_s"),
         lambda y: f"{y:.2f}" if y < 10 else f"{y:.0f}", True)
    axes[0].set_xticks(range(len(groups)))
    axes[0].set_xticklabels(["cold", "warm\n(after clean)", "second\nbuild dir", "second checkout\n(first deleted)"][:len(groups)]
                            if groups == list(SCENARIO_LABELS)[:len(groups)] else groups, fontsize=8)
    axes[0].set_ylabel("wall time, s (log)")
    axes[0].set_title(f"Builds: {c['tus']} TUs ({c['cpp_tus']} C++, {c['tiny_tus'] + c['thrust_tus']} CUDA), "
                      f"ninja -j {c['jobs']}", fontsize=10)

    hit_tools = [t for t in tools if t in r["cpp_hit"]] + (["plain"] if "plain" in r["cpp_miss"] else [])
    vals = [r["cpp_hit"][t]["median_ms"] if t != "plain" else r["cpp_miss"]["plain"]["median_ms"] for t in hit_tools]
    b = axes[1].bar(range(len(hit_tools)), vals, color=[colors.get(t) for t in hit_tools])
    for rect, y in zip(b, vals):
        axes[1].annotate(f"{y:.2f}" if y < 100 else f"{y:.0f}", (rect.get_x() + rect.get_width() / 2, y),
                         ha="center", va="bottom", fontsize=8)
    axes[1].set_xticks(range(len(hit_tools)))
    axes[1].set_xticklabels([t if t != "plain" else "plain g++\n(compile)" for t in hit_tools], fontsize=8)
    ccm = r["cpp_hit"].get("ccache", {}).get("median_ms")
    if ccm:
        axes[1].axhline(ccm * TARGET_HIT_RATIO_VS_CCACHE_DIRECT, color="green", ls="--", lw=1,
                        label="target: 0.5 × ccache direct hit")
        axes[1].legend(fontsize=8, loc="upper left")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("ms per invocation (log)")
    axes[1].set_title("C++ hit latency (median)", fontsize=10)
    axes[1].grid(axis="y", alpha=0.3, which="both")

    miss_tools = [t for t in tools if t != "plain" and t in r["cpp_miss"]]
    keys = [("overhead_pct", "wall"), ("cpu_overhead_pct", "CPU")]
    w = 0.8 / max(1, len(miss_tools))
    for i, t in enumerate(miss_tools):
        for g, (key, _lab) in enumerate(keys):
            y = r["cpp_miss"][t].get(key)
            if y is None:
                continue
            rect = axes[2].bar([g + (i - (len(miss_tools) - 1) / 2) * w], [y], w, color=colors.get(t),
                               hatch="//" if key.startswith("cpu") else None)[0]
            axes[2].annotate(f"{y:+.1f}", (rect.get_x() + rect.get_width() / 2, y), ha="center",
                             va="bottom" if y >= 0 else "top", fontsize=7)
    own = r.get("kache_own_cpu_per_cpp_miss", {}).get("pct_of_plain_compile_cpu")
    if own is not None:
        rect = axes[2].bar([2], [own], 0.3, color=colors["kache"], hatch="..")[0]
        axes[2].annotate(f"{own:+.2f}", (rect.get_x() + rect.get_width() / 2, own), ha="center", va="bottom", fontsize=7)
    axes[2].axhline(TARGET_MISS_OVERHEAD_PCT, color="green", ls="--", lw=1)
    axes[2].axhline(0, color="black", lw=0.8)
    axes[2].set_xticks(range(3))
    axes[2].set_xticklabels(["wall", "CPU", "kache's own\nCPU"], fontsize=8)
    axes[2].set_ylabel("C++ miss vs plain g++, % (medians)")
    axes[2].set_title(f"C++ miss overhead (target ≤ {TARGET_MISS_OVERHEAD_PCT:g} %)", fontsize=10)
    axes[2].grid(axis="y", alpha=0.3)
    m = r["machine"]
    fig.suptitle(f"kache mixed C++/CUDA benchmark · {m['date'][:10]} · {m['cpu']} ×{m['cores_usable']} · "
                 f"load {m['loadavg_start'][:1]}→{(m.get('loadavg_end') or [None])[:1]}", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def set_defaults(args) -> None:
    """Fill the mixed scenarios' counts from --quick (run.py's options pass through here)."""
    q = args.quick
    args.cpp = args.cpp if getattr(args, "cpp", None) is not None else (12 if q else 40)
    args.mixed_tiny = getattr(args, "mixed_tiny", None)
    args.mixed_thrust = getattr(args, "mixed_thrust", None)
    args.tiny = args.mixed_tiny if args.mixed_tiny is not None else (4 if q else 8)
    args.thrust = args.mixed_thrust if args.mixed_thrust is not None else 0
    args.build_reps = 2 if q else 3
    args.hit_runs = 10 if q else 30
    args.hit_warmup = 2
    args.miss_reps = 3 if q else 7
    args.own_reps = 2 if q else 5


def run_and_write(args, out: str, stem: str) -> dict:
    bench = MixedBench(args)
    bench.t0 = time.monotonic()
    results = bench.run()
    core.write_results(out, stem, results, report_md(results), draw_png)
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    return results


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 12 C++ + 4 tiny CUDA TUs, fewer repetitions")
    ap.add_argument("--out", default=os.path.join(here, "results"))
    ap.add_argument("--work", default=None, help="scratch directory (default OUT/tmp/mixed; wiped at start)")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma list from plain,ccache,sccache,kache")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--kache", default=os.path.join(repo, "build", "kache"))
    ap.add_argument("--kache-rev", default=None)
    ap.add_argument("--cpp", type=int, help="C++ TUs (default 40; quick 12)")
    ap.add_argument("--mixed-tiny", type=int, help="tiny CUDA TUs (default 8; quick 4)")
    ap.add_argument("--mixed-thrust", type=int, help="thrust+cub TUs (default 0)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--name", default="mixed", help="results file stem (default mixed)")
    args = ap.parse_args()
    args.mixed_work = args.work
    run_from_args(args, os.path.abspath(args.out), args.name)


def run_from_args(args, out: str, stem: str) -> dict:
    """Entry point for run.py's --scenarios mixed (its args namespace) and for main()."""
    args = argparse.Namespace(**vars(args))  # run.py's own counts stay as they were
    set_defaults(args)
    tools = args.tools if isinstance(args.tools, list) else args.tools.split(",")
    args.tools = [t for t in TOOLS if t in ["plain" if x == "nvcc" else x.strip() for x in tools]]
    args.kache = os.path.abspath(args.kache)
    if "kache" in args.tools and not os.access(args.kache, os.X_OK):
        sys.exit(f"kache binary not found: {args.kache}")
    args.work = os.path.abspath(getattr(args, "mixed_work", None) or os.path.join(out, "tmp", "mixed"))
    os.makedirs(out, exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    return run_and_write(args, out, stem)


if __name__ == "__main__":
    main()
