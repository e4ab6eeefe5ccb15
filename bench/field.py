#!/usr/bin/env python3
"""kache on a machine that looks like its users' (issue 39): the GPU machine's own compilers, as CMake
finds them (there /opt/gcc/bin/gcc and g++, shell wrappers running `g++-real -B/opt/gcc/bin/ "$@"`, also
nvcc's host compiler), with nothing set by hand. cuda-samples is built cold and then from a fresh build
directory, by ccache and by kache side by side in one run (kache's fresh build twice: with the
preprocessed fallback, the default, and without), plus plain cold; then the cost of a hit through the
wrapper against a hit through the driver it runs.

    python3 bench/field.py --kache PATH/kache --ccache PATH/ccache --tarballs DIR --out DIR [--jobs 16]

Writes DIR/field.json and DIR/field.md. Times are wall-clock seconds of `ninja -k 0` (configure not
counted), on the same machine in the same run.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_projects as rp  # noqa: E402


def cmake_compilers(bdir):
    found = {}
    with open(os.path.join(bdir, "CMakeCache.txt")) as f:
        for line in f:
            for lang in ("C", "CXX", "CUDA_HOST"):
                key = f"CMAKE_{lang}_COMPILER:"
                if line.startswith(key):
                    found[lang] = line.split("=", 1)[1].strip()
    for lang, path in list(found.items()):
        try:
            with open(path, "rb") as f:
                found[lang + "_is_script"] = f.read(2) == b"#!"
        except OSError:
            pass
    return found


def build(src, bdir, env, launcher, log, jobs):
    shutil.rmtree(bdir, ignore_errors=True)
    args = ["cmake", "-S", src, "-B", bdir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
    if launcher:
        args += [a.format(k=launcher) for a in rp.LAUNCHERS]
    rp.run(args, env=env, log=log)
    t = time.monotonic()
    r = subprocess.run(["ninja", "-C", bdir, "-k", "0", f"-j{jobs}"], env=env, capture_output=True, text=True)
    with open(log, "a") as f:
        f.write(f"$ ninja -C {bdir} (rc {r.returncode})\n{r.stdout[-6000:]}{r.stderr[-3000:]}\n")
    return round(time.monotonic() - t, 2)


def ccache_stats(ccache, env):
    out = rp.run([ccache, "--print-stats"], env=env).stdout
    s = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    return {"hits": int(s.get("direct_cache_hit", 0)) + int(s.get("preprocessed_cache_hit", 0)),
            "misses": int(s.get("cache_miss", 0))}


def hit_cost(kache, env, work, repeats=200):
    """Median wall time of a kache hit through the wrapper CMake found and through the driver it runs."""
    d = os.path.join(work, "hitcost")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "h.c"), "w") as f:
        f.write("int twice(int x) { return 2 * x; }\n")
    wrapper = env.get("CC") or shutil.which("gcc", path=env["PATH"])
    real = None
    with open(wrapper, "rb") as f:
        text = f.read(4096).decode(errors="replace")
    for word in text.split():
        if word.startswith("/") and os.access(word, os.X_OK) and not word.endswith("/"):
            real = word
            break
    times = {}
    if real:
        # kache picks its adapter by the name: the real driver through a link named gcc.
        os.makedirs(os.path.join(d, "bin"), exist_ok=True)
        link = os.path.join(d, "bin", "gcc")
        os.symlink(real, link)
        real = link
    drivers = {"wrapper " + wrapper: wrapper, "driver " + (real or "?"): real}
    for name, drv in drivers.items():
        if drv is None:
            continue
        rp.run([kache, drv, "-c", "h.c", "-o", "h.o"], cwd=d, env=env)
    for name, drv in drivers.items():
        if drv is None:
            continue
        samples = []
        for _ in range(repeats):
            t = time.perf_counter()
            rp.run([kache, drv, "-c", "h.c", "-o", "h.o"], cwd=d, env=env)
            samples.append(time.perf_counter() - t)
        times[name] = round(statistics.median(samples) * 1000, 3)
    return times


def nvcc_through_wrapper(kache, env, work):
    """nvcc with -ccbin $CXX (the wrapper): a miss, then a hit, and what kache -s says."""
    d = os.path.join(work, "nvcc")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "k.cu"), "w") as f:
        f.write("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n")
    rp.run([kache, "--zero-stats"], env=env)
    for _ in range(2):
        rp.run([kache, "nvcc", "-ccbin", env.get("CXX", "g++"), "-arch=sm_90", "-c", "k.cu", "-o", "k.o"], cwd=d, env=env)
    s = rp.stats(kache, env)
    return {k: s.get(k) for k in ("hits", "misses", "passthrough", "passthrough_reasons")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kache", required=True)
    ap.add_argument("--ccache", required=True)
    ap.add_argument("--tarballs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kache-field")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--skip-plain", action="store_true", help="no plain cold build (ccache's cold build stands near it)")
    ap.add_argument("--hit-cost-only", action="store_true", help="only the hit costs, and an nvcc -ccbin $CXX miss then hit")
    a = ap.parse_args()
    kache, ccache = os.path.abspath(a.kache), os.path.abspath(a.ccache)
    os.makedirs(a.out, exist_ok=True)
    shutil.rmtree(a.work, ignore_errors=True)
    log = os.path.join(a.out, "field.log")
    if a.hit_cost_only:
        env = dict(os.environ, KACHE_DIR=os.path.join(a.work, "kache-cache"))
        os.makedirs(a.work, exist_ok=True)
        result = {"hit_ms": hit_cost(kache, env, a.work), "nvcc_ccbin": nvcc_through_wrapper(kache, env, a.work)}
        with open(os.path.join(a.out, "field-hit.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(result, flush=True)
        return
    tarball, top, _, patch = rp.PROJECTS["cuda-samples"]
    src = rp.unpack(os.path.join(a.tarballs, tarball), top, patch, a.work)
    env = dict(os.environ)
    env["KACHE_DIR"] = os.path.join(a.work, "kache-cache")
    env["CCACHE_DIR"] = os.path.join(a.work, "ccache-cache")
    result = {"machine": os.uname().nodename, "jobs": a.jobs, "builds": {}}

    def record(name, seconds, counts=None):
        result["builds"][name] = {"seconds": seconds, **(counts or {})}
        with open(os.path.join(a.out, "field.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(name, result["builds"][name], flush=True)

    if not a.skip_plain:
        record("plain cold", build(src, os.path.join(a.work, "b-plain"), env, None, log, a.jobs))
    record("ccache cold", build(src, os.path.join(a.work, "b-c1"), env, ccache, log, a.jobs), ccache_stats(ccache, env))
    result["compilers"] = cmake_compilers(os.path.join(a.work, "b-c1"))
    rp.run([ccache, "-z"], env=env)
    record("ccache fresh dir", build(src, os.path.join(a.work, "b-c2"), env, ccache, log, a.jobs),
           ccache_stats(ccache, env))
    for name, bdir, extra in (("kache cold", "b-k1", {}), ("kache fresh dir", "b-k2", {}),
                              ("kache fresh dir, fallback off", "b-k3", {"KACHE_PREPROCESSED_FALLBACK": "0"})):
        e = dict(env, **extra)
        rp.run([kache, "--zero-stats"], env=e)
        seconds = build(src, os.path.join(a.work, bdir), e, kache, log, a.jobs)
        s = rp.stats(kache, e)
        record(name, seconds, {k: s.get(k) for k in ("hits", "misses", "passthrough", "preprocessed_hits",
                                                     "passthrough_reasons", "direct_hits")})
    result["hit_ms"] = hit_cost(kache, env, a.work)
    print("hit cost", result["hit_ms"], flush=True)
    with open(os.path.join(a.out, "field.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(a.out, "field.md"), "w") as f:
        f.write("| build | seconds | hits / misses / passthrough |\n|---|---:|---|\n")
        for name, b in result["builds"].items():
            f.write(f"| {name} | {b['seconds']} | {b.get('hits', '')} / {b.get('misses', '')} / "
                    f"{b.get('passthrough', '')} |\n")
        f.write(f"\ncompilers: {result['compilers']}\n\nhit ms (median of 200): {result['hit_ms']}\n")


if __name__ == "__main__":
    main()
