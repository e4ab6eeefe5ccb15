#!/usr/bin/python3
"""kache's cost as the cache and the team grow (issue 26). A benchmark: it asserts nothing on time.

  /usr/bin/python3 bench/scale.py latency --kache build-rel/kache [--sizes 1000,100000,1000000]
  /usr/bin/python3 bench/scale.py concurrency --kache build-rel/kache-static [--ways 1,4,16,64]
  /usr/bin/python3 bench/scale.py chart      # bench/results/scale.json -> scale.md, scale.png

latency: the cache is filled synthetically (entry files of 1 KiB written straight into the store's
layout, <k0>/<k1k2>/<key>, with each shard's counters), growing from the smallest size to the largest;
at each size it times, with gcc on a tiny C TU: a hit (median of --runs), a miss (distinct sources,
unbounded cache), `kache -s`, and compiles while the cache sits at its limit (KACHE_MAX_SIZE = the
size it holds, so every put evicts): their median and their worst.

concurrency: 512 tiny C TUs compiled as hits, `xargs -P W` for each W, by kache, by ccache and by a
do-nothing static program in kache's place (the process floor: what starting a process costs); hits
per second = 512 / wall time, the median of --repeat rounds that interleave the tools, with kache's
ratio to each other tool taken per round (paired). Results are merged into --out/scale.json under the machine's name.
"""
import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GCC = shutil.which("gcc") or "/usr/bin/gcc"
TINY = "int f%d(int x) { return x * %d + 1; }\n"


def run_ms(argv, env, cwd):
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t0) * 1e3
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {r.stderr.decode()[-2000:]}")
    return ms


def clean_env(cache, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KACHE_") and not k.startswith("CCACHE_")}
    env.update({"KACHE_DIR": cache, "KACHE_CONFIG": os.path.join(cache, "..", "kache.toml"), "KACHE_MAX_SIZE": "0"})
    env.update(extra)
    return env


class Filler:
    """Grows a synthetic store; keeps each shard's bytes and entries to write its counters."""

    def __init__(self, cache, entry_size=1024):
        self.cache, self.size, self.n = cache, entry_size, 0
        self.payload = os.urandom(entry_size)
        self.shards = {}
        self.made = set()

    def grow_to(self, n):
        old = time.time() - 86400
        while self.n < n:
            key = hashlib.sha256(b"fill%d" % self.n).hexdigest()
            d = os.path.join(self.cache, key[0], key[1:3])
            if d not in self.made:
                os.makedirs(d, exist_ok=True)
                self.made.add(d)
            p = os.path.join(d, key)
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, self.payload)
            os.close(fd)
            os.utime(p, (old + self.n * 1e-3, old + self.n * 1e-3))
            b, e = self.shards.get(key[0], (0, 0))
            self.shards[key[0]] = (b + self.size, e + 1)
            self.n += 1
        self.write_counters()

    def write_counters(self):
        for shard, (b, e) in self.shards.items():
            with open(os.path.join(self.cache, shard, "size"), "w") as f:
                f.write(f"{b} {e}\n")


def shard_counters(cache):
    total_b = total_e = 0
    for shard in "0123456789abcdef":
        try:
            with open(os.path.join(cache, shard, "size")) as f:
                b, e = f.read().split()
            total_b += int(b)
            total_e += int(e)
        except (OSError, ValueError):
            pass
    return total_b, total_e


