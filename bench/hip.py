#!/usr/bin/python3
"""HIP benchmark: plain hipcc vs kache hipcc, and plain clang++-15 -x hip vs ccache vs kache (and sccache,
when it accepts -x hip) on one generated HIP project, at 1 and 4 --offload-arch targets.

  /usr/bin/python3 bench/hip.py --kache build/kache [--quick] [--jobs 2] [--targets 1,4]

Per target count: hipproject.py writes the project (tiny kernels + rocPRIM-like heavy TUs, every TU for the
same target list) and a CMake-style build.ninja per tool (genproject.write_ninja):
  cold  cache empty, build directory new, `ninja -j N`
  warm  build directory deleted and written again, rebuilt from the full cache (cached tools; a plain
        tool has no cache: its rebuild is its cold build); every object then `cmp`-ared with the plain
        tool's object of the same TU (kache hipcc against plain hipcc, the clang route against plain clang)
  hit   one tiny TU, filled once, then rounds of `hyperfine -N` with every cached tool's command in one
        run, the order rotating per round, so load drifts over all alike; the statistics must count every
        timed run as a hit; the plain compiles of the same TU are timed alternately (the miss reference)
sccache 0.4 is probed first with `clang++-15 -x hip` and with a bare .hip source: it runs the compiler
without caching (its statistics name the reason), so it gets no build row unless it caches.

Writes OUT/hip.json, OUT/hip.md and OUT/hip.png. A benchmark: it asserts nothing about time, but it
reports any object that differs from the plain tool's (KACHE OBJECT MISMATCH for kache).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genproject  # noqa: E402
import hipproject  # noqa: E402
import run as bench  # noqa: E402  (tool classes, timing helpers, write_results)

HIPCC = shutil.which("hipcc") or "/usr/bin/hipcc"
CLANG = shutil.which("clang++-15") or "/usr/bin/clang++-15"
CLANG_HIP = f"{CLANG} -x hip {hipproject.ROCM_FLAGS}"
HIT_TU = "tiny_001"  # a tiny TU without math.cuh


class Plain(bench.Tool):
    def __init__(self, name: str, work: str, env: dict):
        super().__init__(work, env)
        self.name = name

    def version(self) -> str:
        return "no cache"

    def stats(self) -> dict:
        return {"hits": 0, "misses": None, "uncached": None}


class HipTool:
    """One way of compiling HIP: a cache (or none) in front of hipcc or clang++-15 -x hip."""

    def __init__(self, name: str, cache: bench.Tool, compiler: str, reference: str):
        self.name, self.cache, self.compiler, self.reference = name, cache, compiler, reference

    @property
    def cached(self) -> bool:
        return not isinstance(self.cache, Plain)

    @property
    def env(self) -> dict:
        return self.cache.env

    def command(self, tu: genproject.TU, out: str) -> list[str]:
        return (self.cache.launcher + shlex.split(self.compiler) + hipproject.CFLAGS.split() + ["-I../include"]
                + tu.arch.split() + ["-c", f"../{tu.src}", "-o", out, "-MD", "-MF", out + ".d", "-MT", out])


def base_env() -> dict:
    drop = ("CCACHE_", "SCCACHE_", "KACHE_", "HIPCC_", "HIP_", "ROCM_", "HSA_", "DEVICE_LIB_PATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "CPATH"}


def make_tools(work: str, kache: str, with_sccache: bool) -> list[HipTool]:
    def own(name: str) -> tuple[str, dict]:
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        return d, base_env()

    tools = [HipTool("hipcc", Plain("hipcc", *own("hipcc")), HIPCC, "hipcc"),
             HipTool("kache hipcc", bench.Kache(*own("kache-hipcc"), kache), HIPCC, "hipcc"),
             HipTool("clang", Plain("clang", *own("clang")), CLANG_HIP, "clang"),
             HipTool("ccache clang", bench.Ccache(*own("ccache-clang")), CLANG_HIP, "clang"),
             HipTool("kache clang", bench.Kache(*own("kache-clang"), kache), CLANG_HIP, "clang")]
    if with_sccache:
        tools.append(HipTool("sccache clang", bench.Sccache(*own("sccache-clang")), CLANG_HIP, "clang"))
    for t in tools:
        t.cache.setup()
    return tools


def probe_sccache(work: str, proj: str, tu: genproject.TU) -> dict:
    """Two compiles of one TU through sccache per spelling (-x hip, and the bare .hip source): does it cache?"""
    d = os.path.join(work, "sccache-probe")
    os.makedirs(d, exist_ok=True)
    sc = bench.Sccache(d, base_env())
    for attempt in range(3):  # its server start times out after 10 s on a loaded machine
        try:
            sc.setup()
            break
        except RuntimeError as e:
            bench.log(f"sccache probe: {e}")
            if attempt == 2:
                return {"version": sc.version(), "caches": False, "error": str(e)}
    result = {"version": sc.version()}
    try:
        for label, compiler in (("clang++-15 -x hip", CLANG_HIP), ("clang++-15, .hip source", f"{CLANG} {hipproject.ROCM_FLAGS}")):
            sc.zero()
            tool = HipTool("sccache", sc, compiler, "clang")
            for _ in range(2):
                p = subprocess.run(tool.command(tu, "sccache-probe.o"), cwd=os.path.join(proj, "build"), env=sc.env,
                                   capture_output=True, text=True)
            st = sc.stats()
            result[label] = {"compiled": p.returncode == 0, "hits": st.get("hits"), "misses": st.get("misses"),
                             "not_cached": st.get("uncached_reasons")}
            bench.log(f"sccache probe, {label}: {result[label]}")
    finally:
        sc.teardown()
    result["caches"] = any(isinstance(v, dict) and (v.get("hits") or v.get("misses")) for v in result.values())
    return result


def cmp_same(a: str, b: str) -> bool:
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


class HipBench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.results: dict = {"anomalies": [], "runs": {}}

    def anomaly(self, msg: str) -> None:
        bench.log("ANOMALY: " + msg)
        self.results["anomalies"].append(msg)

    # -- builds ----------------------------------------------------------------------------------

    def build_dir(self, proj: str, tool: HipTool) -> str:
        return os.path.join(proj, "build-" + tool.name.replace(" ", "-"))

    def ninja(self, proj: str, tus: list, tool: HipTool, scenario: str, rep: int) -> dict:
        d = self.build_dir(proj, tool)
        shutil.rmtree(d, ignore_errors=True)
        genproject.write_ninja(d, tus, shlex.join(tool.cache.launcher), tool.compiler, hipproject.CFLAGS)
        tool.cache.zero()
        logf = os.path.join(self.work, "logs", f"{os.path.basename(proj)}-{scenario}-{d.rsplit('/', 1)[1]}-{rep}.log")
        la = bench.loadavg()
        cpu0 = bench.children_cpu_s() + tool.cache.cpu_s()
        start = time.perf_counter()
        with open(logf, "w") as f:
            p = subprocess.run(["ninja", "-C", d, "-j", str(self.args.jobs)], env=tool.env, stdout=f,
                               stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
        cpu = bench.children_cpu_s() + tool.cache.cpu_s() - cpu0
        st = tool.cache.stats()
        if p.returncode != 0:
            self.anomaly(f"{tool.name}: {scenario} build failed (ninja exit {p.returncode}), see {logf}")
        bench.log(f"  {scenario:5s} {tool.name:13s} {wall:8.2f} s (cpu {cpu:7.2f} s, load {la[0] if la else '?'}) "
                  f"hits={st.get('hits')} misses={st.get('misses')} uncached={st.get('uncached')}")
        return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "ok": p.returncode == 0, "stats": st,
                "loadavg_before": la}

    def compare(self, proj: str, tus: list, tools: list[HipTool], scenario: str) -> dict:
        """cmp of every object of each cached tool against its plain tool's object of the same TU."""
        by_name = {t.name: t for t in tools}
        out = {}
        for t in tools:
            if not t.cached:
                continue
            ref = self.build_dir(proj, by_name[t.reference])
            diff = [tu.name for tu in tus if not cmp_same(os.path.join(ref, tu.obj),
                                                          os.path.join(self.build_dir(proj, t), tu.obj))]
            out[t.name] = {"same": len(tus) - len(diff), "of": len(tus), "differ": diff}
            if diff:
                tag = "KACHE OBJECT MISMATCH" if t.name.startswith("kache") else "object mismatch"
                self.anomaly(f"{tag}: {t.name} {scenario} objects differ from {t.reference}'s: {diff}")
        return out

    def run_builds(self, proj: str, tus: list, tools: list[HipTool]) -> dict:
        rec: dict = {"cold": {}, "warm": {}}
        for t in tools:
            t.cache.clear()
            rec["cold"][t.name] = self.ninja(proj, tus, t, "cold", 0)
        rec["objects_cold"] = self.compare(proj, tus, tools, "cold")
        cached = [t for t in tools if t.cached]
        for rep in range(self.args.warm_reps):
            order = cached[rep % len(cached):] + cached[:rep % len(cached)]
            for t in order:
                rec["warm"].setdefault(t.name, []).append(self.ninja(proj, tus, t, "warm", rep))
        rec["objects_warm"] = self.compare(proj, tus, tools, "warm")
        return rec

    # -- hit latency -----------------------------------------------------------------------------

    def fill(self, tool: HipTool, cmd: list[str]) -> None:
        for _ in range(2):  # a second compile when the first could not record a direct-mode entry
            subprocess.run(cmd, env=tool.env, check=True, capture_output=True)
        tool.cache.zero()

    def hyperfine_round(self, cmds: list[tuple[HipTool, list[str]]], runs: int, name: str) -> dict:
        jf = os.path.join(self.work, "logs", f"{name}.json")
        argv = ["hyperfine", "-N", "--style", "none", "--warmup", "1", "--runs", str(runs), "--export-json", jf]
        for t, cmd in cmds:
            argv += ["--command-name", t.name, shlex.join(cmd)]
        p = subprocess.run(argv, env=base_env(), capture_output=True, text=True)
        if p.returncode != 0:
            self.anomaly(f"hyperfine failed: {p.stderr[-500:]}")
            return {}
        with open(jf) as f:
            return {r["command"]: r["times"] for r in json.load(f)["results"]}

    def hit_command(self, proj: str, tu, t: HipTool) -> list[str]:
        """The tool's build command for the TU, run in its build directory (so the warm build's entry and,
        for kache, its hipcc memo answer), behind `env -C DIR VAR=...`: one hyperfine runs every tool, each
        with its own cache variables and directory (the extra exec is the same for all)."""
        own = {k: v for k, v in t.env.items() if k.startswith(("CCACHE_", "SCCACHE_", "KACHE_"))}
        return (["/usr/bin/env", "-C", self.build_dir(proj, t)] + [f"{k}={v}" for k, v in sorted(own.items())]
                + t.command(tu, tu.obj))

    def run_hits(self, proj: str, tus: list, tools: list[HipTool]) -> dict:
        a = self.args
        tu = next(x for x in tus if x.name == HIT_TU)
        cmds = [(t, self.hit_command(proj, tu, t)) for t in tools if t.cached]
        for t, cmd in cmds:
            self.fill(t, cmd)
        times: dict[str, list[float]] = {t.name: [] for t, _ in cmds}
        loads = []
        for rnd in range(a.hit_rounds):
            order = cmds[rnd % len(cmds):] + cmds[:rnd % len(cmds)]
            loads.append(bench.loadavg())
            got = self.hyperfine_round(order, a.hit_runs, f"{os.path.basename(proj)}-hit-{rnd}")
            for name, ts in got.items():
                times[name] += [x * 1000 for x in ts]
        rec = {"tu": tu.src, "runs_per_round": a.hit_runs, "rounds": a.hit_rounds, "loadavg_per_round": loads,
               "tools": {}}
        for t, _ in cmds:
            st = t.cache.stats()
            expect = a.hit_rounds * (a.hit_runs + 1)
            rec["tools"][t.name] = {"ms": [round(x, 3) for x in times[t.name]], "median_ms": bench.median(times[t.name]),
                                    "min_ms": min(times[t.name]) if times[t.name] else None,
                                    "hits": st.get("hits"), "expected_hits": expect}
            if st.get("hits") != expect:
                self.anomaly(f"{t.name}: {st.get('hits')} hits of {expect} timed runs ({st})")
            ref = next(x for x in tools if x.name == t.reference)
            if not cmp_same(os.path.join(self.build_dir(proj, t), tu.obj), os.path.join(self.build_dir(proj, ref), tu.obj)):
                self.anomaly(f"{t.name}: the hit's object differs from {ref.name}'s build object")
        rec["plain"] = self.plain_compiles(proj, tu, [t for t in tools if not t.cached])
        return rec

    def plain_compiles(self, proj: str, tu, plains: list[HipTool]) -> dict:
        """The plain compiles of the hit TU in their build directories, alternating (the miss a hit saves)."""
        times: dict[str, list[float]] = {t.name: [] for t in plains}
        for rnd in range(self.args.plain_runs):
            for t in (plains if rnd % 2 == 0 else plains[::-1]):
                cmd = t.command(tu, tu.obj)
                start = time.perf_counter()
                subprocess.run(cmd, cwd=self.build_dir(proj, t), env=t.env, check=True, capture_output=True)
                times[t.name].append((time.perf_counter() - start) * 1000)
        return {n: {"ms": [round(x, 1) for x in ts], "median_ms": bench.median(ts)} for n, ts in times.items()}

    # -- the whole run ---------------------------------------------------------------------------

    def run(self) -> dict:
        a = self.args
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(os.path.join(self.work, "logs"))
        t0 = time.monotonic()
        self.results["machine"] = self.machine()
        self.results["params"] = {k: v for k, v in vars(a).items()}
        for n in a.targets:
            targets = hipproject.ALL_TARGETS[:n]
            proj = os.path.join(self.work, f"proj-{n}")
            tus = hipproject.generate(proj, a.tiny, a.heavy, targets)
            genproject.write_ninja(os.path.join(proj, "build"), tus, "", HIPCC, hipproject.CFLAGS)
            time.sleep(2)  # sources older than the racy-clean margin, so the first compile records direct-mode entries
            if "sccache" not in self.results:
                self.results["sccache"] = probe_sccache(self.work, proj, tus[0])
            bench.log(f"{n} target(s) {targets}: {len(tus)} TUs")
            tools = make_tools(os.path.join(self.work, f"tools-{n}"), a.kache, self.results["sccache"]["caches"])
            try:
                rec = {"targets": targets, "tus": {"tiny": a.tiny, "heavy": a.heavy}}
                rec["builds"] = self.run_builds(proj, tus, tools)
                self.results["runs"][str(n)] = rec
                rec["hit"] = self.run_hits(proj, tus, tools)
            finally:
                for t in tools:
                    t.cache.teardown()
            self.checkpoint()
        self.results["duration_s"] = round(time.monotonic() - t0, 1)
        self.results["machine"]["loadavg_end"] = bench.loadavg()
        partial = os.path.join(a.out, f"{a.name}.partial.md")
        if os.path.exists(partial):
            os.remove(partial)
        if not a.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        return self.results

    def checkpoint(self) -> None:
        """The report so far (each finished target count), in case the run is cut short."""
        r = dict(self.results, duration_s=0.0, machine=dict(self.results["machine"], loadavg_end=bench.loadavg()))
        with open(os.path.join(self.args.out, f"{self.args.name}.partial.md"), "w") as f:
            f.write(report_md(r))

    def machine(self) -> dict:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["/usr/bin/python3"] + sys.argv),
            "cores": os.cpu_count(),
            "kernel": os.uname().release,
            "hipcc": bench.first_line([HIPCC, "--version"]),
            "clang": bench.first_line([CLANG, "--version"]),
            "ccache": bench.first_line(["ccache", "--version"]),
            "sccache": bench.first_line(["sccache", "--version"]),
            "kache": bench.first_line([self.args.kache, "--version"]),
            "kache_commit": bench.first_line(["git", "-C", repo, "rev-parse", "--short", "HEAD"]),
            "hyperfine": bench.first_line(["hyperfine", "--version"]),
            "ninja": bench.first_line(["ninja", "--version"]),
            "loadavg_start": bench.loadavg(),
            "note": "shared 2-core machine, loaded by other builds: the ratios from interleaved runs are the "
                    "meaningful figures; each build records the load average before it",
        }


