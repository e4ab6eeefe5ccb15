#!/usr/bin/python3
"""Miss overhead on a quiet machine, without hyperfine: plain compiler and kache in front of it, interleaved.

  python3 bench/quiet_miss.py --kache build/kache [--runs 15] [--kinds cpp,tiny]

Each run compiles its own fresh copy of a TU (a uniquely named empty namespace appended, written and aged
before the timed compile, so kache records it), alternating plain and kache in each round so drifting
load affects both alike. kache runs with a warm toolchain memo (one unrelated compile first), as in an
edit-compile loop. Prints, per TU kind, the median wall time and the median CPU time (user+sys of the
child and its children) for each, their ratio and kache's own CPU time (its log at exit), and checks every kache run was a miss that stored.
The TUs are bench/mixedproject.py's first C++ unit (g++ -std=c++17 -O2) and genproject.py's first tiny
CUDA kernel (nvcc -O2, one architecture). A benchmark: it asserts nothing on time.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genproject  # noqa: E402
import mixedproject  # noqa: E402


def timed(argv, env, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{argv} failed: {p.stderr.decode(errors='replace')[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    own = re.search(r"own CPU time ([0-9.]+) ms", p.stderr.decode(errors="replace"))
    if own:
        timed.own_cpu_ms.append(float(own.group(1)))
    return wall, cpu


timed.own_cpu_ms = []


def kache_stats(kache, env):
    out = subprocess.run([kache, "-s", "--json"], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kache", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--kinds", default="cpp,tiny")
    ap.add_argument("--cxx", default=shutil.which("g++") or "/usr/bin/g++")
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kache-quiet-miss"))
    a = ap.parse_args()
    kache = os.path.abspath(a.kache)
    work = os.path.abspath(a.work)
    shutil.rmtree(work, ignore_errors=True)
    root = os.path.join(work, "proj")
    units = mixedproject.generate(root, 1, 1, 0)
    build = os.path.join(root, "build")
    os.makedirs(os.path.join(build, "obj"), exist_ok=True)
    mixedproject.write_gen_header(build)
    cache = os.path.join(work, "cache")
    conf = os.path.join(work, "kache.toml")
    open(conf, "w").close()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "KACHE_"))}
    # kache logs its own CPU time (its process, all threads, user+sys) at exit under debug logging.
    kenv = dict(base, KACHE_DIR=cache, KACHE_CONFIG=conf, KACHE_LOG="kache=debug")
    by_kind = {"cpp": next(u for u in units if u.src.endswith(".cpp")),
               "tiny": next(u for u in units if u.src.endswith(".cu"))}
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {a.runs} runs each")
    print(f"{a.cxx}: {subprocess.run([a.cxx, '--version'], capture_output=True, text=True).stdout.splitlines()[0]}")
    print("| TU | plain wall ms | kache wall ms | wall overhead | plain CPU ms | kache CPU ms | CPU overhead "
          "| kache's own CPU ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    results = {}
    for kind in a.kinds.split(","):
        unit = by_kind[kind]
        src = os.path.join(root, unit.src)
        text = open(src).read()
        ext = os.path.splitext(src)[1]

        def command(launcher, copy, obj):
            if kind == "cpp":
                return mixedproject.cxx_command(launcher, a.cxx, root, build, copy, obj)
            return launcher + [a.nvcc, "-std=c++17", "-O2", f"-I{root}/include", "-arch=sm_75",
                               "-c", copy, "-o", obj, "-MD", "-MF", obj + ".d"]

        def fresh(tag):
            copy = os.path.join(root, "src", f"copy_{kind}_{tag}{ext}")
            with open(copy, "w") as f:
                f.write(text + f"\nnamespace kache_quiet_miss_{tag} {{}}\n")
            old = time.time() - 5
            os.utime(copy, (old, old))
            return copy

        # Warm the toolchain memo (not timed).
        timed(command([kache], fresh("warm"), os.path.join(build, "obj", "warm.o")), kenv, build)
        stats0 = kache_stats(kache, kenv)
        timed.own_cpu_ms.clear()
        plain, cached = [], []
        for i in range(a.runs):
            order = [("plain", plain), ("kache", cached)] if i % 2 == 0 else [("kache", cached), ("plain", plain)]
            for name, acc in order:
                copy = fresh(f"{name}{i}")
                obj = os.path.join(build, "obj", f"{name}{i}.o")
                launcher = [kache] if name == "kache" else []
                acc.append(timed(command(launcher, copy, obj), kenv if name == "kache" else base, build))
        stats1 = kache_stats(kache, kenv)
        misses = stats1.get("misses", 0) - stats0.get("misses", 0)
        pw, kw = statistics.median(w for w, _ in plain), statistics.median(w for w, _ in cached)
        pc, kc = statistics.median(c for _, c in plain), statistics.median(c for _, c in cached)
        print(f"| {kind} | {pw:.1f} | {kw:.1f} | {100 * (kw / pw - 1):+.1f} % | {pc:.1f} | {kc:.1f} | "
              f"{100 * (kc / pc - 1):+.1f} % | {statistics.median(timed.own_cpu_ms or [0]):.1f} |")
        results[kind] = {"plain_wall_ms": [w for w, _ in plain], "kache_wall_ms": [w for w, _ in cached],
                         "plain_cpu_ms": [c for _, c in plain], "kache_cpu_ms": [c for _, c in cached],
                         "kache_misses": misses, "kache_own_cpu_ms": list(timed.own_cpu_ms)}
        if misses != a.runs:
            print(f"WARNING: {kind}: kache counted {misses} misses for {a.runs} runs")
    with open(os.path.join(work, "quiet_miss.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
