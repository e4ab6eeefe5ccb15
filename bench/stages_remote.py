"""Issue 24's scenario (c) through a remote: a one-architecture build (sm_90) after the four-architecture
build, on a second machine whose local cache is empty and whose stages come from an HTTP remote.

Not a test: nothing here fails on a timing. Starts its own HTTP store on loopback (GET/PUT/DELETE of
files, what kache's http:// remote speaks), then for each round, with fresh caches:

  ci          kache, stages on, 4 architectures, cache dir A, the remote: fills the remote
  local       kache, stages on, sm_90 only, cache dir A, no remote (the developer who built the CI set)
  remote      kache, stages on, sm_90 only, new empty cache dir B, the remote (a second machine)
  remote_off  kache, stages off, sm_90 only, new empty cache dir C, no remote (a whole-object miss; the
              remote would serve the object the remote build stored)
  nvcc        plain nvcc, sm_90 only

on bench/stagesproject.py's ptxas-heavy TU. Writes OUT/stages-remote.json and OUT/stages-remote.md.

    python3 bench/stages_remote.py --kache PATH --out DIR [--rounds 3]
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stagesproject  # noqa: E402


class Store(http.server.BaseHTTPRequestHandler):
    root = ""

    def log_message(self, *args):
        pass

    def _path(self):
        return os.path.join(self.root, self.path.strip("/").replace("/", "_"))

    def do_GET(self):
        p = self._path()
        if not os.path.exists(p):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(p, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        with open(self._path() + ".tmp", "wb") as f:
            f.write(data)
        os.replace(self._path() + ".tmp", self._path())
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        try:
            os.unlink(self._path())
        except FileNotFoundError:
            pass
        self.send_response(204)
        self.end_headers()


def gencodes(archs):
    out = []
    for a in archs:
        out += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kache-stages-remote")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    kache = os.path.abspath(args.kache)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    os.makedirs(args.out, exist_ok=True)
    tu = stagesproject.write(args.work, 1)["heavy"]

    def timed(cmd, env, out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        t0 = time.perf_counter()
        subprocess.run(cmd + ["-std=c++17", "-O2", "-c", tu, "-o", out], env=env, check=True, cwd=args.work)
        return time.perf_counter() - t0

    def stats(env):
        r = subprocess.run([kache, "-s", "--json"], env=env, capture_output=True, text=True, check=True)
        s = json.loads(r.stdout)
        return {"stages": s["stages"], "remote_reads": s["remote_reads"], "misses": s["misses"]}

    rounds = []
    for i in range(args.rounds):
        store_dir = os.path.join(args.work, f"store{i}")
        os.makedirs(store_dir)
        handler = type("H", (Store,), {"root": store_dir})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/kache"
        base = {k: v for k, v in os.environ.items() if not k.startswith("KACHE_")}

        def env(cache, stages, remote):
            e = dict(base)
            e["KACHE_DIR"] = os.path.join(args.work, f"r{i}", cache)
            e["KACHE_CONFIG"] = os.path.join(args.work, "none.toml")
            e["KACHE_NVCC_STAGES"] = "1" if stages else "0"
            if remote:
                e["KACHE_REMOTE_STORAGE"] = url
            return e

        row = {}
        row["ci"] = timed([kache, "nvcc"] + gencodes([75, 80, 86, 90]), env("A", True, True), f"r{i}/ci.o")
        row["local"] = timed([kache, "nvcc"] + gencodes([90]), env("A", True, False), f"r{i}/local.o")
        row["remote"] = timed([kache, "nvcc"] + gencodes([90]), env("B", True, True), f"r{i}/remote.o")
        row["remote_off"] = timed([kache, "nvcc"] + gencodes([90]), env("C", False, False), f"r{i}/off.o")
        row["nvcc"] = timed(["nvcc"] + gencodes([90]), base, f"r{i}/nvcc.o")
        row["stats_remote"] = stats(env("B", True, True))
        with open(os.path.join(args.work, f"r{i}/remote.o"), "rb") as a, \
                open(os.path.join(args.work, f"r{i}/off.o"), "rb") as b:
            row["remote_equals_stages_off"] = a.read() == b.read()
        server.shutdown()
        rounds.append(row)
        print(json.dumps(row), flush=True)

    result = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "rounds": rounds,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(os.path.join(args.out, "stages-remote.json"), "w") as f:
        json.dump(result, f, indent=1)
    med = {k: statistics.median(r[k] for r in rounds) for k in ("ci", "local", "remote", "remote_off", "nvcc")}
    lines = [
        "# Stage cache: one architecture after four, through a remote (issue 24, scenario c)",
        "",
        f"Measured by `bench/stages_remote.py` on {result['machine']} ({result['cpus']} CPUs), {result['when']};"
        f" {len(rounds)} rounds, fresh caches and a fresh HTTP store on loopback each round; medians.",
        "TU: bench/stagesproject.py's ptxas-heavy kernel, `-std=c++17 -O2`.",
        "",
        "| build | wall (s, median) | ÷ plain nvcc |",
        "|---|---:|---:|",
    ]
    names = {"ci": "kache, stages on, 4 architectures (fills the remote)",
             "local": "kache, stages on, sm_90 only, same cache dir (local stages)",
             "remote": "kache, stages on, sm_90 only, empty cache dir, stages from the remote",
             "remote_off": "kache, stages off, sm_90 only, empty cache dir, no remote (whole-object miss)",
             "nvcc": "plain nvcc, sm_90 only"}
    for k, label in names.items():
        lines.append(f"| {label} | {med[k]:.2f} | {med[k] / med['nvcc']:.2f} |")
    lines += ["", "Per round (s): " + "; ".join(
        f"round {i + 1}: local {r['local']:.2f}, remote {r['remote']:.2f}, stages off {r['remote_off']:.2f}, nvcc "
        f"{r['nvcc']:.2f}" for i, r in enumerate(rounds)),
        "", "Stage counts of the remote build (kache -s --json of cache dir B): " + "; ".join(
        json.dumps(r["stats_remote"]) for r in rounds),
        "", "Remote build's object byte-equal to the stages-off build's: " + ", ".join(
        str(r["remote_equals_stages_off"]) for r in rounds), ""]
    with open(os.path.join(args.out, "stages-remote.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