# ---------------------------------------------------------------------------------------------------
# Report

def fmt_s(v) -> str:
    return "–" if v is None else (f"{v:.3f} s" if v < 10 else f"{v:.1f} s")


def fmt_ms(v) -> str:
    return "–" if v is None else (f"{v:.2f} ms" if v < 100 else f"{v:.0f} ms")


def build_rows(n: str, rec: dict) -> list[str]:
    b = rec["builds"]
    rows = []
    for name, cold in b["cold"].items():
        warm = [w["wall_s"] for w in b["warm"].get(name, [])]
        warm_med = bench.median(warm)
        objs = b["objects_warm"].get(name)
        st = b["warm"][name][-1]["stats"] if name in b["warm"] else {}
        rows.append(f"| {n} | {name} | {fmt_s(cold['wall_s'])} ({cold['cpu_s']:.1f} s CPU) | "
                    + (f"{fmt_s(warm_med)} ({len(warm)} run{'s' if len(warm) > 1 else ''}) | {cold['wall_s'] / warm_med:.0f}× | "
                       f"{st.get('hits')}/{st.get('misses')}/{st.get('uncached')} | "
                       f"{objs['same']}/{objs['of']} |" if warm_med else
                       "no cache: a rebuild is a cold build | | | reference |"))
    return rows


