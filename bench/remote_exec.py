#!/usr/bin/env python3
"""Remote execution benchmark (issue 34, docs/remote-execution.md): the wall time of cold multi-architecture
nvcc misses whose cicc and ptxas run on `kache worker`s of a BuildGrid on loopback, against plain nvcc,
`nvcc --threads N` and kache without remote execution (stage cache on, cold).

For the GPU machine (16 cores): BuildGrid plus 1, 2, 4 and 8 workers; a 4-architecture heavy TU, a
thrust+cub TU, and (--cusz TARBALL) a cold build of cuSZ for the same architectures with 8 workers:

    python3 bench/remote_exec.py --kache build/kache --workers 1,2,4,8 --archs 75,80,86,90 --repeat 2 \
        --cusz .gpu-carry/cuSZ.tar.gz --json OUT.json

Small scale here: --workers 1,2 --archs 75,80 --repeat 1 --tus heavy. Each timed compile has a source of
its own (a `__device__` variable named by the run appended, which reaches cicc's and ptxas's inputs), so
BuildGrid's ActionCache, which kache reads first, never answers a timed run from an earlier one; the runs
of one index share that source across tools, and every remote object is compared with kache's local one
by every allocated section (tests/integration/elfsections.py); a difference fails the run. A fresh server
per worker count. Prints a Markdown table and writes the rows as JSON (--json); `--chart JSON PNG` draws
them (Debian's python3-matplotlib). Needs BuildGrid and PostgreSQL (scripts/setup-tests.sh here;
bench/buildgrid_carry.sh on the GPU machine).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import elfsections  # noqa: E402
import genproject  # noqa: E402
import servers  # noqa: E402

# A translation unit whose device code takes cicc and ptxas a while per architecture: many kernels, each
# unrolled math (the "heavy TU" of the stage benchmarks, generated here so the benchmark needs no project).
def heavy_source(kernels):
    parts = ["#include <cuda_runtime.h>\n"]
    for i in range(kernels):
        parts.append(f"""