def latency(args):
    work = tempfile.mkdtemp(prefix="kache-scale-", dir=args.work)
    cache = os.path.join(work, "cache")
    src_dir = os.path.join(work, "src")
    os.makedirs(src_dir)
    filler = Filler(cache)
    kache = os.path.abspath(args.kache)
    out = []
    serial = [0]

    def source():
        serial[0] += 1
        p = os.path.join(src_dir, f"m{serial[0]}.c")
        with open(p, "w") as f:
            f.write(TINY % (serial[0], serial[0]))
        os.utime(p, (time.time() - 60, time.time() - 60))
        return p

    def compile_ms(src, env):
        return run_ms([kache, GCC, "-c", src, "-o", os.path.join(work, "o.o")], env, work)

    for n in [int(x) for x in args.sizes.split(",")]:
        t0 = time.time()
        filler.grow_to(n)
        fill_s = time.time() - t0
        env = clean_env(cache)
        hit_src = source()
        compile_ms(hit_src, env)
        compile_ms(hit_src, env)
        hits = [compile_ms(hit_src, env) for _ in range(args.runs)]
        misses = [compile_ms(source(), env) for _ in range(args.miss_runs)]
        stats_ms = [run_ms([kache, "-s"], env, work) for _ in range(args.runs)]
        size, entries = shard_counters(cache)
        at_limit_env = clean_env(cache, KACHE_MAX_SIZE=str(size))
        at_limit = [compile_ms(source(), at_limit_env) for _ in range(args.miss_runs)]
        size_after, entries_after = shard_counters(cache)
        row = {"entries": entries, "fill_s": round(fill_s, 1),
               "hit_ms": statistics.median(hits), "hit_min_ms": min(hits),
               "miss_ms": statistics.median(misses), "stats_ms": statistics.median(stats_ms),
               "at_limit_ms": statistics.median(at_limit), "at_limit_worst_ms": max(at_limit),
               "limit": size, "size_after": size_after, "entries_after": entries_after}
        print(json.dumps(row), flush=True)
        out.append(row)
        # What kache stored and evicted since is in its counters: the next fill adds to those.
        filler.shards = {}
        for shard in "0123456789abcdef":
            try:
                with open(os.path.join(cache, shard, "size")) as f:
                    b, e = f.read().split()
                filler.shards[shard] = (int(b), int(e))
            except (OSError, ValueError):
                pass
    shutil.rmtree(work, ignore_errors=True)
    return {"latency": out, "kache": kache}