def hit_rows(n: str, rec: dict) -> list[str]:
    h = rec["hit"]
    t = h["tools"]
    rows = []
    ccache = t.get("ccache clang", {}).get("median_ms")
    for name, v in t.items():
        plain = h["plain"].get(next(x for x in ("hipcc", "clang") if name.endswith(x)), {}).get("median_ms")
        rows.append(f"| {n} | {name} | {fmt_ms(v['median_ms'])} | {fmt_ms(v['min_ms'])} | "
                    f"{v['hits']}/{v['expected_hits']} | "
                    f"{(v['median_ms'] / ccache) if ccache else 0:.2f} | {fmt_ms(plain)} | "
                    f"{plain / v['median_ms']:.0f}× |")
    for name, v in h["plain"].items():
        rows.append(f"| {n} | {name} (plain compile) | {fmt_ms(v['median_ms'])} | | {len(v['ms'])} runs | | | |")
    return rows


def sccache_line(s: dict) -> str:
    parts = []
    for label, v in s.items():
        if isinstance(v, dict):
            reasons = ", ".join(f"{k}: {json.dumps(r)}" for k, r in (v.get("not_cached") or {}).items())
            parts.append(f"`{label}`: {v['hits']} hits, {v['misses']} misses, not cached ({reasons})")
    if "error" in s:
        return f"{s.get('version')} not measured in this run: {s['error']}."
    verdict = "caches HIP" if s.get("caches") else "refuses HIP (it runs the compiler, caches nothing)"
    return f"{s.get('version')} {verdict}: " + "; ".join(parts) + "."


