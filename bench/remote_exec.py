#!/usr/bin/env python3
"""Remote execution benchmark (issue 34, docs/remote-execution.md): the wall time of a cold multi-architecture
nvcc miss whose cicc and ptxas run on `kache worker`s of a BuildGrid on loopback, against plain nvcc,
`nvcc --threads N` and kache without remote execution (stage cache on, cold).

For the GPU machine (16 cores): BuildGrid plus 1, 2, 4 and 8 workers, a 4-architecture heavy TU:

    python3 bench/remote_exec.py --kache build/kache --workers 1,2,4,8 --archs 75,80,86,90 --repeat 3

Small scale here: --workers 1,2 --archs 75,80 --repeat 1. Every remote object is compared with kache's local
one by every allocated section (tests/integration/elfsections.py); a difference fails the run. Prints a
Markdown table and writes the rows as JSON (--json). Needs scripts/setup.sh's BuildGrid venv and PostgreSQL.
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
import elfsections  # noqa: E402
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
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr}")
    return elapsed


def clean_env(cache_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KACHE_")}
    env.update({"KACHE_DIR": cache_dir, "KACHE_NVCC_STAGES": "1", "KACHE_CONFIG": os.path.join(cache_dir, "none.toml")})
    return env


def run(args):
    ws = tempfile.mkdtemp(prefix="kache-bench-re-")
    with open(os.path.join(ws, "heavy.cu"), "w") as f:
        f.write(heavy_source(args.kernels))
    nvcc = shutil.which("nvcc")
    kache = os.path.abspath(args.kache)
    base = ["-c", "heavy.cu"] + gencodes(args.archs)
    rows = []

    def best_of(label, argv, env_of, out):
        times = []
        for i in range(args.repeat):
            cache = os.path.join(ws, f"cache-{label}-{i}")  # cold: a new cache every run
            times.append(timed(argv + ["-o", out], ws, env_of(cache)))
        rows.append({"what": label, "seconds": min(times), "runs": times})
        print(f"{label}: {min(times):.2f} s", flush=True)

    best_of("nvcc", [nvcc] + base, lambda c: dict(os.environ), "plain.o")
    best_of(f"nvcc --threads {args.threads}", [nvcc, "--threads", str(args.threads)] + base,
            lambda c: dict(os.environ), "threads.o")
    best_of("kache (no remote execution)", [kache, "nvcc"] + base, clean_env, "local.o")
    local = elfsections.allocated_sections(os.path.join(ws, "local.o"))
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
                out = f"remote-{n}.o"
                best_of(f"kache, {n} worker(s)", [kache, "nvcc"] + base, remote_env, out)
                rows[-1]["actions_on_workers"] = sum(len(w.ran()) for w in workers)
                if elfsections.allocated_sections(os.path.join(ws, out)) != local:
                    raise SystemExit(f"the object built with {n} worker(s) differs from kache's local one")
            finally:
                for w in workers:
                    w.stop()
    shutil.rmtree(ws, ignore_errors=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kache", default=os.path.join(HERE, "..", "build", "kache"))
    p.add_argument("--workers", default="1,2,4,8", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--archs", default="75,80,86,90", type=lambda s: s.split(","))
    p.add_argument("--kernels", type=int, default=24)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()
    if servers.missing_buildgrid():
        raise SystemExit(servers.missing_buildgrid())
    rows = run(args)
    nvcc_s = rows[0]["seconds"]
    print(f"\n| cold miss, {len(args.archs)} architectures | seconds | vs plain nvcc |\n|---|---|---|")
    for r in rows:
        print(f"| {r['what']} | {r['seconds']:.2f} | {nvcc_s / r['seconds']:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"archs": args.archs, "kernels": args.kernels, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
