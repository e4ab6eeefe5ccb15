#!/usr/bin/env python3
"""Benchmark of issue 24's scenario "edit": nvcc's device stages cached per architecture.

Not a test: nothing here fails on a timing. Two modes:

  run     python3 bench/stages.py run --kache PATH [--ccache PATH --ccache-libdir DIR] --out DIR
          Builds the two TUs of bench/stagesproject.py (a thrust+cub TU, a ptxas-heavy TU) with plain nvcc
          (always with `--time CSV`: every stage's milliseconds), ccache, kache with the stage cache off
          and kache with it on (KACHE_NVCC_STAGES=0/1), through scenarios that each start from the state
          the previous one left (sources, caches):
            cold         4 architectures (sm_75, sm_80, sm_86, sm_90), empty caches
            a_host_edit  each TU's host-only constant changed, 4 architectures
            b_add_arch   a 5th architecture (sm_100) added to the list
            c_one_arch   sm_90 only (a developer's machine after the full-arch CI build)
          The two TUs of a build run side by side (ninja -j2); each is timed on its own (wall, and CPU of
          the process tree through wait4). Writes OUT/stages.json after every build.
  report  /usr/bin/python3 bench/stages.py report JSON --md MD --png PNG
          The markdown tables (ratios to plain nvcc, the floor) and the chart, from the JSON.

Floor (issue 24): (a) runs no ptxas; (b), (c) run no cicc/ptxas for an architecture already built; the
rebuild costs the host stages plus the new architecture's device stages (plain nvcc's own `--time` figures
for that build, less the stages that may be reused), within 10 %.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import filecmp
import json
import os
import platform
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stagesproject  # noqa: E402
from run import section_digest  # noqa: E402  (bench/run.py: stdlib only at import)

ARCHS4 = [75, 80, 86, 90]
ADDED = 100
ONE = [90]
TUS = ["thrust_cub", "heavy"]
TOOLS = ["nvcc", "kache_off", "kache_on", "ccache"]
SCENARIOS = ["cold", "a_host_edit", "b_add_arch", "c_one_arch"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def gencodes(archs: list[int]) -> list[str]:
    out = []
    for a in archs:
        out += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return out


def parse_time_csv(path: str) -> list[dict]:
    """nvcc --time: one row per stage: phase, arch, ms."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader, None)
        for r in reader:
            if len(r) < 8:
                continue
            rows.append({"phase": r[1].strip(), "arch": r[4].strip(), "ms": float(r[6])})
    return rows


