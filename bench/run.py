#!/usr/bin/python3
"""kache benchmark: plain nvcc, ccache, sccache and kache side by side on one generated CUDA project.

Run with Debian's /usr/bin/python3 (it has matplotlib); `bash bench/run.sh` builds kache and does that.

Scenarios (each tool builds the same generated sources in its own build directory, own cache):
  cold    empty cache, empty build directory, `ninja -j N`
  warm    build directory removed ("clean"), rebuilt from the cache built by `cold`
  touch   `touch include/common.cuh` (mtime only, included by every TU), then `ninja`
  edit    a real edit of include/math.cuh (a constant changes; half of the TUs include it), then `ninja`
  hit     per-invocation latency of a cache hit, tiny TU and thrust+cub TU (hyperfine)
  miss    per-invocation time of a compile that misses (cache emptied before each run), same two TUs,
          tools interleaved in a rotating order; overhead = median(tool) / median(plain nvcc) - 1

Writes OUT/latest.json, OUT/latest.md and OUT/latest.png and prints the markdown tables.
This is a benchmark, not a test: it asserts nothing about time, but it does compare kache's objects
with plain nvcc's (by section) and reports any mismatch loudly.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genproject  # noqa: E402

ALL_TOOLS = ["nvcc", "ccache", "sccache", "kache"]
PEERS = ["ccache", "sccache"]

# Targets from the issue ("Direct mode ... and the benchmark that proves it"), for kache on this machine.
TARGET_HIT_TINY_MS = 3.0
TARGET_HIT_THRUST_MS = 8.0
TARGET_MISS_OVERHEAD_PCT = 2.0
TARGET_WARM_SPEEDUP = 50.0

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[bench {time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def loadavg() -> list[float]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def first_line(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        out = (p.stdout or p.stderr).strip().splitlines()
        return out[0] if out else ""
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable ({e})"


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def proc_cpu_s(pid: int) -> float:
    """utime + stime + reaped children's of a process that is not ours to wait for (sccache's server)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------------
# Tools


