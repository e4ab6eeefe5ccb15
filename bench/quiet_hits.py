#!/usr/bin/python3
"""Wall time of kache hits, several kache binaries interleaved, for a quiet machine without hyperfine.

  /usr/bin/python3 bench/quiet_hits.py --bin before=DIR/kache --bin after=DIR/kache [--runs 200]

Each binary gets its own cache; one filling compile each (a second one when the first could not record a
direct-mode entry), then the runs alternate between the binaries (one hit of each per round), so drifting
load affects them alike. Prints the median and the minimum per binary and TU kind (the genproject.py tiny
kernel TU and thrust+cub TU), and checks every timed run was a hit. A benchmark: it asserts nothing on time.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genproject  # noqa: E402

NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def spawn_ms(argv, env):
    quiet = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=quiet)
    _, status = os.waitpid(pid, 0)
    ms = (time.perf_counter() - t0) * 1000
    if status != 0:
        raise RuntimeError(f"{argv} failed: {status}")
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH (PATH's name must be kache)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kache-quiet-hits"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--kinds", default="tiny,thrust")
    a = ap.parse_args()
    bins = [(b.split("=", 1)[0], os.path.abspath(b.split("=", 1)[1])) for b in a.bin]
    work = os.path.abspath(a.work)
    proj = os.path.join(work, "proj")
    if not os.path.isdir(os.path.join(proj, "src")):
        os.makedirs(proj, exist_ok=True)
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "genproject.py"),
                        proj, "--tiny", "1", "--thrust", "1"], check=True, capture_output=True)
        time.sleep(1.5)  # older than the racy-clean margin, so the fill records a direct-mode entry
    os.chdir(proj)
    os.makedirs("out", exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "KACHE_"))}
    conf = os.path.join(work, "kache.toml")
    open(conf, "a").close()
    srcs = sorted(os.listdir("src"))
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {a.runs} runs each")
    print("| TU | binary | median ms | min ms | hits |")
    print("|---|---|---:|---:|---|")
    for kind in a.kinds.split(","):
        src = next(s for s in srcs if s.startswith(kind))
        cmds = {}
        envs = {}
        for name, path in bins:
            env = dict(base, KACHE_DIR=os.path.join(work, "cache-" + name), KACHE_CONFIG=conf)
            out = f"out/{kind}-{name}.o"
            cmd = [path, NVCC] + genproject.CFLAGS.split() + ["-Iinclude", "-gencode", "arch=compute_75,code=sm_75",
                                                              "-c", f"src/{src}", "-o", out, "-MD", "-MF", out + ".d",
                                                              "-MT", out]
            for _ in range(2):
                subprocess.run(cmd, env=env, check=True, capture_output=True)
            subprocess.run([path, "-z"], env=env, check=True, capture_output=True)
            cmds[name], envs[name] = cmd, env
        times = {name: [] for name, _ in bins}
        for _ in range(5):
            for name, _ in bins:
                spawn_ms(cmds[name], envs[name])
        for _ in range(a.runs):
            for name, _ in bins:
                times[name].append(spawn_ms(cmds[name], envs[name]))
        for name, path in bins:
            st = json.loads(subprocess.run([path, "--show-stats", "--json"], env=envs[name], capture_output=True,
                                           text=True).stdout or "{}")
            print(f"| {kind} | {name} | {statistics.median(times[name]):.2f} | {min(times[name]):.2f} | "
                  f"{st.get('hits', '?')}/{a.runs + 5} |")


if __name__ == "__main__":
    main()