def stage_sums(rows: list[dict]) -> dict:
    """Totals by kind: cicc and ptxas by architecture number, everything else together."""
    cicc, ptxas, other = {}, {}, {}
    for r in rows:
        num = r["arch"].split("_")[-1] if r["arch"] else ""
        if r["phase"] == "cicc":
            cicc[num] = cicc.get(num, 0.0) + r["ms"]
        elif r["phase"] == "ptxas":
            ptxas[num] = ptxas.get(num, 0.0) + r["ms"]
        else:
            other[r["phase"]] = other.get(r["phase"], 0.0) + r["ms"]
    total = sum(cicc.values()) + sum(ptxas.values()) + sum(other.values())
    return {"cicc": cicc, "ptxas": ptxas, "other": other, "total_ms": total}


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.out = os.path.abspath(args.out)
        self.nvcc = args.nvcc or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        self.start = time.monotonic()
        if os.path.exists(self.work):
            shutil.rmtree(self.work)
        os.makedirs(self.work)
        os.makedirs(self.out, exist_ok=True)
        self.proj = os.path.join(self.work, "project")
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("CCACHE_", "SCCACHE_", "KACHE_"))
                and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH", "CPLUS_INCLUDE_PATH")}
        self.quick = args.quick
        self.tus = [t for t in args.tus.split(",") if t]
        self.archs4 = [75, 80] if self.quick else ARCHS4
        self.added = 86 if self.quick else ADDED
        self.one = [80] if self.quick else ONE
        empty = os.path.join(self.work, "empty.conf")
        open(empty, "w").close()
        self.tools: dict[str, dict] = {}
        tools = [t for t in args.tools.split(",") if t]
        for t in tools:
            env = dict(base)
            launcher: list[str] = []
            if t.startswith("kache"):
                env.update({"KACHE_DIR": os.path.join(self.work, "cache-" + t), "KACHE_CONFIG": empty,
                            "KACHE_MAX_SIZE": "20G", "KACHE_NVCC_STAGES": "1" if t == "kache_on" else "0"})
                launcher = [os.path.abspath(args.kache)]
            elif t == "ccache":
                if not args.ccache:
                    continue
                env.update({"CCACHE_DIR": os.path.join(self.work, "cache-ccache"), "CCACHE_CONFIGPATH": empty,
                            "CCACHE_MAXSIZE": "20G"})
                launcher = [os.path.abspath(args.ccache)]
                if args.ccache_libdir:
                    # the loader's --library-path reaches ccache alone, not the nvcc it runs
                    launcher = [args.loader, "--library-path", os.path.abspath(args.ccache_libdir)] + launcher
                try:
                    v = subprocess.run(launcher + ["--version"], env=env, capture_output=True, text=True, timeout=30)
                    if v.returncode != 0:
                        raise OSError(v.stderr.strip()[:300])
                    self.ccache_version = v.stdout.splitlines()[0]
                except OSError as e:
                    log(f"ccache does not run here, skipped: {e}")
                    self.results_note = f"ccache skipped: {e}"
                    continue
            self.tools[t] = {"env": env, "launcher": launcher,
                             "build": os.path.join(self.work, "build-" + t)}
            os.makedirs(os.path.join(self.tools[t]["build"], "obj"), exist_ok=True)
        self.results: dict = {
            "machine": self.machine(), "command": sys.argv, "quick": self.quick,
            "archs": {"four": self.archs4, "added": self.added, "one": self.one},
            "tools": list(self.tools), "tus": self.tus, "builds": [], "time_csv": {}, "compare": {}, "kache_stats": {},
            "arch_list_in_cccl": {}, "anomalies": [], "skipped": [],
        }
        self.results["machine"]["ccache"] = getattr(self, "ccache_version", "")
        if hasattr(self, "results_note"):
            self.results["anomalies"].append(self.results_note)

    def machine(self) -> dict:
        def first(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[-1]
            except Exception as e:  # noqa: BLE001
                return f"? ({e})"
        gpu = first(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
        return {"host": platform.node(), "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                "kernel": platform.release(), "nvcc": first([self.nvcc, "--version"]),
                "gcc": subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
                "gpu": gpu, "kache": subprocess.run([self.args.kache, "--version"], capture_output=True,
                                                    text=True).stdout.splitlines()[0] + " " + self.args.kache_note,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}

    def save(self) -> None:
        self.results["elapsed_s"] = round(time.monotonic() - self.start, 1)
        tmp = os.path.join(self.out, "stages.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.results, f, indent=1)
        os.replace(tmp, os.path.join(self.out, "stages.json"))

    def kache_stats(self, tool: str) -> dict:
        t = self.tools[tool]
        r = subprocess.run(t["launcher"] + ["-s", "--json"], env=t["env"], capture_output=True, text=True)
        s = json.loads(r.stdout)
        return {k: s.get(k) for k in ("hits", "direct_hits", "misses", "stages", "stages_whole", "errors",
                                      "error_reasons", "passthrough_reasons", "not_stored_reasons")}

    def build(self, scenario: str, tool: str, archs: list[int]) -> dict:
        t = self.tools[tool]
        procs = {}
        for tu in self.tus:
            obj = os.path.join("obj", tu + ".o")  # relative to the build directory, as CMake's rules are
            cmd = [self.nvcc, "-std=c++17", "-O2", *gencodes(archs), "-c", os.path.join(self.proj, "src", tu + ".cu"),
                   "-o", obj, "-MD", "-MF", obj + ".d", "-MT", obj]
            csvp = None
            if tool == "nvcc":
                csvp = os.path.join(self.work, f"time-{scenario}-{tu}.csv")
                if os.path.exists(csvp):
                    os.remove(csvp)
                cmd += ["--time", csvp]
            cmd = t["launcher"] + cmd
            logf = open(os.path.join(self.work, f"log-{scenario}-{tool}-{tu}.txt"), "w")
            t0 = time.monotonic()
            p = subprocess.Popen(cmd, cwd=t["build"], env=t["env"], stdout=logf, stderr=subprocess.STDOUT)
            procs[p.pid] = {"tu": tu, "t0": t0, "cmd": cmd, "csv": csvp, "log": logf, "obj": obj}
        runs = {}
        while procs:
            pid, status, ru = os.wait4(-1, 0)
            if pid not in procs:
                continue
            info = procs.pop(pid)
            wall = time.monotonic() - info["t0"]
            info["log"].close()
            rc = os.waitstatus_to_exitcode(status)
            runs[info["tu"]] = {"wall_s": round(wall, 3), "cpu_s": round(ru.ru_utime + ru.ru_stime, 3), "rc": rc}
            if rc != 0:
                with open(info["log"].name) as f:
                    tail = f.read()[-1500:]
                self.results["anomalies"].append(f"{scenario} {tool} {info['tu']}: exit {rc}: {tail}")
                log(f"FAILED {scenario} {tool} {info['tu']}: {tail}")
            if info["csv"] and os.path.exists(info["csv"]):
                rows = parse_time_csv(info["csv"])
                self.results["time_csv"].setdefault(scenario, {})[info["tu"]] = {"rows": rows, "sums": stage_sums(rows)}
        return runs

    def compare(self, scenario: str) -> None:
        out = {}
        for tu in self.tus:
            objs = {tool: os.path.join(t["build"], "obj", tu + ".o") for tool, t in self.tools.items()}
            row = {}
            if "kache_on" in objs and "kache_off" in objs:
                row["kache_on_eq_kache_off_bytes"] = filecmp.cmp(objs["kache_on"], objs["kache_off"], shallow=False)
                row["depfile_eq"] = filecmp.cmp(objs["kache_on"] + ".d", objs["kache_off"] + ".d", shallow=False)
                if not row["kache_on_eq_kache_off_bytes"]:
                    self.results["anomalies"].append(f"{scenario} {tu}: kache stages-on object differs from stages-off")
            if "nvcc" in objs:
                ref = section_digest(objs["nvcc"])
                for tool in objs:
                    if tool != "nvcc":
                        row[f"{tool}_eq_nvcc_sections"] = section_digest(objs[tool]) == ref
                        row[f"{tool}_eq_nvcc_bytes"] = filecmp.cmp(objs[tool], objs["nvcc"], shallow=False)
            out[tu] = row
        self.results["compare"][scenario] = out

    def arch_list_count(self) -> None:
        """How often CCCL spells __CUDA_ARCH_LIST__ into the thrust+cub TU's preprocessed text."""
        ii = os.path.join(self.work, "thrust_cub.ii")
        cmd = [self.nvcc, "-E", "-std=c++17", *gencodes(self.archs4), os.path.join(self.proj, "src", "thrust_cub.cu"),
               "-o", ii]
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            return
        token = "SM_" + "_".join(str(a * 10) for a in self.archs4)
        with open(ii, errors="replace") as f:
            lines = f.readlines()
        hits = [ln for ln in lines if token in ln]
        self.results["arch_list_in_cccl"] = {
            "token": token, "preprocessed_lines": len(lines), "lines_with_token": len(hits),
            "thrust_ns": sum(ln.count("THRUST_") for ln in hits), "cub_ns": sum(ln.count("CUB_") for ln in hits)}

    def run(self) -> None:
        plan = [("cold", 1, self.archs4), ("a_host_edit", 2, self.archs4),
                ("b_add_arch", 2, self.archs4 + [self.added]), ("c_one_arch", 2, self.one)]
        stagesproject.write(self.proj, 1, self.quick)
        self.arch_list_count()
        for scenario, version, archs in plan:
            stagesproject.write(self.proj, version, self.quick)
            for tool in self.tools:
                elapsed = time.monotonic() - self.start
                if elapsed > self.args.budget:
                    self.results["skipped"].append(f"{scenario} {tool} (budget {self.args.budget}s spent)")
                    log(f"skip {scenario} {tool}: budget")
                    continue
                before = self.kache_stats(tool) if tool.startswith("kache") else None
                runs = self.build(scenario, tool, archs)
                rec = {"scenario": scenario, "tool": tool, "archs": archs, "tus": runs,
                       "wall_s": round(max(r["wall_s"] for r in runs.values()), 3),
                       "cpu_s": round(sum(r["cpu_s"] for r in runs.values()), 3)}
                if before is not None:
                    after = self.kache_stats(tool)
                    rec["kache"] = {"after": after, "before": before}
                self.results["builds"].append(rec)
                log(f"{scenario:12} {tool:10} " + "  ".join(f"{tu} {r['wall_s']:.1f}s" for tu, r in runs.items()))
                self.save()
            self.compare(scenario)
            self.save()
        self.results["done"] = True
        self.save()


# ------------------------------------------------------------------------------------------------
# report (here, with matplotlib)

LABEL = {"nvcc": "plain nvcc", "ccache": "ccache", "kache_off": "kache, stages off", "kache_on": "kache, stages on"}
SCEN = {"cold": "cold (4 archs, empty caches)", "a_host_edit": "(a) host-only edit, 4 archs",
        "b_add_arch": "(b) 5th arch added", "c_one_arch": "(c) one arch after 4"}


def stage_delta(rec: dict) -> dict:
    a, b = rec["kache"]["after"].get("stages") or {}, rec["kache"]["before"].get("stages") or {}
    out = {}
    for kind in sorted(set(a) | set(b)):
        out[kind] = {k: (a.get(kind, {}).get(k, 0) or 0) - (b.get(kind, {}).get(k, 0) or 0)
                     for k in ("hits", "misses", "ms_saved")}
    return out


def whole_delta(rec: dict) -> dict:
    a, b = rec["kache"]["after"].get("stages_whole") or {}, rec["kache"]["before"].get("stages_whole") or {}
    return {k: a.get(k, 0) - b.get(k, 0) for k in a if a.get(k, 0) - b.get(k, 0)}


def floor_ms(res: dict, scenario: str, tu: str) -> tuple[float | None, str]:
    """Plain nvcc's own stage figures for this build less what the floor lets a stage cache skip."""
    tc = res["time_csv"].get(scenario, {}).get(tu)
    if not tc:
        return None, ""
    s = tc["sums"]
    archs4 = [str(a) for a in res["archs"]["four"]]  # nvcc --time names them compute_75 / sm_75
    one = [str(a) for a in res["archs"]["one"]]
    if scenario == "cold":
        return s["total_ms"], "all stages"
    if scenario == "a_host_edit":
        return s["total_ms"] - sum(s["ptxas"].values()), "all but ptxas"
    if scenario == "b_add_arch":
        skip = sum(s["cicc"].get(a, 0) + s["ptxas"].get(a, 0) for a in archs4)
        return s["total_ms"] - skip, "host stages + new arch's preprocessing/cicc/ptxas"
    if scenario == "c_one_arch":
        skip = sum(s["cicc"].get(a, 0) + s["ptxas"].get(a, 0) for a in one)
        return s["total_ms"] - skip, "host stages + device preprocessing (cicc/ptxas reused)"
    return None, ""


def report(path: str, md_path: str, png_path: str | None, where: str | None = None) -> None:
    with open(path) as f:
        res = json.load(f)
    builds = {(b["scenario"], b["tool"]): b for b in res["builds"]}
    tools = [t for t in TOOLS if t in res["tools"]]
    tus = res.get("tus", TUS)
    m = res["machine"]
    where = where or m["host"]
    L = []
    L.append("# Stage cache benchmark (issue 24, scenario \"edit\")\n")
    L.append(f"Measured by `bench/stages.py run` on **{where}** (host name {m['host']}; {m['cpus']} CPUs, {m['gpu']}, kernel "
             f"{m['kernel']}), {m['date']}; load average at the start {m['loadavg'][0]:.2f}. {m['nvcc']}; {m['gcc']}; "
             f"kache: {m['kache']}; {m.get('ccache', '')}. Every figure below was measured there (the main run, and "
             f"{len(res.get('repeats') or [])} repeats of the heavy TU alone in a second lease of such a machine "
             "minutes later); nothing was measured on the 2-core development machine, which only drew this file "
             "and the chart from the fetched JSON (`bench/stages.py report`).\n")
    L.append("Commands (device, repo root; `.devbench/` carried: the static kache, Debian's ccache 4.7.5 with the "
             "libhiredis.so.0.14 and libzstd.so.1 it links, run through the loader's `--library-path` so that only "
             "ccache sees them):\n")
    L.append("```\npython3 bench/stages.py run --kache .devbench/kache --ccache .devbench/ccache --ccache-libdir "
             ".devbench/lib --work /tmp/kst --out $OUT --budget 470\n"
             "python3 bench/stages.py run --tus heavy --tools nvcc,kache_off,kache_on --kache .devbench/kache "
             "--work /tmp/kst-rN --out $OUT/rN --budget 105   # twice\n"
             "/usr/bin/python3 bench/stages.py report bench/results/stages.json --repeat r1/stages.json --repeat "
             "r2/stages.json --md bench/results/stages.md --png bench/results/stages.png --where '...'\n```\n")
    L.append("Plain nvcc's objects differ byte-wise from run to run (the `tmpxft_<pid>` name of cudafe++'s output "
             "is in them), so objects are compared with plain nvcc by section (`.text*`, `.data*`, `.rodata*`, "
             "`.nv_fatbin`, bench/run.py's reader) and byte for byte (`cmp`) between kache's two modes.\n")
    L.append(f"Architectures: {res['archs']['four']} (gencode arch=compute_XX,code=sm_XX each), then "
             f"+sm_{res['archs']['added']}, then {res['archs']['one']} only. Flags: `-std=c++17 -O2 <gencodes> -c "
             "SRC -o OBJ -MD -MF OBJ.d -MT OBJ`. The two TUs of a build run side by side; each is timed alone "
             "(one run each; plain nvcc ran with `--time CSV`). Scenarios in order, each from the state the "
             "previous one left: caches are never emptied after cold.\n")
    L.append("## Wall time per TU (s) and ratio to plain nvcc\n")
    L.append("| scenario | TU | " + " | ".join(LABEL[t] for t in tools) + " | floor (s) | kache on ÷ floor |")
    L.append("|---|---|" + "---:|" * len(tools) + "---:|---:|")
    for sc in SCENARIOS:
        for tu in tus:
            base = builds.get((sc, "nvcc"))
            bw = base["tus"][tu]["wall_s"] if base and tu in base["tus"] else None
            cells = []
            for t in tools:
                b = builds.get((sc, t))
                if not b or tu not in b["tus"]:
                    cells.append("—")
                    continue
                w = b["tus"][tu]["wall_s"]
                bad = "" if b["tus"][tu]["rc"] == 0 else " FAILED"
                cells.append(f"{w:.2f}" + (f" ({w / bw:.2f}×)" if bw and t != "nvcc" else "") + bad)
            fl, _ = floor_ms(res, sc, tu)
            kon = builds.get((sc, "kache_on"))
            fl_s = fl / 1000 if fl else None
            ratio = (f"{kon['tus'][tu]['wall_s'] / fl_s:.2f}" if kon and fl_s and tu in kon["tus"] else "—")
            L.append(f"| {SCEN[sc]} | {tu} | " + " | ".join(cells) + f" | {fl_s:.2f} | {ratio} |" if fl_s else
                     f"| {SCEN[sc]} | {tu} | " + " | ".join(cells) + " | — | — |")
    L.append("\nFloor: plain nvcc's own `--time` stage milliseconds for that same build, less what the issue's "
             "floor lets a stage cache skip: (a) every ptxas; (b) cicc and ptxas of the 4 architectures already "
             "built; (c) cicc and ptxas of the one architecture, already built. The issue asks kache-on ≤ floor × 1.10. "
             "For the thrust+cub TU in (b) and (c) that floor assumes reuse that CCCL rules out (last section): "
             "there the honest floor is plain nvcc's own time.\n")
    L.append("### Against the floor\n")
    runs = [res] + (res.get("repeats") or [])
    n4 = len(res["archs"]["four"])
    expect = {"a_host_edit": ("cubin misses 0 (no ptxas)", lambda d: d.get("cubin", {}).get("misses", 0) == 0),
              "b_add_arch": (f"heavy: {n4} ptx and {n4} cubin hits (the 4 built archs)",
                             lambda d: d.get("ptx", {}).get("hits", 0) >= n4 and d.get("cubin", {}).get("hits", 0) >= n4),
              "c_one_arch": ("heavy: 1 ptx and 1 cubin hit",
                             lambda d: d.get("ptx", {}).get("hits", 0) >= 1 and d.get("cubin", {}).get("hits", 0) >= 1)}
    for sc in SCENARIOS[1:]:
        parts = []
        for tu in tus:
            ratios = []
            for r in runs:
                bs = {(b["scenario"], b["tool"]): b for b in r["builds"]}
                kon = bs.get((sc, "kache_on"))
                fl, _ = floor_ms(r, sc, tu)
                if kon and fl and tu in kon["tus"]:
                    ratios.append(kon["tus"][tu]["wall_s"] / (fl / 1000))
            if ratios:
                ratios.sort()
                med = ratios[len(ratios) // 2]
                parts.append(f"{tu}: kache on ÷ floor median {med:.2f} of {len(ratios)} run(s) "
                             f"({'within' if med <= 1.10 else 'over'} 10 %)")
        kon = builds.get((sc, "kache_on"))
        if kon and "kache" in kon:
            what, ok = expect[sc]
            parts.append(f"stage counts ({what}): {'yes' if ok(stage_delta(kon)) else '**no**'}")
        L.append(f"- {SCEN[sc]}: " + "; ".join(parts) + ".")
    L.append("")
    L.append("## CPU time per build (s, both TUs, user+sys of the process tree)\n")
    L.append("| scenario | " + " | ".join(LABEL[t] for t in tools) + " |")
    L.append("|---|" + "---:|" * len(tools))
    for sc in SCENARIOS:
        cells = []
        base = builds.get((sc, "nvcc"))
        for t in tools:
            b = builds.get((sc, t))
            cells.append("—" if not b else f"{b['cpu_s']:.1f}" + (
                f" ({b['cpu_s'] / base['cpu_s']:.2f}×)" if base and t != "nvcc" else ""))
        L.append(f"| {SCEN[sc]} | " + " | ".join(cells) + " |")
    L.append("\n## Plain nvcc's stages (`nvcc --time`, ms), per TU and scenario\n")
    L.append("| scenario | TU | host: preprocessing 4 | cudafe++ | device preprocessing (all archs) | cicc per arch | "
             "ptxas per arch | fatbinary | host compile | total |")
    L.append("|---|---|---:|---:|---:|---|---|---:|---:|---:|")
    for sc in SCENARIOS:
        for tu in tus:
            tc = res["time_csv"].get(sc, {}).get(tu)
            if not tc:
                continue
            s = tc["sums"]
            o = s["other"]
            cicc = ", ".join(f"{a}: {v:.0f}" for a, v in sorted(s["cicc"].items(), key=lambda x: int(x[0] or 0)))
            ptx = ", ".join(f"{a}: {v:.0f}" for a, v in sorted(s["ptxas"].items(), key=lambda x: int(x[0] or 0)))
            L.append(f"| {SCEN[sc]} | {tu} | {o.get('gcc (preprocessing 4)', 0):.0f} | {o.get('cudafe++', 0):.0f} | "
                     f"{o.get('gcc (preprocessing 1)', 0):.0f} | {cicc} | {ptx} | {o.get('fatbinary', 0):.0f} | "
                     f"{o.get('gcc (compiling)', 0):.0f} | {s['total_ms']:.0f} |")
    L.append("\n## kache's own figures per scenario (`kache -s --json`, difference over the build)\n")
    L.append("| scenario | tool | misses | stages: kind hits/misses/ms saved | run whole (why) |")
    L.append("|---|---|---:|---|---|")
    for sc in SCENARIOS:
        for t in ("kache_off", "kache_on"):
            b = builds.get((sc, t))
            if not b or "kache" not in b:
                continue
            mis = (b["kache"]["after"].get("misses") or 0) - (b["kache"]["before"].get("misses") or 0)
            st = "; ".join(f"{k}: {v['hits']}/{v['misses']}/{v['ms_saved']}" for k, v in stage_delta(b).items()) or "—"
            wh = ", ".join(f"{k}: {v}" for k, v in whole_delta(b).items()) or "—"
            L.append(f"| {SCEN[sc]} | {LABEL[t]} | {mis} | {st} | {wh} |")
    L.append("\n## Objects\n")
    L.append("| scenario | TU | stages on = stages off (cmp) | depfiles equal | " +
             " | ".join(f"{LABEL[t]} = plain nvcc (sections / bytes)" for t in tools if t != "nvcc") + " |")
    L.append("|---|---|---|---|" + "---|" * (len(tools) - 1))
    for sc in SCENARIOS:
        for tu in tus:
            c = res["compare"].get(sc, {}).get(tu)
            if not c:
                continue
            yn = {True: "yes", False: "**NO**", None: "—"}
            L.append(f"| {SCEN[sc]} | {tu} | {yn[c.get('kache_on_eq_kache_off_bytes')]} | {yn[c.get('depfile_eq')]} | " +
                     " | ".join(f"{yn[c.get(t + '_eq_nvcc_sections')]} / {yn[c.get(t + '_eq_nvcc_bytes')]}"
                                for t in tools if t != "nvcc") + " |")
    reps = res.get("repeats") or []
    if reps:
        L.append("\n## Repeats: the heavy TU alone\n")
        L.append(f"{len(reps)} more runs of the whole sequence on the same machine (fresh caches each), the heavy TU "
                 "alone (no thrust+cub TU beside it), plain nvcc, kache stages off and on. Wall time (s) per run: "
                 "the main run above first, then each repeat; kache on ÷ floor uses each run's own nvcc `--time`.\n")
        L.append("| scenario | plain nvcc | kache, stages off | kache, stages on | floor | kache on ÷ floor | "
                 "kache on stages (ptx, cubin hits/misses), each run |")
        L.append("|---|---|---|---|---|---|---|")
        runs = [res] + reps
        for sc in SCENARIOS:
            cols = {t: [] for t in ("nvcc", "kache_off", "kache_on")}
            fls, ratios, st = [], [], []
            for r in runs:
                bs = {(b["scenario"], b["tool"]): b for b in r["builds"]}
                for t in cols:
                    b = bs.get((sc, t))
                    cols[t].append(f"{b['tus']['heavy']['wall_s']:.2f}" if b and "heavy" in b["tus"] else "—")
                fl, _ = floor_ms(r, sc, "heavy")
                kon = bs.get((sc, "kache_on"))
                fls.append(f"{fl / 1000:.2f}" if fl else "—")
                ratios.append(f"{kon['tus']['heavy']['wall_s'] / (fl / 1000):.2f}" if fl and kon else "—")
                if kon and "kache" in kon:
                    d = stage_delta(kon)
                    st.append(" ".join(f"{k} {v['hits']}/{v['misses']}" for k, v in d.items()))
            L.append(f"| {SCEN[sc]} | " + " | ".join(", ".join(cols[t]) for t in cols) +
                     f" | {', '.join(fls)} | {', '.join(ratios)} | {'; '.join(st)} |")
        L.append("\n(The main run's kache figures count both TUs; the repeats' the heavy TU alone.)")
        for i, r in enumerate(reps, 1):
            for sc, row in r.get("compare", {}).items():
                c = row.get("heavy", {})
                if c.get("kache_on_eq_kache_off_bytes") is False or c.get("depfile_eq") is False:
                    L.append(f"- repeat {i}, {sc}: stages-on object or depfile differs from stages-off")
            for x in r.get("anomalies", []) + r.get("skipped", []):
                L.append(f"- repeat {i}: {x}")
    a = res.get("arch_list_in_cccl") or {}
    if a:
        L.append(f"\n## `__CUDA_ARCH_LIST__` in CCCL\n\nThe thrust+cub TU preprocessed (`nvcc -E`, 4 archs): "
                 f"{a['lines_with_token']} of {a['preprocessed_lines']} lines spell the arch list (`{a['token']}`): "
                 f"thrust's and cub's inline ABI namespaces (`THRUST_…_{a['token']}_NS`: {a['thrust_ns']}, "
                 f"`CUB_…_{a['token']}`: {a['cub_ns']}). So every CCCL TU's preprocessed device text differs "
                 "between architecture lists, and cicc's input with it: (b) and (c) cannot reuse its cicc stages "
                 "when keyed by content; its ptxas stages only if cicc's PTX comes out the same.\n")
    if res.get("anomalies") or res.get("skipped"):
        L.append("## Anomalies\n")
        for x in res.get("anomalies", []) + [f"skipped: {s}" for s in res.get("skipped", [])]:
            L.append(f"- {x}")
    if not res.get("done"):
        L.append("\n**The run did not finish: the tables hold what it recorded.**")
    with open(md_path, "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))
    if png_path:
        chart(res, builds, tools, png_path, where)


def chart(res, builds, tools, png_path, where):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tus = res.get("tus", TUS)
    fig, axes = plt.subplots(1, len(tus), figsize=(6.5 * len(tus), 5.4), sharey=False, squeeze=False)
    axes = axes[0]
    colors = {"nvcc": "#888888", "ccache": "#d9a441", "kache_off": "#6a8fc7", "kache_on": "#2b6f3e"}
    width = 0.8 / (len(tools) + 1)
    for ax, tu in zip(axes, tus):
        for i, t in enumerate(tools):
            xs = [x + i * width for x in range(len(SCENARIOS))]
            ys = [builds[(sc, t)]["tus"][tu]["wall_s"] if (sc, t) in builds and tu in builds[(sc, t)]["tus"] else 0
                  for sc in SCENARIOS]
            ax.bar(xs, ys, width, label=LABEL[t], color=colors[t])
            for rep in res.get("repeats") or []:  # repeat runs (that TU alone) as dots
                rb = {(b["scenario"], b["tool"]): b for b in rep["builds"]}
                for x, sc in zip(xs, SCENARIOS):
                    b = rb.get((sc, t))
                    if b and tu in b["tus"]:
                        ax.plot(x, b["tus"][tu]["wall_s"], "o", color="black", markersize=3,
                                label="repeat runs (TU alone)" if (i, sc) == (0, "cold") and rep is res["repeats"][0]
                                and tu == tus[-1] else None)
        fl = [(floor_ms(res, sc, tu)[0] or 0) / 1000 for sc in SCENARIOS]
        fx = [x + len(tools) * width for x in range(len(SCENARIOS))]
        ax.bar(fx, fl, width, label="floor: nvcc --time less reusable stages", color="none", edgecolor="black",
               hatch="//")
        if tu == "thrust_cub":
            for x, sc, y in zip(fx, SCENARIOS, fl):
                if sc in ("b_add_arch", "c_one_arch"):
                    ax.annotate("CCCL spells the\narch list: no reuse", (x, y), xytext=(0, 4),
                                textcoords="offset points", ha="center", fontsize=7)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(SCENARIOS))])
        ax.set_xticklabels(["cold\n4 archs", "(a) host\nedit", "(b) +sm_%d" % res["archs"]["added"],
                            "(c) sm_%s only" % "/".join(str(a) for a in res["archs"]["one"])])
        ax.set_title(f"{tu}.cu")
        ax.set_ylabel("wall time per TU (s)")
        ax.grid(axis="y", alpha=0.3)
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    m = res["machine"]
    fig.suptitle(f"kache nvcc stage cache (issue 24): {where}, {m['cpus']} CPUs, {m['gpu'].split(',')[0]}, "
                 f"{m['date'][:10]}\nbars: one run, both TUs side by side; dots: repeat runs, the heavy TU alone", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(png_path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("--kache", required=True)
    r.add_argument("--ccache")
    r.add_argument("--ccache-libdir", help="shared libraries ccache needs that this machine lacks")
    r.add_argument("--loader", default="/lib64/ld-linux-x86-64.so.2")
    r.add_argument("--nvcc")
    r.add_argument("--kache-note", default="", help="what the kache binary is (commit), for the record")
    r.add_argument("--tools", default=",".join(TOOLS))
    r.add_argument("--tus", default=",".join(TUS), help="which TUs to build (default both, side by side)")
    r.add_argument("--work", default="/tmp/kache-stages-bench")
    r.add_argument("--out", default="bench/results")
    r.add_argument("--quick", action="store_true", help="2 archs and a small heavy kernel (a smoke run)")
    r.add_argument("--budget", type=float, default=1e9, help="start no build after this many seconds")
    p = sub.add_parser("report")
    p.add_argument("json")
    p.add_argument("--md", required=True)
    p.add_argument("--png")
    p.add_argument("--where", help="which machine ran it, in words (default: its host name)")
    p.add_argument("--repeat", action="append", default=[], help="a JSON of a repeat run (heavy TU alone), folded in")
    args = ap.parse_args()
    if args.mode == "run":
        Bench(args).run()
    else:
        if args.repeat:  # fold the repeats into the one results file
            with open(args.json) as f:
                res = json.load(f)
            res["repeats"] = []
            for path in args.repeat:
                with open(path) as f:
                    res["repeats"].append(json.load(f))
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
        report(args.json, args.md, args.png, args.where)


if __name__ == "__main__":
    main()