class Tool:
    """One way of running nvcc. `launcher` is prepended to the nvcc command line."""

    name = "?"

    def __init__(self, work: str, env: dict[str, str]):
        self.work = work
        self.env = env
        self.launcher: list[str] = []
        self.notes: list[str] = []

    def setup(self) -> None: ...

    def clear(self) -> None: ...

    def zero(self) -> None: ...

    def stats(self) -> dict:
        return {}

    def teardown(self) -> None: ...

    def version(self) -> str:
        return ""

    def cpu_s(self) -> float:
        """CPU seconds used by this tool outside our own children (a server); added to children_cpu_s()."""
        return 0.0

    def _run(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(args, env=self.env, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"{self.name}: {shlex.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
        return p


class Nvcc(Tool):
    name = "nvcc"

    def version(self) -> str:
        return "plain nvcc (no cache)"

    def stats(self) -> dict:
        return {"hits": 0, "misses": None, "uncached": None}


class Ccache(Tool):
    name = "ccache"

    def __init__(self, work, env):
        super().__init__(work, env)
        self.dir = os.path.join(work, "cache-ccache")
        env["CCACHE_DIR"] = self.dir
        self.launcher = [shutil.which("ccache") or "ccache"]
        self.notes.append("defaults (direct mode on, falls back to preprocessor mode; depend_mode off); "
                          "CCACHE_DIR isolated, max size 20G")

    def setup(self):
        os.makedirs(self.dir, exist_ok=True)
        self._run([self.launcher[0], "-M", "20G"])
        self.zero()

    def clear(self):
        self._run([self.launcher[0], "-C"])

    def zero(self):
        self._run([self.launcher[0], "-z"])

    def stats(self):
        raw = {}
        for line in self._run([self.launcher[0], "--print-stats"]).stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 2 and parts[1].strip().lstrip("-").isdigit():
                raw[parts[0]] = int(parts[1])
        info = {"cache_size_kibibyte", "files_in_cache", "stats_updated_timestamp", "stats_zeroed_timestamp",
                "cleanups_performed", "direct_cache_hit", "preprocessed_cache_hit", "cache_miss",
                "direct_cache_miss", "preprocessed_cache_miss", "primary_storage_hit", "primary_storage_miss",
                "secondary_storage_hit", "secondary_storage_miss", "local_storage_hit", "local_storage_miss",
                "local_storage_read_hit", "local_storage_read_miss", "local_storage_write",
                "remote_storage_hit", "remote_storage_miss", "remote_storage_read_hit", "remote_storage_read_miss",
                "remote_storage_write", "remote_storage_error", "remote_storage_timeout", "recache"}
        uncached = {k: v for k, v in raw.items() if k not in info and v}
        return {
            "hits": raw.get("direct_cache_hit", 0) + raw.get("preprocessed_cache_hit", 0),
            "direct_hits": raw.get("direct_cache_hit", 0),
            "preprocessed_hits": raw.get("preprocessed_cache_hit", 0),
            "misses": raw.get("cache_miss", 0),
            "uncached": sum(uncached.values()),
            "uncached_reasons": uncached,
        }

    def version(self):
        return first_line([self.launcher[0], "--version"])


class Sccache(Tool):
    name = "sccache"

    def __init__(self, work, env):
        super().__init__(work, env)
        self.dir = os.path.join(work, "cache-sccache")
        self.port = free_port()
        conf = os.path.join(work, "sccache.conf")
        env.update({
            "SCCACHE_DIR": self.dir,
            "SCCACHE_CACHE_SIZE": "20G",
            "SCCACHE_SERVER_PORT": str(self.port),
            "SCCACHE_IDLE_TIMEOUT": "0",
            "SCCACHE_CONF": conf,
            "SCCACHE_CACHED_CONF": os.path.join(work, "sccache-cached.conf"),
            "SCCACHE_ERROR_LOG": os.path.join(work, "sccache-server.log"),
        })
        self.launcher = [shutil.which("sccache") or "sccache"]
        self.notes.append(f"local disk cache, own server on 127.0.0.1:{self.port}, SCCACHE_IDLE_TIMEOUT=0, "
                          "cache size 20G; emptied for the cold build by stopping the server, deleting its dir and "
                          "restarting (not before miss runs: see run_miss)")
        self.running = False
        self.server_pid: int | None = None

    def _start(self):
        os.makedirs(self.dir, exist_ok=True)
        self._run([self.launcher[0], "--start-server"])
        self.running = True
        self.server_pid = self._find_server()

    def _find_server(self) -> int | None:
        want = f"SCCACHE_SERVER_PORT={self.port}".encode()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if b"sccache" not in f.read().split(b"\0")[0]:
                        continue
                with open(f"/proc/{d}/environ", "rb") as f:
                    if want in f.read().split(b"\0"):
                        return int(d)
            except OSError:
                continue
        return None

    def cpu_s(self) -> float:
        return proc_cpu_s(self.server_pid) if self.running and self.server_pid else 0.0

    def _stop(self):
        self._run([self.launcher[0], "--stop-server"], check=False)
        self.running = False

    def setup(self):
        with open(self.env["SCCACHE_CONF"], "w"):
            pass
        self._stop()
        self._start()

    def clear(self):
        self._stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        self._start()

    def zero(self):
        self._run([self.launcher[0], "--zero-stats"])

    def stats(self):
        out = self._run([self.launcher[0], "--show-stats", "--stats-format", "json"]).stdout
        try:
            s = json.loads(out)
            s = s.get("stats", s)
        except json.JSONDecodeError:
            return {"hits": None, "misses": None, "uncached": None, "raw": out}

        def total(v):
            if isinstance(v, dict):
                return sum(total(x) for x in v.get("counts", v).values()) if v else 0
            return v if isinstance(v, int) else 0

        hits, misses = total(s.get("cache_hits", {})), total(s.get("cache_misses", {}))
        uncached_keys = ["non_cacheable_compilations", "requests_unsupported_compiler", "requests_not_compile",
                         "requests_not_cacheable", "not_cached", "compile_fails", "cache_errors", "forced_recaches"]
        reasons = {}
        for k in uncached_keys:
            if k in s and total(s[k]):
                reasons[k] = s[k] if isinstance(s[k], int) else s[k].get("counts", s[k])
        return {
            "hits": hits,
            "misses": misses,
            "uncached": sum(total(s[k]) for k in uncached_keys if k in s and k != "not_cached"),
            "uncached_reasons": reasons,
            "compile_requests": s.get("compile_requests"),
        }

    def teardown(self):
        if self.running:
            self._stop()

    def version(self):
        return first_line([self.launcher[0], "--version"])


class Kache(Tool):
    name = "kache"

    def __init__(self, work, env, binary):
        super().__init__(work, env)
        self.dir = os.path.join(work, "cache-kache")
        conf = os.path.join(work, "kache.toml")
        env.update({"KACHE_DIR": self.dir, "KACHE_CONFIG": conf, "KACHE_MAX_SIZE": "20G"})
        self.launcher = [binary]
        self.notes.append("defaults (direct mode on), KACHE_DIR isolated, max size 20G")

    def setup(self):
        with open(self.env["KACHE_CONFIG"], "w"):
            pass
        os.makedirs(self.dir, exist_ok=True)
        self.zero()

    def clear(self):
        self._run([self.launcher[0], "--clear"])

    def zero(self):
        self._run([self.launcher[0], "--zero-stats"])

    def stats(self):
        s = json.loads(self._run([self.launcher[0], "--show-stats", "--json"]).stdout)
        return {
            "hits": s.get("hits"),
            "direct_hits": s.get("direct_hits"),
            "misses": s.get("misses"),
            "uncached": (s.get("passthrough") or 0) + (s.get("errors") or 0),
            "uncached_reasons": {**s.get("passthrough_reasons", {}), **s.get("error_reasons", {})},
            "not_stored": s.get("not_stored"),
            "not_stored_reasons": s.get("not_stored_reasons", {}),
            "corrupt_entries": s.get("corrupt_entries"),
        }

    def version(self):
        return first_line([self.launcher[0], "--version"])


# ---------------------------------------------------------------------------------------------------
# Object comparison (by section, like `objcopy -O binary --only-section=NAME`: raw, unrelocated bytes)

SECTION_RE = re.compile(r"^(\.text|\.data|\.rodata)(\..*)?$|^\.nv_fatbin$")


def elf_sections(path: str) -> list[tuple[str, bytes]]:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a little-endian ELF64 object")
    e_shoff = struct.unpack_from("<Q", data, 0x28)[0]
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    fmt = "<IIQQQQIIQQ"

    def header(i):
        return struct.unpack_from(fmt, data, e_shoff + i * e_shentsize)

    if e_shnum == 0:
        e_shnum = header(0)[5]
    if e_shstrndx == 0xFFFF:
        e_shstrndx = header(0)[6]
    strtab_off = header(e_shstrndx)[4]
    out = []
    for i in range(e_shnum):
        sh_name, sh_type, _flags, _addr, sh_offset, sh_size = header(i)[:6]
        end = data.index(b"\0", strtab_off + sh_name)
        name = data[strtab_off + sh_name:end].decode("latin-1")
        content = b"" if sh_type == 8 else data[sh_offset:sh_offset + sh_size]  # SHT_NOBITS
        out.append((name, content))
    return out


def section_digest(path: str) -> list[tuple[str, str]]:
    return sorted((n, hashlib.sha256(c).hexdigest()) for n, c in elf_sections(path) if SECTION_RE.match(n))


def verify_parser_with_objcopy(obj: str, tmp: str) -> bool | None:
    """Cross-check the section reader against objcopy on one object."""
    objcopy = shutil.which("objcopy")
    if not objcopy:
        return None
    mine = {n: c for n, c in elf_sections(obj)}
    for sec in (".text", ".nv_fatbin", ".rodata"):
        if sec not in mine:
            continue
        dst = os.path.join(tmp, "objcopy-check.bin")
        subprocess.run([objcopy, "-O", "binary", f"--only-section={sec}", obj, dst], check=True)
        with open(dst, "rb") as f:
            if f.read() != mine[sec]:
                return False
    return True


def compare_dirs(ref_dir: str, other_dir: str, tus: list) -> dict:
    identical, mismatched, missing = 0, [], []
    n_sections = 0
    for tu in tus:
        a, b = os.path.join(ref_dir, tu.obj), os.path.join(other_dir, tu.obj)
        if not (os.path.exists(a) and os.path.exists(b)):
            missing.append(tu.obj)
            continue
        da, db = section_digest(a), section_digest(b)
        n_sections += len(da)
        if da == db:
            identical += 1
        else:
            sa, sb = dict(da), dict(db)
            diff = sorted(n for n in set(sa) | set(sb) if sa.get(n) != sb.get(n))
            mismatched.append({"object": tu.obj, "sections": diff[:12], "n_sections_differing": len(diff)})
    return {"objects": len(tus), "identical": identical, "mismatched": mismatched, "missing": missing,
            "sections_compared": n_sections}


# ---------------------------------------------------------------------------------------------------
# The benchmark


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.proj = os.path.join(self.work, "project")
        self.nvcc = shutil.which("nvcc")
        if not self.nvcc:
            sys.exit("nvcc not found on PATH")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CCACHE_", "SCCACHE_", "KACHE_", "RUSTC_WRAPPER"))
               and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH", "CPLUS_INCLUDE_PATH")}
        self.env = env
        tools = {"nvcc": lambda: Nvcc(self.work, env), "ccache": lambda: Ccache(self.work, env),
                 "sccache": lambda: Sccache(self.work, env), "kache": lambda: Kache(self.work, env, args.kache)}
        self.tools = {n: tools[n]() for n in args.tools}
        self.results: dict = {"scenarios": {}, "hit_latency": {}, "miss": {}, "correctness": {}, "anomalies": []}

    def anomaly(self, msg: str) -> None:
        log("ANOMALY: " + msg)
        self.results["anomalies"].append(msg)

    # -- project builds --------------------------------------------------------------------------

    def build_dir(self, tool: str) -> str:
        return os.path.join(self.proj, f"build-{tool}")

    def fresh_build_dir(self, tool: str) -> None:
        d = self.build_dir(tool)
        shutil.rmtree(d, ignore_errors=True)
        genproject.write_ninja(d, self.tus, shlex.join(self.tools[tool].launcher), self.nvcc)

    def ninja(self, tool: str, scenario: str, rep: int) -> dict:
        t = self.tools[tool]
        t.zero()
        logf = os.path.join(self.work, "logs", f"{scenario}-{tool}-{rep}.log")
        la = loadavg()
        cpu0 = children_cpu_s() + t.cpu_s()
        start = time.perf_counter()
        with open(logf, "w") as f:
            p = subprocess.run(["ninja", "-C", self.build_dir(tool), "-j", str(self.args.jobs)],
                               env=self.env, stdout=f, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
        cpu = children_cpu_s() + t.cpu_s() - cpu0
        with open(logf) as f:
            text = f.read()
        steps = len(re.findall(r"^\[\d+/\d+\] ", text, re.M))
        stats = t.stats()
        rec = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 3), "steps": steps, "ok": p.returncode == 0, "stats": stats,
               "loadavg_before": la, "log": os.path.relpath(logf, self.work)}
        if p.returncode != 0:
            self.anomaly(f"{tool}: {scenario} build failed (ninja exit {p.returncode}), see {logf}")
        log(f"  {scenario:5s} {tool:8s} {wall:8.2f} s (cpu {cpu:7.2f} s, load {la[0] if la else '?'})  steps={steps} hits={stats.get('hits')} "
            f"misses={stats.get('misses')} uncached={stats.get('uncached')}")
        return rec

    def scenario(self, name: str, reps: dict[str, int], before=None, expect_steps: int | None = None,
                 order: list[str] | None = None) -> None:
        out = {}
        for tool in order or list(self.tools):
            runs = []
            for r in range(reps.get(tool, 1)):
                if before:
                    before(tool, r)
                runs.append(self.ninja(tool, name, r))
                if expect_steps is not None and runs[-1]["steps"] != expect_steps:
                    self.anomaly(f"{tool}: {name} ran {runs[-1]['steps']} compile steps, expected {expect_steps}")
            out[tool] = {"runs": runs, "median_s": median([x["wall_s"] for x in runs if x["ok"]]),
                         "median_cpu_s": median([x["cpu_s"] for x in runs if x["ok"]])}
        self.results["scenarios"][name] = {t: out[t] for t in self.tools if t in out}

    def settle(self) -> None:
        """Bring every build directory up to date again, untimed (a header touched for one tool's run
        is newer than the objects of the tools that ran before it)."""
        for tool in self.tools:
            logf = os.path.join(self.work, "logs", f"settle-{tool}.log")
            with open(logf, "w") as f:
                subprocess.run(["ninja", "-C", self.build_dir(tool), "-j", str(self.args.jobs)],
                               env=self.env, stdout=f, stderr=subprocess.STDOUT)
            with open(logf) as f:
                n = len(re.findall(r"^\[\d+/\d+\] ", f.read(), re.M))
            if n:
                log(f"  settle {tool}: {n} steps (untimed)")

    def run_builds(self) -> None:
        n = len(self.tus)
        n_math = sum(1 for tu in self.tus if tu.uses_math)
        a = self.args
        cache_reps = {t: (1 if t == "nvcc" else a.build_reps) for t in self.tools}

        log(f"cold build ({n} TUs, ninja -j {a.jobs})")

        def cold(tool, _r):
            self.tools[tool].clear()
            self.fresh_build_dir(tool)

        self.scenario("cold", {}, before=cold, expect_steps=n)
        nvcc_cold_snapshot = None
        if "nvcc" in self.tools:
            nvcc_cold_snapshot = os.path.join(self.work, "nvcc-cold-objects")
            shutil.rmtree(nvcc_cold_snapshot, ignore_errors=True)
            shutil.copytree(os.path.join(self.build_dir("nvcc"), "obj"), os.path.join(nvcc_cold_snapshot, "obj"))

        log("warm rebuild after a clean (build directory removed)")
        self.scenario("warm", cache_reps, before=lambda tool, _r: self.fresh_build_dir(tool), expect_steps=n)
        self.check_objects("warm", nvcc_cold_snapshot)

        log("rebuild after `touch include/common.cuh` (mtime only)")
        common = os.path.join(self.proj, "include", "common.cuh")
        # Every run touches the header right before it starts (as a developer would). Plain nvcc goes
        # last so that its slow full rebuild is not invalidated by the others' touches; then the cached
        # tools' build directories (older than nvcc's touch) are brought up to date, untimed.
        order = [t for t in self.tools if t != "nvcc"] + (["nvcc"] if "nvcc" in self.tools else [])
        self.scenario("touch", cache_reps, before=lambda tool, _r: os.utime(common), expect_steps=n, order=order)
        self.settle()

        log("rebuild after a real edit of include/math.cuh (kMathScale 1.0f -> 1.25f)")
        math_h = os.path.join(self.proj, "include", "math.cuh")

        def edit(_tool, _r):
            with open(math_h, "w") as f:
                f.write(genproject.math_cuh(genproject.MATH_SCALE_EDITED))

        self.scenario("edit", {}, before=edit, expect_steps=n_math)
        self.check_objects("edit", None)

    def check_objects(self, scenario: str, nvcc_cold_snapshot: str | None) -> None:
        if "nvcc" not in self.tools:
            return
        ref = self.build_dir("nvcc")
        res = {}
        if self.results["correctness"].get("parser_verified_with_objcopy") is None:
            obj = os.path.join(ref, self.tus[-1].obj)
            if os.path.exists(obj):
                self.results["correctness"]["parser_verified_with_objcopy"] = verify_parser_with_objcopy(obj, self.work)
        if nvcc_cold_snapshot:
            res["nvcc(cold) vs nvcc(warm)"] = compare_dirs(nvcc_cold_snapshot, ref, self.tus)
        for tool in self.tools:
            if tool == "nvcc":
                continue
            r = compare_dirs(ref, self.build_dir(tool), self.tus)
            res[tool] = r
            bad = len(r["mismatched"]) + len(r["missing"])
            log(f"  objects {scenario}: {tool} vs nvcc: {r['identical']}/{r['objects']} identical by section")
            if bad:
                msg = (f"{tool}: after '{scenario}', {bad} of {r['objects']} objects differ from plain nvcc's "
                       f"(.text/.data/.rodata/.nv_fatbin): "
                       + ", ".join(m["object"] for m in r["mismatched"][:6]) + (" ..." if bad > 6 else ""))
                if tool == "kache":
                    msg = "KACHE OBJECT MISMATCH! " + msg
                self.anomaly(msg)
        base = res.get("nvcc(cold) vs nvcc(warm)")
        if base and (base["mismatched"] or base["missing"]):
            self.anomaly(f"plain nvcc is not reproducible by section: {len(base['mismatched'])} objects differ "
                         "between its cold and warm builds (so peer/kache mismatches may be noise)")
        self.results["correctness"][scenario] = res

    # -- per-invocation ----------------------------------------------------------------------------

    def compile_cmd(self, tool: str, src: str, arch: str, out: str) -> list[str]:
        return (self.tools[tool].launcher + [self.nvcc] + genproject.CFLAGS.split() + ["-Iinclude"]
                + arch.split() + ["-c", src, "-o", out, "-MD", "-MF", out + ".d", "-MT", out])

    def hyperfine(self, cmd: list[str], env: dict, runs: int, name: str, what: str) -> dict | None:
        """hyperfine's result for cmd (warm-ups first, JSON kept under logs/NAME.json), or None after
        reporting an anomaly."""
        jf = os.path.join(self.work, "logs", f"{name}.json")
        hp = subprocess.run(["hyperfine", "-N", "--style", "none", "--warmup", str(self.args.hit_warmup),
                             "--runs", str(runs), "--export-json", jf, shlex.join(cmd)],
                            cwd=self.proj, env=env, capture_output=True, text=True)
        if hp.returncode != 0:
            self.anomaly(f"{what}: hyperfine failed: {hp.stderr[-500:]}")
            return None
        with open(jf) as f:
            return json.load(f)["results"][0]

    def run_hit_latency(self) -> None:
        a = self.args
        for kind, runs in (("tiny", a.hit_runs_tiny), ("thrust", a.hit_runs_thrust)):
            if kind not in self.lat_tus:
                continue
            tu = self.lat_tus[kind]
            res = {}
            for tool in self.tools:
                if tool == "nvcc":
                    continue  # plain nvcc's "hit" is its compile time: taken from the miss runs
                t = self.tools[tool]
                outdir = os.path.join(self.proj, "lat", tool)
                os.makedirs(outdir, exist_ok=True)
                out = os.path.relpath(os.path.join(outdir, f"{kind}.o"), self.proj)
                cmd = self.compile_cmd(tool, tu.src, tu.arch, out)
                p = subprocess.run(cmd, cwd=self.proj, env=self.env, capture_output=True, text=True)  # fill
                if p.returncode != 0:
                    self.anomaly(f"{tool}: hit-latency warm-up compile failed: {p.stderr[-500:]}")
                    continue
                t.zero()
                server0 = t.cpu_s()
                h = self.hyperfine(cmd, self.env, runs, f"hit-{kind}-{tool}", f"{tool}: {kind} hit")
                if h is None:
                    continue
                times = [x * 1000 for x in h["times"]]
                stats = t.stats()
                expected = runs + a.hit_warmup
                server_ms = (t.cpu_s() - server0) * 1000 / expected  # sccache's server share per invocation
                if stats.get("hits") is not None and stats["hits"] != expected:
                    self.anomaly(f"{tool}: {kind} hit latency: {stats['hits']} hits of {expected} invocations "
                                 f"(misses={stats.get('misses')}, uncached={stats.get('uncached')})")
                res[tool] = {"median_ms": round(statistics.median(times), 3), "mean_ms": round(h["mean"] * 1000, 3),
                             "cpu_ms": round(((h.get("user") or 0) + (h.get("system") or 0)) * 1000 + server_ms, 3),
                             "stddev_ms": round((h.get("stddev") or 0) * 1000, 3), "min_ms": round(min(times), 3),
                             "max_ms": round(max(times), 3), "runs": len(times), "stats": stats,
                             "command": shlex.join(cmd), "loadavg_after": loadavg()}
                log(f"  hit {kind:6s} {tool:8s} median {res[tool]['median_ms']:8.2f} ms  "
                    f"(min {res[tool]['min_ms']:.2f}, cpu {res[tool]['cpu_ms']:.2f}, hits {stats.get('hits')}/{expected}, "
                    f"load {loadavg()[:1]})")
            self.results["hit_latency"][kind] = res
            if "kache" in self.tools:
                self.run_kache_uncompressed_hit(kind, tu, runs)

    def run_kache_uncompressed_hit(self, kind: str, tu, runs: int) -> None:
        """kache with cache.compression = false (objects stored apart and cloned or kernel-copied into
        place): the same hit, its own cache directory. Reported beside the main table, not in it."""
        a = self.args
        env = dict(self.env)
        env.update({"KACHE_DIR": os.path.join(self.work, "cache-kache-uncompressed"), "KACHE_COMPRESSION": "0"})
        outdir = os.path.join(self.proj, "lat", "kache-uncompressed")
        os.makedirs(outdir, exist_ok=True)
        out = os.path.relpath(os.path.join(outdir, f"{kind}.o"), self.proj)
        cmd = self.compile_cmd("kache", tu.src, tu.arch, out)
        p = subprocess.run(cmd, cwd=self.proj, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            self.anomaly(f"kache (compression off): warm-up compile failed: {p.stderr[-500:]}")
            return
        subprocess.run([self.tools["kache"].launcher[0], "--zero-stats"], env=env, capture_output=True)
        h = self.hyperfine(cmd, env, runs, f"hit-{kind}-kache-uncompressed", f"kache (compression off): {kind} hit")
        if h is None:
            return
        times = [x * 1000 for x in h["times"]]
        st = json.loads(subprocess.run([self.tools["kache"].launcher[0], "--show-stats", "--json"], env=env,
                                       capture_output=True, text=True).stdout)
        res = {"median_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
               "cpu_ms": round(((h.get("user") or 0) + (h.get("system") or 0)) * 1000, 3),
               "runs": len(times), "hits": st.get("hits"), "misses": st.get("misses"),
               "command": "KACHE_COMPRESSION=0 " + shlex.join(cmd)}
        if st.get("hits") != runs + a.hit_warmup:
            self.anomaly(f"kache (compression off): {kind}: {st.get('hits')} hits of {runs + a.hit_warmup}")
        self.results.setdefault("hit_latency_kache_uncompressed", {})[kind] = res
        log(f"  hit {kind:6s} kache, compression off: median {res['median_ms']:.2f} ms (cpu {res['cpu_ms']:.2f})")

    def run_kache_own_cpu(self, reps: int) -> None:
        """kache's own share of a miss: the CPU time of the kache process itself (all its threads), without
        nvcc and the host compiler it runs, as kache logs it at exit (CLOCK_PROCESS_CPUTIME_ID), on fresh
        copies of the same TUs. The wall-time overhead of a few repetitions is dominated by nvcc's own
        run-to-run spread; this is the part kache adds."""
        t = self.tools["kache"]
        out = {}
        for kind, tu in self.lat_tus.items():
            with open(os.path.join(self.proj, tu.src)) as f:
                base = f.read()
            vals = []
            for r in range(reps):
                src = f"src/own_{kind}_{r}.cu"
                with open(os.path.join(self.proj, src), "w") as f:
                    f.write(base + f"\nnamespace kb_bench_own_{kind}_{r}_{time.time_ns()} {{}}\n")
                os.utime(os.path.join(self.proj, src), (time.time() - 5, time.time() - 5))
                t.clear()
                logf = os.path.join(self.work, "logs", f"own-{kind}-{r}.log")
                env = dict(self.env, KACHE_LOG="kache=debug", KACHE_LOG_FILE=logf)
                p = subprocess.run(self.compile_cmd("kache", src, tu.arch, f"miss/own_{kind}_{r}.o"), cwd=self.proj,
                                   env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    self.anomaly(f"kache own-CPU run failed: {p.stderr[-300:]}")
                    continue
                with open(logf) as f:
                    text = f.read()
                m = re.search(r"own CPU time ([0-9.]+) ms", text)
                if not m or "miss: stored" not in text:
                    self.anomaly(f"kache own-CPU run {kind} {r}: no stored miss or no CPU line in its log")
                    continue
                vals.append(float(m.group(1)))
            ref = self.results["miss"].get(kind, {}).get("nvcc", {}).get("median_ms")
            m = median(vals)
            out[kind] = {"runs_ms": [round(v, 1) for v in vals], "median_ms": round(m, 1) if m else None,
                         "pct_of_nvcc_compile": round(m / ref * 100, 2) if (m and ref) else None}
            log(f"  kache's own CPU per {kind} miss: {out[kind]['runs_ms']} ms")
        self.results["kache_own_cpu_per_miss"] = out

    def run_miss(self) -> None:
        """Cold per-invocation compile: every (tool, rep) compiles its own copy of the TU (only a trailing
        empty namespace with a unique name differs), so it is a miss for every tool; ccache and kache also get their cache emptied
        first (`ccache -C`, `kache --clear`). sccache's is not emptied: that takes a server restart, and
        the first compile after a restart also pays sccache's compiler detection, which a real
        edit-compile loop does not. The copies are written up front and aged 2 s so that no tool sees a
        'file too new' condition. Wall time and CPU time (children + sccache's server) are recorded."""
        a = self.args
        tools = list(self.tools)
        plan = []
        for kind, reps in (("tiny", a.miss_reps_tiny), ("thrust", a.miss_reps_thrust)):
            if kind not in self.lat_tus:
                continue
            tu = self.lat_tus[kind]
            with open(os.path.join(self.proj, tu.src)) as f:
                base = f.read()
            for r in range(reps):
                order = tools[r % len(tools):] + tools[:r % len(tools)]
                for tool in order:
                    src = f"src/miss_{kind}_{tool}_{r}.cu"
                    # A unique empty namespace, not a comment: it must survive preprocessing, or sccache
                    # (which keys on preprocessed output) would hit.
                    with open(os.path.join(self.proj, src), "w") as f:
                        f.write(base + f"\nnamespace kb_bench_miss_{kind}_{tool}_{r}_{time.time_ns()} {{}}\n")
                    plan.append((kind, tu, r, tool, src))
        time.sleep(2.0)
        os.makedirs(os.path.join(self.proj, "miss"), exist_ok=True)
        times: dict = {k: {t: [] for t in tools} for k in ("tiny", "thrust")}
        details: dict = {k: {t: [] for t in tools} for k in ("tiny", "thrust")}
        cpus: dict = {k: {t: [] for t in tools} for k in ("tiny", "thrust")}
        for kind, tu, r, tool, src in plan:
            t = self.tools[tool]
            if tool != "sccache":
                t.clear()
            t.zero()
            out = f"miss/{kind}_{tool}_{r}.o"
            cmd = self.compile_cmd(tool, src, tu.arch, out)
            la = loadavg()
            cpu0 = children_cpu_s() + t.cpu_s()
            start = time.perf_counter_ns()
            p = subprocess.run(cmd, cwd=self.proj, env=self.env, capture_output=True, text=True)
            ms = (time.perf_counter_ns() - start) / 1e6
            cpu_ms = (children_cpu_s() + t.cpu_s() - cpu0) * 1000
            stats = t.stats()
            if p.returncode != 0:
                self.anomaly(f"{tool}: miss compile of {src} failed: {p.stderr[-500:]}")
                continue
            if tool != "nvcc" and stats.get("misses") != 1:
                self.anomaly(f"{tool}: miss run {kind} rep {r} was not counted as one miss: {stats}")
            times[kind][tool].append(ms)
            cpus[kind][tool].append(cpu_ms)
            details[kind][tool].append({"ms": round(ms, 2), "cpu_ms": round(cpu_ms, 1), "rep": r, "loadavg_before": la, "stats": stats})
            log(f"  miss {kind:6s} rep {r} {tool:8s} {ms:9.1f} ms (cpu {cpu_ms:9.1f} ms, load {la[0] if la else '?'})")
        for kind in self.lat_tus:
            ref = median(times[kind].get("nvcc", []))
            cref = median(cpus[kind].get("nvcc", []))
            res = {}
            for tool in tools:
                m = median(times[kind][tool])
                cm = median(cpus[kind][tool])
                res[tool] = {"median_ms": round(m, 2) if m is not None else None,
                             "runs_ms": [round(x, 2) for x in times[kind][tool]],
                             "overhead_pct": (round((m / ref - 1) * 100, 2) if (m and ref) else None),
                             "overhead_ms": (round(m - ref, 2) if (m and ref) else None),
                             "median_cpu_ms": round(cm, 1) if cm is not None else None,
                             "cpu_overhead_pct": (round((cm / cref - 1) * 100, 2) if (cm and cref) else None),
                             "details": details[kind][tool]}
            self.results["miss"][kind] = res
        if "kache" in self.tools:
            self.run_kache_own_cpu(2 if a.quick else 3)
        # plain nvcc's "hit" is simply its compile time
        for kind in self.lat_tus:
            if "nvcc" in self.tools and kind in self.results["hit_latency"]:
                m = self.results["miss"][kind]["nvcc"]
                self.results["hit_latency"][kind]["nvcc"] = {
                    "median_ms": m["median_ms"], "cpu_ms": m["median_cpu_ms"], "runs": len(m["runs_ms"]),
                    "note": "compile time (no cache)"}

    # -- driver ------------------------------------------------------------------------------------

    def machine(self) -> dict:
        cpu = ""
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
                cpu = m.group(1) if m else ""
        except OSError:
            pass
        mem = ""
        try:
            with open("/proc/meminfo") as f:
                kb = int(re.search(r"^MemTotal:\s*(\d+)", f.read(), re.M).group(1))
                mem = f"{kb / 1024 / 1024:.1f} GiB"
        except (OSError, AttributeError):
            pass
        nvcc_v = subprocess.run([self.nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if self.args.kache_rev:
            commit, dirty = self.args.kache_rev, False
        else:
            commit = first_line(["git", "-C", repo, "rev-parse", "HEAD"])
            dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--", "src", "CMakeLists.txt"],
                                   capture_output=True, text=True).stdout.strip() != ""
        build_type = ""
        cache_txt = os.path.join(os.path.dirname(os.path.abspath(self.args.kache)), "CMakeCache.txt")
        if os.path.exists(cache_txt):
            with open(cache_txt) as f:
                m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", f.read(), re.M)
                build_type = m.group(1) if m else ""
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([sys.executable] + sys.argv),
            "cpu": cpu,
            "cores": os.cpu_count(),
            "cores_usable": len(os.sched_getaffinity(0)),
            "ram": mem,
            "kernel": platform.release(),
            "os": first_line(["sh", "-c", ". /etc/os-release && echo \"$PRETTY_NAME\""]),
            "nvcc": nvcc_v[-1] if nvcc_v else "",
            "nvcc_release": next((ln for ln in nvcc_v if "release" in ln), ""),
            "host_compiler": first_line(["g++", "--version"]),
            "ccache": first_line(["ccache", "--version"]),
            "sccache": first_line(["sccache", "--version"]),
            "kache": first_line([self.args.kache, "--version"]) + (f" ({build_type})" if build_type else ""),
            "kache_commit": commit + (" (src modified)" if dirty else ""),
            "ninja": first_line(["ninja", "--version"]),
            "hyperfine": first_line(["hyperfine", "--version"]),
            "python": platform.python_version(),
            "loadavg_start": loadavg(),
            "note": "shared machine: other jobs may have been running; loadavg is recorded per measurement",
        }

    def run(self) -> dict:
        a = self.args
        if os.path.exists(self.work):
            shutil.rmtree(self.work)
        os.makedirs(os.path.join(self.work, "logs"))
        self.results["machine"] = self.machine()
        log(f"work dir {self.work}; tools {', '.join(self.tools)}; jobs {a.jobs}")
        self.tus = genproject.generate(self.proj, a.tiny, a.thrust)
        self.lat_tus = {k: next(t for t in self.tus if t.kind == k)
                        for k in ("tiny", "thrust") if any(t.kind == k for t in self.tus)}
        n_two = sum(1 for t in self.tus if t.arch == genproject.TWO_ARCH)
        self.results["config"] = {
            "quick": a.quick, "jobs": a.jobs, "tus": len(self.tus), "tiny_tus": a.tiny, "thrust_tus": a.thrust,
            "two_arch_tus": n_two, "math_tus": sum(1 for t in self.tus if t.uses_math),
            "cflags": genproject.CFLAGS + " -I../include <arch> -c SRC -o OBJ -MD -MF OBJ.d -MT OBJ",
            "one_arch": genproject.ONE_ARCH, "two_arch": genproject.TWO_ARCH,
            "build_reps_cached_tools": a.build_reps, "hit_runs": {"tiny": a.hit_runs_tiny, "thrust": a.hit_runs_thrust},
            "hit_warmup": a.hit_warmup, "miss_reps": {"tiny": a.miss_reps_tiny, "thrust": a.miss_reps_thrust},
            "latency_tus": {k: v.src for k, v in self.lat_tus.items()},
        }
        self.results["tools"] = {}
        try:
            for name, t in self.tools.items():
                t.setup()
                self.results["tools"][name] = {"version": t.version(), "launcher": t.launcher, "notes": t.notes}
            self.run_builds()
            log("per-invocation hit latency (hyperfine)")
            self.run_hit_latency()
            log("per-invocation miss (cold compile, cache emptied, tools interleaved)")
            self.run_miss()
        finally:
            for t in self.tools.values():
                try:
                    t.teardown()
                except Exception as e:  # noqa: BLE001
                    log(f"teardown {t.name}: {e}")
        self.results["machine"]["loadavg_end"] = loadavg()
        self.results["targets"] = self.targets()
        self.results["duration_s"] = round(time.monotonic() - T0, 1)
        return self.results

    def targets(self) -> list[dict]:
        r = self.results
        out = []

        def hit(kind, tool):
            return r["hit_latency"].get(kind, {}).get(tool, {}).get("median_ms")

        def ovh(kind, tool):
            return r["miss"].get(kind, {}).get(tool, {}).get("overhead_pct")

        def sc(name, tool):
            return r["scenarios"].get(name, {}).get(tool, {}).get("median_s")

        for kind, goal in (("tiny", TARGET_HIT_TINY_MS), ("thrust", TARGET_HIT_THRUST_MS)):
            v = hit(kind, "kache")
            out.append({"target": f"hit latency, {kind} TU", "goal": f"<= {goal:g} ms", "kache": v,
                        "ccache": hit(kind, "ccache"), "sccache": hit(kind, "sccache"), "unit": "ms",
                        "pass": (v is not None and v <= goal)})
        for kind in ("tiny", "thrust"):
            v = ovh(kind, "kache")
            out.append({"target": f"miss overhead vs plain nvcc, {kind} TU", "goal": f"<= {TARGET_MISS_OVERHEAD_PCT:g} %",
                        "kache": v, "ccache": ovh(kind, "ccache"), "sccache": ovh(kind, "sccache"), "unit": "%",
                        "pass": (v is not None and v <= TARGET_MISS_OVERHEAD_PCT)})

        def speedup(tool):
            cold_nvcc, cold_tool, warm = sc("cold", "nvcc"), sc("cold", tool), sc("warm", tool)
            if not warm:
                return None
            vals = [c / warm for c in (cold_nvcc, cold_tool) if c]
            return round(min(vals), 1) if vals else None

        v = speedup("kache")
        out.append({"target": "warm rebuild speed-up over cold build (min of nvcc cold / warm and own cold / warm)",
                    "goal": f">= {TARGET_WARM_SPEEDUP:g}x", "kache": v, "ccache": speedup("ccache"),
                    "sccache": speedup("sccache"), "unit": "x", "pass": (v is not None and v >= TARGET_WARM_SPEEDUP)})
        return out


# ---------------------------------------------------------------------------------------------------
# Reporting


def fmt_num(v, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "s":
        return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"
    if unit == "ms":
        return f"{v:.2f} ms" if v < 100 else f"{v:.0f} ms"
    if unit == "%":
        return f"{v:+.1f} %"
    if unit == "x":
        return f"{v:.0f}×" if v >= 100 else f"{v:.1f}×"
    return str(v)


def ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "–"
    x = a / b
    return f"{x:.3f}×" if x < 0.01 else (f"{x:.2f}×" if x < 10 else f"{x:.0f}×" if x >= 100 else f"{x:.1f}×")


def metric_rows(r: dict, tools: list[str]) -> list[tuple[str, str, dict]]:
    rows = []
    labels = {"cold": "cold build (empty cache)", "warm": "warm rebuild after clean",
              "touch": "rebuild after touch common.cuh", "edit": "rebuild after editing math.cuh"}
    for sc, label in labels.items():
        if sc in r["scenarios"]:
            rows.append((label, "s", {t: r["scenarios"][sc].get(t, {}).get("median_s") for t in tools}))
    for kind in ("tiny", "thrust"):
        if kind in r["hit_latency"]:
            rows.append((f"hit latency, {kind} TU" + (" (nvcc: compile)" if "nvcc" in tools else ""), "ms",
                         {t: r["hit_latency"][kind].get(t, {}).get("median_ms") for t in tools}))
    for kind in ("tiny", "thrust"):
        if kind in r["hit_latency"]:
            rows.append((f"hit CPU time (user+sys, mean; sccache incl. server), {kind} TU", "ms",
                         {t: r["hit_latency"][kind].get(t, {}).get("cpu_ms") for t in tools}))
    for kind in ("tiny", "thrust"):
        if kind in r["miss"]:
            rows.append((f"miss (cold compile), {kind} TU", "ms",
                         {t: r["miss"][kind].get(t, {}).get("median_ms") for t in tools}))
    return rows


def report_md(r: dict) -> str:
    tools = list(r["tools"])
    m, c = r["machine"], r["config"]
    L = []
    L.append("# kache benchmark results\n")
    L.append(f"{m['date']} · {m['cpu']} · {m['cores_usable']} cores · {m['ram']} RAM · Linux {m['kernel']} · "
             f"{m['os']}  ")
    L.append(f"{m['nvcc_release']} · {m['host_compiler']} · {m['ccache']} · {m['sccache']} · {m['kache']} "
             f"(commit {m['kache_commit'][:12]})  ")
    L.append(f"Load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')} "
             f"(shared machine). Total run time {r.get('duration_s', 0) / 60:.1f} min.  ")
    L.append(f"Command: `{m['command']}`\n")
    L.append(f"Project: {c['tus']} TUs ({c['tiny_tus']} tiny kernels, {c['thrust_tus']} thrust+cub), "
             f"{c['two_arch_tus']} of them for two architectures (sm_75+sm_90), all include `common.cuh`, "
             f"{c['math_tus']} include `math.cuh`; `ninja -j {c['jobs']}`; flags `{c['cflags']}`. "
             f"Build scenarios: nvcc once, cached tools median of {c['build_reps_cached_tools']} for warm/touch, "
             f"1 run for cold/edit. Hit latency: hyperfine, {c['hit_warmup']} warm-up + "
             f"{c['hit_runs']['tiny']} (tiny) / {c['hit_runs']['thrust']} (thrust) runs. "
             f"Miss: {c['miss_reps']['tiny']} (tiny) / {c['miss_reps']['thrust']} (thrust) interleaved runs per tool, "
             f"each on its own copy of the TU (a unique empty namespace appended), ccache/kache caches emptied "
             f"before each. "
             f"CPU time = user+sys of all child processes (plus sccache's server), less sensitive to other load "
             f"than wall time.\n")

    L.append("## Medians (ratio to plain nvcc in parentheses)\n")
    L.append("| metric | " + " | ".join(tools) + " |")
    L.append("|---|" + "---:|" * len(tools))
    rows = metric_rows(r, tools)
    for label, unit, vals in rows:
        cells = []
        for t in tools:
            v = vals.get(t)
            cell = fmt_num(v, unit)
            if t != "nvcc" and "nvcc" in tools:
                cell += f" ({ratio(v, vals.get('nvcc'))})"
            cells.append(cell)
        L.append(f"| {label} | " + " | ".join(cells) + " |")
    for key, what in (("overhead_pct", "wall"), ("cpu_overhead_pct", "CPU time")):
        for kind in ("tiny", "thrust"):
            if kind in r["miss"]:
                L.append(f"| miss overhead vs nvcc ({what}), {kind} TU | "
                         + " | ".join(fmt_num(r["miss"][kind].get(t, {}).get(key), "%") if t != "nvcc" else "–"
                                      for t in tools) + " |")
    if r["scenarios"]:
        L.append("| CPU time of the builds (cold / warm / touch / edit) | " + " | ".join(
            " / ".join(fmt_num(r["scenarios"][sc].get(t, {}).get("median_cpu_s"), "s") for sc in r["scenarios"])
            for t in tools) + " |")
    L.append("")

    peers = [t for t in tools if t != "kache"]
    if "kache" in tools and peers:
        L.append("## kache ÷ each peer (below 1 = kache faster)\n")
        L.append("| metric | " + " | ".join(f"kache ÷ {p}" for p in peers) + " |")
        L.append("|---|" + "---:|" * len(peers))
        for label, unit, vals in rows:
            L.append(f"| {label} | " + " | ".join(ratio(vals.get("kache"), vals.get(p)) for p in peers) + " |")
        L.append("")
        L.append("## All pairs (row ÷ column), per metric\n")
        for label, unit, vals in rows:
            L.append(f"<details><summary>{label}</summary>\n")
            L.append("| ÷ | " + " | ".join(tools) + " |")
            L.append("|---|" + "---:|" * len(tools))
            for a in tools:
                L.append(f"| {a} | " + " | ".join(ratio(vals.get(a), vals.get(b)) if a != b else "1" for b in tools) + " |")
            L.append("\n</details>\n")

    own = r.get("kache_own_cpu_per_miss", {})
    if own:
        L.append("## kache's own CPU time per miss\n")
        L.append("The kache process alone, all its threads (`CLOCK_PROCESS_CPUTIME_ID`, logged by kache at "
                 "exit under `KACHE_LOG=kache=debug`), without the nvcc and host compiler processes it runs: what kache adds to a miss (key, spawning nvcc, hashing the "
                 "closure nvcc read, recording the watch set, compressing and storing). Fresh copies of "
                 "the same TUs, cache emptied before each.\n")
        L.append("| TU | kache process CPU (median) | runs | share of plain nvcc's compile |")
        L.append("|---|---:|---|---:|")
        for kind, v in own.items():
            pct = v.get("pct_of_nvcc_compile")
            L.append(f"| {kind} | {fmt_num(v['median_ms'], 'ms')} | {', '.join(f'{x:g}' for x in v['runs_ms'])} | "
                     f"{'–' if pct is None else f'{pct:.2f} %'} |")
        L.append("")

    unc = r.get("hit_latency_kache_uncompressed", {})
    if unc:
        L.append("## kache with `cache.compression = false` (hit latency)\n")
        L.append("Objects stored uncompressed, apart from the entry's head, and cloned (FICLONERANGE) or "
                 "kernel-copied (copy_file_range) into place; same TUs, own cache directory.\n")
        L.append("| TU | median | min | CPU (user+sys) | kache default (compressed) |")
        L.append("|---|---:|---:|---:|---:|")
        for kind, v in unc.items():
            L.append(f"| {kind} | {fmt_num(v['median_ms'], 'ms')} | {fmt_num(v['min_ms'], 'ms')} | "
                     f"{fmt_num(v['cpu_ms'], 'ms')} | "
                     f"{fmt_num(r['hit_latency'].get(kind, {}).get('kache', {}).get('median_ms'), 'ms')} |")
        L.append("")

    L.append("## Targets (kache; peers for reference)\n")
    L.append("| target | goal | kache | ccache | sccache | result |")
    L.append("|---|---|---:|---:|---:|---|")
    for t in r.get("targets", []):
        L.append(f"| {t['target']} | {t['goal']} | {fmt_num(t['kache'], t['unit'])} | "
                 f"{fmt_num(t.get('ccache'), t['unit'])} | {fmt_num(t.get('sccache'), t['unit'])} | "
                 f"{'PASS' if t['pass'] else '**FAIL**'} |")
    L.append("")

    L.append("## Cache statistics per scenario (hits / misses / uncached; last run)\n")
    cached = [t for t in tools if t != "nvcc"]
    L.append("| scenario | compile steps | " + " | ".join(cached) + " |")
    L.append("|---|---:|" + "---|" * len(cached))
    for sc, per in r["scenarios"].items():
        steps = next((per[t]["runs"][-1]["steps"] for t in tools if t in per and per[t]["runs"]), "")
        cells = []
        for t in cached:
            if t not in per or not per[t]["runs"]:
                cells.append("–")
                continue
            s = per[t]["runs"][-1]["stats"]
            cell = f"{s.get('hits')} / {s.get('misses')} / {s.get('uncached')}"
            if t == "ccache" and s.get("hits"):
                cell += f" (direct {s.get('direct_hits')}, preproc {s.get('preprocessed_hits')})"
            cells.append(cell)
        L.append(f"| {sc} | {steps} | " + " | ".join(cells) + " |")
    L.append("")

    corr = r.get("correctness", {})
    if any(k in corr for k in ("warm", "edit")):
        L.append("## Objects compared with plain nvcc's, by section (.text* .data* .rodata* .nv_fatbin)\n")
        L.append(f"Section reader cross-checked with `objcopy -O binary --only-section`: "
                 f"{corr.get('parser_verified_with_objcopy')}.\n")
        L.append("| after | comparison | identical | differing |")
        L.append("|---|---|---:|---|")
        for sc in ("warm", "edit"):
            for name, res in corr.get(sc, {}).items():
                bad = [x["object"] for x in res["mismatched"]] + [f"{x} (missing)" for x in res["missing"]]
                label = name if name.startswith("nvcc(") else f"{name} vs nvcc"
                L.append(f"| {sc} | {label} | {res['identical']}/{res['objects']} | "
                         + (", ".join(bad[:8]) + (" …" if len(bad) > 8 else "") if bad else "none") + " |")
        L.append("")

    L += anomalies_and_tools_md(r)
    return "\n".join(L)


def anomalies_and_tools_md(r: dict) -> list[str]:
    """The report's closing sections, the same in every scenario module: anomalies and tool setup."""
    L = []
    if r.get("anomalies"):
        L.append("## Anomalies\n")
        L += [f"- {a}" for a in r["anomalies"]]
        L.append("")
    L.append("## Tool setup\n")
    for t, info in r["tools"].items():
        L.append(f"- **{t}**: {info['version']}" + (f"; {'; '.join(info['notes'])}" if info["notes"] else ""))
    L.append("")
    return L


def write_results(out: str, stem: str, results: dict, md: str, draw) -> None:
    """Writes STEM.json, STEM.md and the chart STEM.png (draw(results, path); a failure only logged)."""
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, f"{stem}.md"), "w") as f:
        f.write(md)
    try:
        draw(results, os.path.join(out, f"{stem}.png"))
    except Exception as e:  # noqa: BLE001
        log(f"chart not drawn: {e!r} (matplotlib missing? run with /usr/bin/python3)")
    print(md)
    took = f" in {results['duration_s']:.0f} s" if "duration_s" in results else ""
    log(f"wrote {out}/{stem}.json, .md, .png{took}")


def draw_png(r: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tools = list(r["tools"])
    colors = {"nvcc": "#7f7f7f", "ccache": "#1f77b4", "sccache": "#ff7f0e", "kache": "#2ca02c"}
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.6), gridspec_kw={"width_ratios": [4, 2, 2]})
    w = 0.8 / max(1, len(tools))

    def bars(ax, groups, getter, unit, log=True):
        for i, t in enumerate(tools):
            xs, ys = [], []
            for g, (key, _label) in enumerate(groups):
                v = getter(key, t)
                if v is not None:
                    xs.append(g + (i - (len(tools) - 1) / 2) * w)
                    ys.append(v)
            b = ax.bar(xs, ys, w, label=t, color=colors.get(t))
            for rect, y in zip(b, ys):
                txt = (f"{y:.2f}" if y < 10 else f"{y:.0f}") if unit != "%" else f"{y:+.1f}"
                ax.annotate(txt, (rect.get_x() + rect.get_width() / 2, max(y, 0)), ha="center", va="bottom",
                            fontsize=7, rotation=90, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([lab for _k, lab in groups], fontsize=8)
        if log:
            ax.set_yscale("log")
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo, hi * 4)  # room for the value labels
        ax.grid(axis="y", alpha=0.3, which="both")

    c = r["config"]
    sc_groups = [(k, lab) for k, lab in (("cold", "cold build"), ("warm", "warm rebuild\nafter clean"),
                                         ("touch", "touch\ncommon.cuh"), ("edit", "edit\nmath.cuh"))
                 if k in r["scenarios"]]
    bars(axes[0], sc_groups, lambda k, t: r["scenarios"][k].get(t, {}).get("median_s"), "s")
    axes[0].set_ylabel("wall time, s (log)")
    axes[0].set_title(f"Project builds: {c['tus']} TUs ({c['thrust_tus']} thrust+cub), ninja -j {c['jobs']}",
                      fontsize=10)

    lat_groups = [("hit", "tiny"), ("hit", "thrust"), ("miss", "tiny"), ("miss", "thrust")]
    groups = [(i, f"{a} {b}" + ("\n(nvcc: compile)" if a == "hit" else "")) for i, (a, b) in enumerate(lat_groups)]

    def lat(i, t):
        a, b = lat_groups[i]
        src = r["hit_latency"] if a == "hit" else r["miss"]
        return src.get(b, {}).get(t, {}).get("median_ms")

    bars(axes[1], groups, lat, "ms")
    axes[1].axhline(TARGET_HIT_TINY_MS, color="green", ls=":", lw=1, label="target hit tiny 3 ms")
    axes[1].axhline(TARGET_HIT_THRUST_MS, color="green", ls="--", lw=1, label="target hit thrust 8 ms")
    axes[1].set_ylabel("per invocation, ms (log)")
    axes[1].set_title("Per-invocation medians (targets: 3 / 8 ms hit)", fontsize=10)

    ovh_tools = [t for t in tools if t != "nvcc"]
    ovh_groups = [("tiny", "overhead_pct", "tiny\nwall"), ("tiny", "cpu_overhead_pct", "tiny\nCPU"),
                  ("thrust", "overhead_pct", "thrust\nwall"), ("thrust", "cpu_overhead_pct", "thrust\nCPU")]
    ow = 0.8 / max(1, len(ovh_tools))
    for i, t in enumerate(ovh_tools):
        pts = []
        for g, (kind, key, _lab) in enumerate(ovh_groups):
            y = r["miss"].get(kind, {}).get(t, {}).get(key)
            if y is not None:
                pts.append((g + (i - (len(ovh_tools) - 1) / 2) * ow, y, key))
        if pts:
            b = axes[2].bar([p[0] for p in pts], [p[1] for p in pts], ow, label=t, color=colors.get(t))
            for rect, (_x, y, key) in zip(b, pts):
                if key.startswith("cpu"):
                    rect.set_hatch("//")
                axes[2].annotate(f"{y:+.1f}", (rect.get_x() + rect.get_width() / 2, y), ha="center",
                                 va="bottom" if y >= 0 else "top", fontsize=7)
    axes[2].axhline(TARGET_MISS_OVERHEAD_PCT, color="green", ls="--", lw=1, label="target miss +2 %", dashes=(1, 3))
    axes[2].axhline(0, color="black", lw=0.8)
    axes[2].set_xticks(range(len(ovh_groups)))
    axes[2].set_xticklabels([g[2] for g in ovh_groups], fontsize=8)
    axes[2].set_ylabel("miss vs plain nvcc, % (medians)")
    axes[2].set_title("Miss overhead: wall time, CPU time (hatched)", fontsize=10)
    axes[2].grid(axis="y", alpha=0.3)
    m = r["machine"]
    fig.suptitle(f"kache benchmark · {m['date'][:10]} · {m['cpu']} ×{m['cores_usable']} · {m['nvcc_release'].strip()}",
                 fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in (axes[1], axes[2]):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 8 TUs (2 thrust+cub), fewer repetitions")
    ap.add_argument("--out", default=os.path.join(here, "results"), help="results directory (default bench/results)")
    ap.add_argument("--work", default=None, help="scratch directory (default OUT/tmp/work; wiped at start)")
    ap.add_argument("--tools", default=",".join(ALL_TOOLS), help="comma list from nvcc,ccache,sccache,kache")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="ninja -j (default: nproc)")
    ap.add_argument("--kache", default=os.path.join(repo, "build", "kache"), help="kache binary (default build/kache)")
    ap.add_argument("--tiny", type=int, help="tiny kernel TUs (default 32; quick 6)")
    ap.add_argument("--thrust", type=int, help="thrust+cub TUs (default 10; quick 2)")
    ap.add_argument("--kache-rev", default=None,
                    help="commit the kache binary was built from, for the results (default: this checkout's HEAD)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--name", default="latest", help="results file stem (default latest)")
    ap.add_argument("--scenarios", default="cuda",
                    help="comma list: cuda (this file's CUDA project), mixed (bench/mixed.py: the mixed C++/CUDA "
                         "project and its sharing across build dirs and checkouts); default cuda")
    ap.add_argument("--cpp", type=int, help="mixed: C++ TUs (default 40; quick 12)")
    ap.add_argument("--mixed-tiny", type=int, help="mixed: tiny CUDA TUs (default 8; quick 4)")
    ap.add_argument("--mixed-thrust", type=int, help="mixed: thrust+cub TUs (default 0)")
    args = ap.parse_args()
    scenarios = {s.strip() for s in args.scenarios.split(",") if s.strip()}
    if not scenarios or scenarios - {"cuda", "mixed"}:
        sys.exit(f"unknown scenarios: {sorted(scenarios - {'cuda', 'mixed'})}")
    if "mixed" in scenarios:
        import mixed  # noqa: E402  (bench/mixed.py; writes OUT/mixed.*)

        mixed.run_from_args(args, os.path.abspath(args.out), "mixed" if args.name == "latest" else f"{args.name}-mixed")
        if "cuda" not in scenarios:
            return

    q = args.quick
    args.tiny = args.tiny if args.tiny is not None else (6 if q else 32)
    args.thrust = args.thrust if args.thrust is not None else (2 if q else 10)
    args.build_reps = 2 if q else 3
    args.hit_runs_tiny, args.hit_runs_thrust = (10, 5) if q else (20, 10)
    args.hit_warmup = 2
    args.miss_reps_tiny, args.miss_reps_thrust = (3, 1) if q else (7, 5)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    bad = [t for t in args.tools if t not in ALL_TOOLS]
    if bad or not args.tools:
        sys.exit(f"unknown tools: {bad}")
    args.tools = [t for t in ALL_TOOLS if t in args.tools]  # fixed order
    args.kache = os.path.abspath(args.kache)
    if "kache" in args.tools and not os.access(args.kache, os.X_OK):
        sys.exit(f"kache binary not found: {args.kache} (build it, or pass --kache)")
    for exe in ["ninja", "hyperfine"] + [t for t in args.tools if t in ("ccache", "sccache")]:
        if not shutil.which(exe):
            sys.exit(f"{exe} not found on PATH")
    out = os.path.abspath(args.out)
    args.work = args.work or os.path.join(out, "tmp", "work")
    os.makedirs(out, exist_ok=True)

    # SIGTERM/SIGHUP end the run through the `finally` that stops sccache's server.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    bench = Bench(args)
    results = bench.run()
    write_results(out, args.name, results, report_md(results), draw_png)
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