def concurrency(args):
    work = tempfile.mkdtemp(prefix="kache-conc-", dir=args.work)
    srcs = os.path.join(work, "src")
    os.makedirs(srcs)
    names = []
    for i in range(args.units):
        p = os.path.join(srcs, f"t{i}.c")
        with open(p, "w") as f:
            f.write(TINY % (i, i))
        os.utime(p, (time.time() - 60, time.time() - 60))
        names.append(f"t{i}")
    floor = os.path.join(work, "floor")
    if args.floor:
        shutil.copy(args.floor, floor)
    else:
        with open(floor + ".c", "w") as f:
            f.write("int main(void) { return 0; }\n")
        subprocess.run([GCC, "-static", "-O2", "-o", floor, floor + ".c"], check=True)
    tools = {"kache": [os.path.abspath(args.kache), GCC], "floor": [floor, GCC]}
    if args.ccache and shutil.which(args.ccache):
        tools["ccache"] = [shutil.which(args.ccache), GCC]
    batches = {}
    for tool, launcher in tools.items():
        cache = os.path.join(work, "cache-" + tool)
        env = clean_env(cache, CCACHE_DIR=cache, CCACHE_NOHASHDIR="1", CCACHE_BASEDIR=work)
        argv = launcher + ["-c", os.path.join(srcs, "{}.c"), "-o", os.path.join(work, "obj-" + tool, "{}.o")]
        os.makedirs(os.path.join(work, "obj-" + tool))

        def batch(ways, argv=argv, env=env):
            cmd = ["xargs", "-P", str(ways), "-I{}"] + argv
            t0 = time.perf_counter()
            subprocess.run(cmd, input="\n".join(names) + "\n", text=True, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return time.perf_counter() - t0

        batches[tool] = batch
        batch(max(int(w) for w in args.ways.split(",")))  # fill (misses)
        batch(4)  # the second build of each TU: direct-mode records complete
    # Interleaved: every repeat runs each tool once per width, in an order rotated per repeat, so that a
    # drift of the machine (another tenant, a warming page cache) falls on all tools alike. Each tool's
    # figure is the median rate; the ratios are medians of the per-repeat ratios (paired, so drift
    # between repeats cancels).
    widths = [int(w) for w in args.ways.split(",")]
    order = list(tools)
    secs = {tool: {w: [] for w in widths} for tool in tools}
    for rep in range(args.repeat):
        for w in widths:
            for tool in order[rep % len(order):] + order[:rep % len(order)]:
                secs[tool][w].append(batches[tool](w))
    result = {tool: {str(w): round(args.units / statistics.median(secs[tool][w]), 1) for w in widths}
              for tool in tools}
    best = {tool: {str(w): round(args.units / min(secs[tool][w]), 1) for w in widths} for tool in tools}
    ratios = {}
    for other in [t for t in tools if t != "kache"]:
        ratios[f"kache/{other}"] = {str(w): round(statistics.median(
            o / k for k, o in zip(secs["kache"][w], secs[other][w])), 3) for w in widths}
    for tool in tools:
        print(tool, json.dumps(result[tool]), flush=True)
    print("ratios (hits/s, median of paired repeats):", json.dumps(ratios), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return {"concurrency": result, "concurrency_best": best, "concurrency_ratios": ratios,
            "repeats": args.repeat, "units": args.units, "cpus": os.cpu_count()}


def merge(path, machine, part):
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data.setdefault(machine, {}).update(part)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def chart(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(args.out, "scale.json")) as f:
        data = json.load(f)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    lines = ["# kache at scale (issue 26)", "", "Produced by `bench/scale.py` (see its docstring); times in ms.", ""]
    for machine, d in data.items():
        if d.get("note"):
            lines += [f"**{machine}**: {d['note']}", ""]
        lat = d.get("latency")
        if lat:
            xs = [r["entries"] for r in lat]
            ax = axes[0]
            for key, label in (("hit_ms", "hit"), ("miss_ms", "miss"),
                               ("at_limit_worst_ms", "worst compile at the limit"), ("stats_ms", "kache -s")):
                ax.plot(xs, [r[key] for r in lat], marker="o", label=f"{label} ({machine})")
            ax.set_xscale("log")
            ax.set_xlabel("entries in the cache")
            ax.set_ylabel("ms (median; worst for the limit)")
            ax.set_title("latency against cache size (gcc, tiny C TU)")
            ax.legend(fontsize=7)
            lines += [f"## {machine}: latency", "",
                      "| entries | hit | miss | kache -s | at the limit (median) | at the limit (worst) |",
                      "|---:|---:|---:|---:|---:|---:|"]
            for r in lat:
                lines.append(f"| {r['entries']:,} | {r['hit_ms']:.1f} | {r['miss_ms']:.1f} | {r['stats_ms']:.1f} | "
                             f"{r['at_limit_ms']:.1f} | {r['at_limit_worst_ms']:.1f} |")
            lines.append("")
        conc = d.get("concurrency")
        if conc:
            ax = axes[1]
            for tool, per in conc.items():
                ws = sorted(int(w) for w in per)
                ax.plot(ws, [per[str(w)] for w in ws], marker="o", label=f"{tool} ({machine}, {d.get('cpus')} CPUs)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrent compiles (xargs -P)")
            ax.set_ylabel("hits per second")
            ax.set_title(f"{d.get('units')} tiny C TUs, all hits")
            ax.legend(fontsize=7)
            ws = sorted({int(w) for per in conc.values() for w in per})
            lines += [f"## {machine}: hits per second ({d.get('cpus')} CPUs)", "",
                      "| tool | " + " | ".join(f"-P {w}" for w in ws) + " |", "|---|" + "---:|" * len(ws)]
            for tool, per in conc.items():
                lines.append(f"| {tool} | " + " | ".join(str(per.get(str(w), "")) for w in ws) + " |")
            lines.append("")
            ratios = d.get("concurrency_ratios")
            if ratios:
                lines += [f"Medians of {d.get('repeats')} interleaved repeats. kache's rate over the others', "
                          "the median of the per-repeat ratios (paired):", "",
                          "| ratio | " + " | ".join(f"-P {w}" for w in ws) + " |", "|---|" + "---:|" * len(ws)]
                for name, per in ratios.items():
                    lines.append(f"| {name} | " + " | ".join(str(per.get(str(w), "")) for w in ws) + " |")
                lines.append("")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "scale.png"), dpi=110)
    with open(os.path.join(args.out, "scale.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["latency", "concurrency", "chart"])
    ap.add_argument("--kache", default=os.path.join(HERE, "..", "build", "kache"))
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--miss-runs", type=int, default=8)
    ap.add_argument("--ways", default="1,4,16,64")
    ap.add_argument("--units", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ccache", default="ccache")
    ap.add_argument("--floor", default="", help="a prebuilt do-nothing static program")
    ap.add_argument("--machine", default=platform.node())
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    if args.what == "chart":
        chart(args)
        return
    part = latency(args) if args.what == "latency" else concurrency(args)
    os.makedirs(args.out, exist_ok=True)
    merge(os.path.join(args.out, "scale.json"), args.machine, part)


if __name__ == "__main__":
    sys.exit(main())