def report_md(r: dict) -> str:
    m = r["machine"]
    L = ["# HIP benchmark", "",
         f"{m['date']}, `{m['command']}`, {r['duration_s']:.0f} s; {m['cores']} cores, load average "
         f"{m['loadavg_start'][0]:.1f} at the start, {m['loadavg_end'][0]:.1f} at the end ({m['note']}).",
         f"{m['hipcc'] or 'hipcc'}; {m['clang']}; {m['ccache']}; {m['kache']} ({m['kache_commit']}).", "",
         "## Builds", "",
         "cold = empty cache, new build directory; warm = build directory deleted, rebuilt from the full cache "
         "(median); hits/misses/uncached of the last warm build; objects = warm objects byte-identical (`cmp`) "
         "to the plain tool's (kache hipcc: hipcc's; the clang route: plain clang's).", "",
         "| targets | tool | cold | warm | cold ÷ warm | warm hits/misses/uncached | objects = plain's |",
         "|---:|---|---:|---:|---:|---|---:|"]
    for n, rec in r["runs"].items():
        L += build_rows(n, rec)
    if "error" in r["sccache"]:
        L.append("| any | sccache clang | not measured: its server did not start (see below) | | | | |")
    elif not r["sccache"].get("caches"):
        L.append("| any | sccache clang | refused: not cacheable (`-x hip`: reason `-x`; a bare `.hip` source: "
                 "`unknown source language`); it runs the compiler | | | | |")
    L += ["", f"sccache: {sccache_line(r['sccache'])}", "",
          "## Hit latency", "",
          "One tiny TU (`" + next(iter(r["runs"].values()))["hit"]["tu"] + "`), the cached tools in one "
          "`hyperfine -N` per round, order rotating; ms per hit; ratio = median ÷ ccache clang's median "
          "(measured in the same rounds); saved = plain compile ÷ hit.", "",
          "| targets | tool | median | min | hits | ÷ ccache | plain compile | saved |",
          "|---:|---|---:|---:|---|---:|---:|---:|"]
    for n, rec in r["runs"].items():
        L += hit_rows(n, rec)
    L += ["", "## Anomalies", ""] + ([f"- {x}" for x in r["anomalies"]] or ["none"])
    return "\n".join(L) + "\n"


