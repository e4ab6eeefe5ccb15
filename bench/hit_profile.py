#!/usr/bin/python3
"""Per-hit cost of kache, in figures that do not depend on machine load.

For each TU kind (a tiny kernel TU and a thrust+cub TU from genproject.py), after one filling compile:
  - callgrind instructions of one hit (deterministic; the primary figure),
  - syscalls of one hit, total and by name (strace -f -c),
  - hyperfine median of a hit (wall time; noisy on a shared machine), optionally paired with ccache's
    direct-mode hit in the same hyperfine run (--ccache),
plus the process floor (`kache --version`) for scale. Every timed invocation must be a hit: kache's
statistics are checked after each kind.

  /usr/bin/python3 bench/hit_profile.py [--kache build/kache] [--work DIR] [--runs 40] [--ccache]

The work directory (default /tmp/kache-hit-profile) is kept: the project and the caches are reused,
so a second run does not pay the ~15 s thrust+cub fill again (the fill is then itself a hit).
This is a benchmark, not a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genproject  # noqa: E402

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def clean_env(work: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CCACHE_", "KACHE_", "SCCACHE_"))
           and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH")}
    conf = os.path.join(work, "kache.toml")
    open(conf, "a").close()
    env.update({"KACHE_DIR": os.path.join(work, "kache-cache"), "KACHE_CONFIG": conf,
                "CCACHE_DIR": os.path.join(work, "ccache-cache"), "CCACHE_MAXSIZE": "20G"})
    return env


def callgrind_ir(cmd: list[str], cwd: str, env: dict, out: str) -> int:
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
                   cwd=cwd, env=env, check=True, capture_output=True)
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"no instruction total in {out}")


def strace_counts(cmd: list[str], cwd: str, env: dict, out: str) -> dict[str, int]:
    subprocess.run(["strace", "-f", "-c", "-o", out] + cmd, cwd=cwd, env=env, check=True, capture_output=True)
    counts = {}
    with open(out) as f:
        for line in f:
            parts = line.split()
            # "% time seconds usecs/call calls [errors] syscall"
            if len(parts) >= 5 and re.fullmatch(r"[\d.]+", parts[0]) and parts[-1] != "total":
                counts[parts[-1]] = int(parts[3])
    return counts


def hyperfine(cmds: list[list[str]], cwd: str, env: dict, runs: int, warmup: int, out: str) -> list[float]:
    subprocess.run(["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
                    "--export-json", out] + [shlex.join(c) for c in cmds],
                   cwd=cwd, env=env, check=True, capture_output=True)
    with open(out) as f:
        return [statistics.median(r["times"]) * 1000 for r in json.load(f)["results"]]


def kache_stats(kache: str, env: dict) -> dict[str, int]:
    p = subprocess.run([kache, "--show-stats", "--json"], env=env, capture_output=True, text=True)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--kache", default=os.path.join(root, "build", "kache"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kache-hit-profile"))
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--kinds", default="tiny,thrust")
    ap.add_argument("--ccache", action="store_true", help="pair each hit with ccache's in one hyperfine run")
    ap.add_argument("--ccache-bin", default="ccache")
    ap.add_argument("--no-time", action="store_true", help="callgrind and strace only (no hyperfine)")
    ap.add_argument("--time-only", action="store_true", help="hyperfine only (no callgrind or strace)")
    a = ap.parse_args()
    kache = os.path.abspath(a.kache)
    work = os.path.abspath(a.work)
    proj = os.path.join(work, "proj")
    if not os.path.isdir(os.path.join(proj, "src")):
        os.makedirs(proj, exist_ok=True)
        subprocess.run([sys.executable, os.path.join(root, "bench", "genproject.py"), proj,
                        "--tiny", "1", "--thrust", "1"], check=True, capture_output=True)
    env = clean_env(work)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    logs = os.path.join(work, "logs")
    srcs = sorted(os.listdir(os.path.join(proj, "src")))

    rows = []
    ir_floor = sc_floor = 0
    if not a.time_only:
        ir_floor = callgrind_ir([kache, "--version"], proj, env, os.path.join(logs, "cg-version.out"))
        sc_floor = sum(strace_counts([kache, "--version"], proj, env, os.path.join(logs, "st-version.txt")).values())
    for kind in a.kinds.split(","):
        src = next(s for s in srcs if s.startswith(kind))
        out = f"out/{kind}.o"
        os.makedirs(os.path.join(proj, "out"), exist_ok=True)
        nvcc_cmd = [NVCC] + genproject.CFLAGS.split() + ["-Iinclude", "-gencode", "arch=compute_75,code=sm_75",
                                                         "-c", f"src/{src}", "-o", out, "-MD", "-MF", out + ".d",
                                                         "-MT", out]
        cmd = [kache] + nvcc_cmd
        subprocess.run(cmd, cwd=proj, env=env, check=True, capture_output=True)  # fill (or a hit)
        subprocess.run([kache, "-z"], env=env, check=True, capture_output=True)
        row = {"kind": kind, "ir": 0, "syscalls": 0, "by_name": {}}
        invocations = 0
        if not a.time_only:
            row["ir"] = callgrind_ir(cmd, proj, env, os.path.join(logs, f"cg-{kind}.out"))
            row["by_name"] = strace_counts(cmd, proj, env, os.path.join(logs, f"st-{kind}.txt"))
            row["syscalls"] = sum(row["by_name"].values())
            invocations = 2
        if not a.no_time:
            cmds = [cmd]
            if a.ccache:
                cc = [a.ccache_bin] + nvcc_cmd[:]
                cc[cc.index(out)] = f"out/{kind}-cc.o"
                subprocess.run(cc, cwd=proj, env=env, check=True, capture_output=True)
                cmds.append(cc)
            med = hyperfine(cmds, proj, env, a.runs, a.warmup, os.path.join(logs, f"hf-{kind}.json"))
            row["median_ms"] = med[0]
            if a.ccache:
                row["ccache_ms"] = med[1]
            invocations += a.runs + a.warmup
        st = kache_stats(kache, env)
        row["hits"] = f"{st.get('hits', '?')}/{invocations}"
        rows.append(row)

    print(f"kache: {kache}  (load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)")
    print(f"process floor (kache --version): {ir_floor:,} instructions, {sc_floor} syscalls\n")
    head = "| TU | instructions/hit | syscalls/hit | hits | median ms |" + (" ccache ms | ratio |" if a.ccache else "")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        line = f"| {r['kind']} | {r['ir']:,} | {r['syscalls']} | {r['hits']} | {r.get('median_ms', 0):.2f} |"
        if a.ccache:
            line += f" {r['ccache_ms']:.2f} | {r['median_ms'] / r['ccache_ms']:.2f} |"
        print(line)
    for r in rows:
        top = sorted(r["by_name"].items(), key=lambda kv: -kv[1])
        print(f"\n{r['kind']} syscalls by name: " + ", ".join(f"{n} {c}" for n, c in top))


if __name__ == "__main__":
    main()