__global__ void k{i}(float* x, const float* y, int n) {{
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.0f;
#pragma unroll 64
  for (int j = 0; j < 256; ++j) acc += sinf(y[(t + j * {i + 1}) % n]) * cosf(acc + j);
  if (t < n) x[t] = acc;
}}
""")
    return "".join(parts)


def gencodes(archs):
    out = []
    for a in archs:
        out += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return out


def timed(argv, cwd, env):
    t0 = time.monotonic()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return elapsed


def clean_env(cache_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KACHE_")}
    env.update({"KACHE_DIR": cache_dir, "KACHE_NVCC_STAGES": "1", "KACHE_CONFIG": os.path.join(cache_dir, "none.toml")})
    return env


def with_nonce(text, label, i):
    # Survives preprocessing into cicc's input and, as a global, into the PTX ptxas reads.
    return text + f"\n__device__ int kache_bench_{label}_run_{i};\n"


class Rows:
    def __init__(self):
        self.rows = []

    def add(self, tu, what, times, **extra):
        self.rows.append(dict({"tu": tu, "what": what, "seconds": min(times), "runs": times}, **extra))
        print(f"{tu}: {what}: {min(times):.2f} s {['%.2f' % t for t in times]}", flush=True)


def single_tus(args, ws):
    genproject.write_headers(ws)
    tus = {"heavy": heavy_source(args.kernels), "thrust": genproject.thrust_source(0, False)}
    return {name: text for name, text in tus.items() if name in args.tus}


def run(args):
    ws = tempfile.mkdtemp(prefix="kache-bench-re-")
    nvcc = shutil.which("nvcc")
    kache = os.path.abspath(args.kache)
    rows = Rows()
    tus = single_tus(args, ws)
    repeat = {"heavy": args.repeat, "thrust": 1}

    def sources(name):
        out = []
        for i in range(repeat[name]):
            src = os.path.join(ws, f"{name}_{i}.cu")
            with open(src, "w") as f:
                f.write(with_nonce(tus[name], name, i))
            out.append(src)
        return out

    def compile_argv(src):
        return ["-std=c++17", "-O2", "-I", os.path.join(ws, "include"), "-c", src] + gencodes(args.archs)

    def timed_runs(name, tool_argv, env_of, tag):
        times = []
        for i, src in enumerate(sources(name)):
            cache = os.path.join(ws, f"cache-{name}-{tag}-{i}")  # cold: a new cache every run
            times.append(timed(tool_argv + compile_argv(src) + ["-o", os.path.join(ws, f"{name}-{tag}-{i}.o")],
                               ws, env_of(cache)))
        return times

    for name in tus:
        rows.add(name, "nvcc", timed_runs(name, [nvcc], lambda c: dict(os.environ), "plain"))
        rows.add(name, f"nvcc --threads {args.threads}",
                 timed_runs(name, [nvcc, "--threads", str(args.threads)], lambda c: dict(os.environ), "threads"))
        rows.add(name, "kache (no remote execution)", timed_runs(name, [kache, "nvcc"], clean_env, "local"))
    cusz_local = None
    if args.cusz:
        cusz_build(args, ws, kache, None, rows, "plain")  # timed only
        cusz_local = cusz_build(args, ws, kache, None, rows, "local")
    # A fresh server for each worker count: a worker stopped by a kill stays in the scheduler's books until
    # its session expires, and actions assigned to it would wait for that.
    for n in args.workers:
        with servers.BuildGrid() as grid:
            workers = [servers.KacheWorker(kache, grid.url, f"bench-{n}-{i}", nvcc=nvcc) for i in range(n)]
            try:
                def remote_env(cache, url=grid.url):
                    env = clean_env(cache)
                    env["KACHE_REMOTE_EXECUTION"] = url
                    return env
                for name in tus:
                    before = sum(len(w.ran()) for w in workers)
                    times = timed_runs(name, [kache, "nvcc"], remote_env, f"remote{n}")
                    rows.add(name, f"kache, {n} worker(s)", times, workers=n,
                             actions_on_workers=sum(len(w.ran()) for w in workers) - before)
                    for i in range(repeat[name]):
                        local = elfsections.allocated_sections(os.path.join(ws, f"{name}-local-{i}.o"))
                        if elfsections.allocated_sections(os.path.join(ws, f"{name}-remote{n}-{i}.o")) != local:
                            raise SystemExit(f"{name}: the object built with {n} worker(s) differs from kache's local one")
                if args.cusz and n in args.cusz_workers:
                    before = sum(len(w.ran()) for w in workers)
                    objs = cusz_build(args, ws, kache, grid.url, rows, f"remote{n}", workers=n)
                    rows.rows[-1]["actions_on_workers"] = sum(len(w.ran()) for w in workers) - before
                    differ = [rel for rel, p in cusz_local.items()
                              if elfsections.allocated_sections(p) != elfsections.allocated_sections(objs.get(rel, p + ".none"))]
                    if differ:
                        raise SystemExit(f"cuSZ: {len(differ)} objects built with {n} workers differ from kache's local ones: {differ[:3]}")
            finally:
                for w in workers:
                    w.stop()
    shutil.rmtree(ws, ignore_errors=True)
    return rows.rows


def cusz_build(args, ws, kache, grid_url, rows, tag, workers=None):
    """A cold CMake + Ninja build of cuSZ (-j16) for the benchmark's architectures, in one place every time
    (objects comparable), plain or through kache with an empty cache; returns its objects (kept copies)."""
    import tarfile
    src = os.path.join(ws, "cusz-src")
    if not os.path.isdir(src):
        with tarfile.open(args.cusz) as t:
            t.extractall(src)
    top = os.path.join(src, os.listdir(src)[0])
    bdir = os.path.join(ws, "cusz-build")
    shutil.rmtree(bdir, ignore_errors=True)
    cache = os.path.join(ws, f"cache-cusz-{tag}")
    env = dict(os.environ) if tag == "plain" else clean_env(cache)
    if grid_url:
        env["KACHE_REMOTE_EXECUTION"] = grid_url
    cmd = ["cmake", "-S", top, "-B", bdir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DPSZ_BACKEND=CUDA",
           "-DCMAKE_CUDA_ARCHITECTURES=" + ";".join(args.archs)]
    if tag != "plain":
        cmd += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={kache}" for lang in ("C", "CXX", "CUDA")]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"cuSZ: cmake failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    t = timed(["ninja", "-C", bdir, f"-j{args.jobs}"], ws, env)
    what = {"plain": "nvcc", "local": "kache (no remote execution)"}.get(tag, f"kache, {workers} worker(s)")
    rows.add(f"cuSZ ({args.jobs} jobs)", what, [t], **({"workers": workers} if workers else {}))
    kept = {}
    for d, _, files in os.walk(bdir):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                rel = os.path.relpath(p, bdir)
                dst = os.path.join(ws, f"cusz-objs-{tag}", rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(p, dst)
                kept[rel] = dst
    return kept


def chart(json_path, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data = json.load(open(json_path))
    tus = list(dict.fromkeys(r["tu"] for r in data["rows"]))
    fig, axes = plt.subplots(1, len(tus), figsize=(5 * len(tus), 4.5))
    axes = axes if len(tus) > 1 else [axes]
    for ax, tu in zip(axes, tus):
        rs = [r for r in data["rows"] if r["tu"] == tu]
        base = next(r["seconds"] for r in rs if r["what"] == "nvcc")
        labels = [r["what"].replace(" (no remote execution)", "\n(local)") for r in rs]
        bars = ax.bar(range(len(rs)), [r["seconds"] for r in rs],
                      color=["#888" if "worker" not in r["what"] else "#2a7" for r in rs])
        for b, r in zip(bars, rs):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{base / r['seconds']:.2f}x", ha="center",
                    va="bottom", fontsize=8)
        ax.set_xticks(range(len(rs)), labels, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("seconds (cold miss, best of runs)")
        ax.set_title(f"{tu}, {len(data['archs'])} architectures")
    fig.suptitle("Remote execution (BuildGrid on loopback, kache workers): speed-up over plain nvcc")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kache", default=os.path.join(HERE, "..", "build", "kache"))
    p.add_argument("--workers", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--archs", default="75,80,86,90", type=lambda s: s.split(","))
    p.add_argument("--kernels", type=int, default=24)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tus", default="heavy,thrust", type=lambda s: s.split(","))
    p.add_argument("--cusz", help="cuSZ tarball (bench/real_projects.py's): a cold build with --cusz-workers")
    p.add_argument("--cusz-workers", default="8", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--json")
    p.add_argument("--chart", nargs=2, metavar=("JSON", "PNG"), help="draw a run's JSON, run nothing")
    args = p.parse_args()
    if args.chart:
        return chart(*args.chart)
    if servers.missing_buildgrid():
        raise SystemExit(servers.missing_buildgrid())
    rows = run(args)
    print(f"\n| cold miss, {len(args.archs)} architectures | tool | seconds | vs plain nvcc | actions on workers |"
          "\n|---|---|---|---|---|")
    for r in rows:
        base = next(b["seconds"] for b in rows if b["tu"] == r["tu"] and b["what"] == "nvcc")
        print(f"| {r['tu']} | {r['what']} | {r['seconds']:.2f} | {base / r['seconds']:.2f}x | "
              f"{r.get('actions_on_workers', '')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"archs": args.archs, "kernels": args.kernels, "repeat": args.repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