def draw_png(r: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    runs = r["runs"]
    names = list(next(iter(runs.values()))["builds"]["cold"].keys())
    width = 0.8 / max(1, len(runs))
    for i, (n, rec) in enumerate(runs.items()):
        b = rec["builds"]
        cold = [b["cold"][x]["wall_s"] for x in names]
        warm = [bench.median([w["wall_s"] for w in b["warm"][x]]) if x in b["warm"] else b["cold"][x]["wall_s"]
                for x in names]
        xs = [j + i * width for j in range(len(names))]
        ax1.bar(xs, cold, width * 0.45, label=f"cold, {n} target(s)")
        ax1.bar([x + width * 0.45 for x in xs], warm, width * 0.45, label=f"warm, {n} target(s)")
        hits = rec["hit"]["tools"]
        ax2.bar([j + i * width for j in range(len(hits))], [v["median_ms"] for v in hits.values()], width,
                label=f"{n} target(s)")
    ax1.set_xticks(range(len(names)), names, rotation=20)
    ax1.set_yscale("log")
    ax1.set_ylabel("build wall time, s (log)")
    ax1.set_title("HIP project: cold and warm builds")
    ax1.legend(fontsize=7)
    hit_names = list(next(iter(runs.values()))["hit"]["tools"].keys())
    ax2.set_xticks(range(len(hit_names)), hit_names, rotation=20)
    ax2.set_ylabel("hit, ms (median)")
    ax2.set_title("hit latency, tiny TU (compare tools within one colour)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kache", required=True)
    ap.add_argument("--quick", action="store_true", help="2 tiny + 1 heavy TU, 1 target, few repetitions")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--targets", default=None, help="target counts, e.g. 1,4 (of " + ",".join(hipproject.ALL_TARGETS) + ")")
    ap.add_argument("--tiny", type=int)
    ap.add_argument("--heavy", type=int)
    ap.add_argument("--warm-reps", type=int)
    ap.add_argument("--hit-rounds", type=int)
    ap.add_argument("--hit-runs", type=int, default=5, help="hyperfine runs per tool and round")
    ap.add_argument("--plain-runs", type=int)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--name", default=None, help="report stem (default hip, quick: hip-quick)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    quick = a.quick
    a.targets = [int(x) for x in (a.targets or ("1" if quick else "1,4")).split(",")]
    a.tiny = a.tiny if a.tiny is not None else (2 if quick else 6)
    a.heavy = a.heavy if a.heavy is not None else (1 if quick else 2)
    a.warm_reps = a.warm_reps or (1 if quick else 3)
    a.hit_rounds = a.hit_rounds or (2 if quick else 8)
    a.plain_runs = a.plain_runs or (2 if quick else 4)
    a.name = a.name or ("hip-quick" if quick else "hip")
    a.work = a.work or os.path.join(a.out, "tmp", "hip")
    a.kache = os.path.abspath(a.kache)
    if HIT_TU >= f"tiny_{a.tiny:03d}":
        ap.error("--tiny must be at least 2 (the hit TU is tiny_001)")
    results = HipBench(a).run()
    bench.write_results(a.out, a.name, results, report_md(results), draw_png)


if __name__ == "__main__":
    main()
