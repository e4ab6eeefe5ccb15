#!/usr/bin/env python3
"""Stress test: many concurrent kache compiles over one small shared cache while everything around them
goes wrong, with invariants checked after every round.

Each round ("step"):
  chaos   every TU (a few dozen small generated .cu files, some edited each round) is compiled through
          kache, `concurrency` at a time, into a per-round directory. Beside them: `kache -C` and
          `kache -z` in a loop (every other round), random kill -9 of kache processes (compiles and the
          -C/-z ones; the compile's process group goes too, so no orphaned nvcc keeps writing), and
          on a tmpfs cache: rounds 2, 6, ... remount it read-only halfway through, rounds 3, 7, ...
          run with it full.
          max_size holds about half of the entries, so eviction runs on nearly every store.
  verify  chaos stopped, filesystem writable again, stats zeroed. Invariants:
          - every build that was not killed exited 0, and its object has the same sections as plain
            nvcc's object of that TU version (kachetest's section compare);
          - every killed build, rerun, exits 0 with the right object;
          - the stats of the verify runs add up: hits + misses + passthrough + compile_failed +
            internal errors = invocations (storage errors annotate a miss, they are not an outcome);
          - the size kache reports matches the entry files on disk within one entry;
          - no temp file older than the run (planted, 2 h old, each round) survives the round's
            eviction passes.
  corrupt a few entries are damaged at random (bit flips, truncation, emptied, garbage) for the next round.

Short form (default; CI runs it through ctest, label "stress"): 10 TUs, 4 rounds, 6 concurrent
compiles: a miss runs nvcc's six-process pipeline and CI has 2 cores, so 32 concurrent nvcc's there
would measure the scheduler, not kache. Long form (`--long` or KACHE_STRESS_LONG=1): 36 TUs, 8 rounds,
32 concurrent compiles. Figures are printed at the end (and as JSON with --json FILE).
Needs root for the tmpfs (filled, read-only); without it the cache is a plain directory and those two
faults are skipped (said in the output).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import kachetest  # noqa: E402

KACHE = kachetest.KACHE
NVCC = kachetest.NVCC
HANG_GUARD_S = 900  # a compile still running after this is a hang (not a timing assertion)
OLD_TEMP_AGE_S = 2 * 3600


def sections(obj):
    return kachetest.KacheTestCase.sections(None, obj)


class Failure(Exception):
    pass


class Stress:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.ws = tempfile.mkdtemp(prefix="kache-stress-")
        self.src_dir = os.path.join(self.ws, "src")
        self.mnt = os.path.join(self.ws, "cachefs")
        self.cache = os.path.join(self.mnt, "cache")
        self.tmpfs = False
        self.notes = []
        self.resized_behind_kache = 0  # bytes by which the corruptions resized entry files (see corrupt_some)
        self.failures = []
        self.figures = dict(compiles=0, hits=0, misses=0, kills=0, kache_kills_clear_zero=0, reruns=0,
                            corruptions=0, evictions=0, clears=0, zeroes=0, wrong_objects=0, failed_builds=0,
                            stats_mismatches=0, size_mismatches=0, stale_temps_left=0, rounds=0,
                            full_fs_rounds=0, read_only_rounds=0, storage_errors=0)
        self.version = {}      # tu -> int (edits so far)
        self.baseline = {}     # (tu, version) -> sections of plain nvcc's object
        self.lock = threading.Lock()
        self.running = {}      # pid -> Popen, every kache process the chaos may kill
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("KACHE_") and k not in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CPATH")}
        self.env.update(KACHE_DIR=self.cache, KACHE_CONFIG=os.path.join(self.ws, "kache.toml"),
                        XDG_CONFIG_HOME=os.path.join(self.ws, "config"), KACHE_LOCK_TIMEOUT="20")

    # --- setup ---------------------------------------------------------------------------------------
    def setup(self):
        os.makedirs(self.src_dir)
        os.makedirs(self.mnt)
        if os.geteuid() == 0:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.args.fs_kib}k", "tmpfs", self.mnt],
                               capture_output=True, text=True)
            self.tmpfs = r.returncode == 0
            if not self.tmpfs:
                self.notes.append(f"no tmpfs ({r.stderr.strip()}): cache on a plain directory; "
                                  "full-filesystem and read-only faults skipped")
        else:
            self.notes.append("not root: cache on a plain directory; full-filesystem and read-only faults skipped")
        os.makedirs(self.cache)
        with open(os.path.join(self.src_dir, "common.cuh"), "w") as f:
            f.write("#pragma once\n__device__ inline float twice(float v) { return 2.0f * v; }\n")
        for tu in range(self.args.tus):
            self.version[tu] = 0
            self.write_tu(tu)
        # Sources older than the clock tick: a compile stores (see kachetest.write).
        time.sleep(0.05)
        # Size bound: about half of the entries fit, so stores evict constantly.
        self.build_one(0, os.path.join(self.ws, "probe.o"))
        entry = self.largest_entry()
        max_size = max(entry * self.args.tus // 2, 4 * entry)
        self.env["KACHE_MAX_SIZE"] = str(max_size)
        self.entry_size = entry
        self.run_kache(["-C"])
        self.notes.append(f"cache {'on a ' + str(self.args.fs_kib) + ' KiB tmpfs' if self.tmpfs else 'on a directory'}, "
                          f"max_size {max_size} B (largest entry file {entry} B)")

    def tu_path(self, tu):
        return os.path.join(self.src_dir, f"tu{tu:03d}.cu")

    def write_tu(self, tu):
        v = self.version[tu]
        with open(self.tu_path(tu), "w") as f:
            f.write('#include "common.cuh"\n'
                    f"__global__ void k{tu}(float* x, float a) {{ x[threadIdx.x] = twice(x[threadIdx.x]) * a + {v}.5f; }}\n"
                    f"int host{tu}() {{ return {tu * 1000 + v}; }}\n")

    def baseline_of(self, tu):
        key = (tu, self.version[tu])
        if key not in self.baseline:
            out = os.path.join(self.ws, f"plain-{tu}-{key[1]}.o")
            r = subprocess.run([NVCC, "-c", self.tu_path(tu), "-o", out], cwd=self.src_dir, env=self.env,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise Failure(f"plain nvcc failed on tu{tu}: {r.stderr}")
            self.baseline[key] = sections(out)
            os.unlink(out)
        return self.baseline[key]

    # --- running kache -------------------------------------------------------------------------------
    def run_kache(self, args, check=True):
        r = subprocess.run([KACHE] + args, env=self.env, cwd=self.src_dir, capture_output=True, text=True,
                           timeout=HANG_GUARD_S)
        if check and r.returncode != 0:
            raise Failure(f"kache {' '.join(args)} failed: {r.stderr}")
        return r

    def build_one(self, tu, out):
        r = self.run_kache(["nvcc", "-c", self.tu_path(tu), "-o", out], check=False)
        return r

    def spawn(self, args, env=None):
        p = subprocess.Popen([KACHE] + args, env=dict(self.env, **(env or {})), cwd=self.src_dir, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        with self.lock:
            self.running[p.pid] = p
        return p

    def reap(self, p):
        try:
            out, err = p.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            err = "HANG: " + err
        with self.lock:
            self.running.pop(p.pid, None)
        return p.returncode, err

    def kill_group(self, p):
        # kill -9 of kache, then of its process group: the nvcc it started must not finish the output
        # behind the rerun's back.
        try:
            os.kill(p.pid, signal.SIGKILL)
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    # --- cache inspection ----------------------------------------------------------------------------
    def entry_files(self):
        out = {}
        for shard in os.listdir(self.cache) if os.path.isdir(self.cache) else []:
            sp = os.path.join(self.cache, shard)
            if len(shard) != 1 or not os.path.isdir(sp):
                continue
            for sub in os.listdir(sp):
                dp = os.path.join(sp, sub)
                if sub.startswith(".") or not os.path.isdir(dp):
                    continue
                for name in os.listdir(dp):
                    p = os.path.join(dp, name)
                    if not name.startswith(".") and os.path.isfile(p):
                        try:
                            out[p] = os.path.getsize(p)
                        except FileNotFoundError:
                            pass
        return out

    def explain_record_bytes(self):
        # kache counts an entry's explain record (<cache>/explain/<k0>/<k1k2>/<key>.json) in its size.
        total = 0
        for root, _, files in os.walk(os.path.join(self.cache, "explain")):
            for name in files:
                if name.endswith(".json") and not name.startswith("."):
                    try:
                        total += os.path.getsize(os.path.join(root, name))
                    except FileNotFoundError:
                        pass
        return total

    def temp_files(self):
        out = []
        for root, _, files in os.walk(self.cache):
            out += [os.path.join(root, f) for f in files if f.startswith(".tmp.")]
        return out

    def largest_entry(self):
        sizes = self.entry_files().values()
        return max(sizes) if sizes else 64 * 1024

    def plant_old_temps(self, n):
        planted = []
        dirs = [os.path.dirname(p) for p in self.entry_files()] or [self.cache]
        old = time.time() - OLD_TEMP_AGE_S
        for i in range(n):
            d = self.rng.choice(dirs)
            p = os.path.join(d, f".tmp.{'%032x' % self.rng.getrandbits(128)}.999999.{i}")
            try:
                with open(p, "wb") as f:
                    f.write(b"left by a writer killed long ago")
                os.utime(p, (old, old))
                planted.append(p)
            except OSError:
                pass
        return planted

    def corrupt_some(self, n):
        files = list(self.entry_files())
        self.rng.shuffle(files)
        done = 0
        for p in files[:n]:
            kind = self.rng.choice(["flip", "truncate", "empty", "garbage"])
            try:
                with open(p, "r+b") as f:
                    data = bytearray(f.read())
                    if kind == "flip" and data:
                        i = self.rng.randrange(len(data))
                        data[i] ^= 1 << self.rng.randrange(8)
                    elif kind == "truncate":
                        data = data[: self.rng.randrange(max(len(data), 1))]
                    elif kind == "empty":
                        data = bytearray()
                    else:
                        data = bytearray(self.rng.getrandbits(8) for _ in range(max(len(data), 64)))
                    before = f.tell()
                    f.seek(0)
                    f.write(data)
                    f.truncate()
                # kache takes a file it drops or evicts off its counters by the size it finds; a file resized
                # behind its back leaves the difference counted until a cleanup recounts.
                self.resized_behind_kache += abs(before - len(data))
                done += 1
            except OSError:
                pass
        self.figures["corruptions"] += done
        return set(files[:n])

    def stats(self):
        return json.loads(self.run_kache(["-s", "--json"]).stdout)

    # --- one round -----------------------------------------------------------------------------------
    def chaos_round(self, rnd, out_dir, clear_loop, fill, read_only, corrupted):
        # The same output paths every round (the output's name is part of a compile's key), emptied
        # first so that no object of an earlier round passes for a new one.
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        tus = list(range(self.args.tus))
        self.rng.shuffle(tus)
        results = {}   # tu -> (rc, stderr, killed)
        killed = set()
        stop = threading.Event()
        filler = os.path.join(self.mnt, "filler")

        def clear_zero_loop():
            while not stop.is_set():
                time.sleep(self.rng.uniform(0.5, 2.5))
                which = self.rng.choice(["-C", "-z"])
                p = self.spawn([which])
                rc, _ = self.reap(p)
                if rc == 0:
                    self.figures["clears" if which == "-C" else "zeroes"] += 1

        def watch_evictions():
            # Entry files that vanish while no kache -C runs were evicted (damaged ones, dropped by the
            # hit that read them, are left out): sampled often enough to see most of them go.
            seen = set(self.entry_files())
            while not stop.is_set():
                time.sleep(0.05)
                now = set(self.entry_files())
                self.figures["evictions"] += len(seen - now - corrupted)
                seen = now

        def killer():
            while not stop.is_set():
                time.sleep(self.rng.uniform(0.05, 0.6))
                with self.lock:
                    victims = list(self.running.values())
                if not victims or self.rng.random() > self.args.kill_rate:
                    continue
                p = self.rng.choice(victims)
                is_compile = "nvcc" in p.args
                if is_compile:
                    with self.lock:
                        tu = compile_of.get(p.pid)
                        if tu is None:
                            continue
                        killed.add(tu)
                    self.figures["kills"] += 1
                else:
                    self.figures["kache_kills_clear_zero"] += 1
                self.kill_group(p)

        compile_of = {}
        threads = [threading.Thread(target=killer)]
        if clear_loop:
            threads.append(threading.Thread(target=clear_zero_loop))
        else:
            threads.append(threading.Thread(target=watch_evictions))
        if fill and self.tmpfs:
            # Fill the filesystem but for a few KiB: stores fail with ENOSPC, builds must not.
            st = os.statvfs(self.mnt)
            free = st.f_bavail * st.f_frsize
            with open(filler, "wb") as f:
                try:
                    f.write(b"\0" * max(free - 8192, 0))
                except OSError:
                    pass
        for t in threads:
            t.start()
        pending = list(tus)
        active = {}
        ro_done = False
        started = 0
        while pending or active:
            while pending and len(active) < self.args.concurrency:
                tu = pending.pop()
                # The debug log says hit or miss per compile (the stats are zeroed by the -z loop).
                p = self.spawn(["nvcc", "-c", self.tu_path(tu), "-o", os.path.join(out_dir, f"tu{tu}.o")],
                               {"KACHE_LOG": "kache=debug"})
                with self.lock:
                    compile_of[p.pid] = tu
                active[p.pid] = (tu, p)
                started += 1
                if read_only and self.tmpfs and not ro_done and started >= len(tus) // 2:
                    r = subprocess.run(["mount", "-o", "remount,ro", self.mnt], capture_output=True, text=True)
                    if r.returncode != 0:
                        self.notes.append(f"remount read-only failed: {r.stderr.strip()}")
                    ro_done = True
            # Reap whichever finished (polled: the Popen objects own their pids).
            finished = [pid for pid, (_, p) in active.items() if p.poll() is not None]
            if not finished:
                time.sleep(0.02)
                continue
            for pid in finished:
                tu, p = active.pop(pid)
                rc, err = self.reap(p)
                with self.lock:
                    was_killed = tu in killed
                results[tu] = (rc, err, was_killed)
                if rc == 0 and not was_killed:
                    self.figures["hits"] += int("debug: hit: " in err)
                    self.figures["misses"] += int("debug: miss: running" in err)
        stop.set()
        for t in threads:
            t.join()
        if read_only and self.tmpfs:
            subprocess.run(["mount", "-o", "remount,rw", self.mnt], check=True)
        if os.path.exists(filler):
            os.unlink(filler)
        self.figures["compiles"] += len(results)
        return results

    def verify_round(self, rnd, out_dir, results, planted):
        fails = []
        self.run_kache(["-z"])
        reruns = 0
        for tu, (rc, err, was_killed) in sorted(results.items()):
            out = os.path.join(out_dir, f"tu{tu}.o")
            if was_killed:
                r = self.build_one(tu, out)
                reruns += 1
                self.figures["reruns"] += 1
                if r.returncode != 0:
                    self.figures["failed_builds"] += 1
                    fails.append(f"round {rnd}: killed build of tu{tu} failed when rerun: {r.stderr}")
                    continue
            elif rc != 0:
                self.figures["failed_builds"] += 1
                fails.append(f"round {rnd}: build of tu{tu} failed ({rc}): {err}")
                continue
            if sections(out) != self.baseline_of(tu):
                self.figures["wrong_objects"] += 1
                fails.append(f"round {rnd}: tu{tu}'s object differs from plain nvcc's"
                             f"{' (rerun after kill)' if was_killed else ''}")
        # A few quiet builds, so every round checks the stats on more than the reruns.
        sample = self.rng.sample(range(self.args.tus), min(4, self.args.tus))
        for tu in sample:
            out = os.path.join(out_dir, f"tu{tu}.o")
            r = self.build_one(tu, out)
            if r.returncode != 0 or sections(out) != self.baseline_of(tu):
                self.figures["wrong_objects" if r.returncode == 0 else "failed_builds"] += 1
                fails.append(f"round {rnd}: quiet build of tu{tu} wrong or failed: {r.stderr}")
        invocations = reruns + len(sample)
        s = self.stats()
        outcomes = (s["hits"] + s["misses"] + s["passthrough"] + s["compile_failed"]
                    + s["error_reasons"].get("internal", 0))
        if outcomes != invocations or s["errors"] != sum(s["error_reasons"].values()):
            self.figures["stats_mismatches"] += 1
            fails.append(f"round {rnd}: stats do not add up: {invocations} invocations, {json.dumps(s)}")
        # Size accounting against the files on disk.
        on_disk = sum(self.entry_files().values()) + self.explain_record_bytes()
        if abs(s["cache_size"] - on_disk) > self.largest_entry() + self.resized_behind_kache:
            self.figures["size_mismatches"] += 1
            fails.append(f"round {rnd}: kache reports {s['cache_size']} B, entry files and explain records hold {on_disk} B")
        left = [p for p in planted if os.path.exists(p)]
        if left:
            self.figures["stale_temps_left"] += len(left)
            fails.append(f"round {rnd}: {len(left)} temp files from before the run survived the eviction passes")
        return fails

    def run(self):
        self.setup()
        corrupted = set()
        for rnd in range(self.args.rounds):
            self.figures["rounds"] += 1
            # Edits: a few TUs change each round (new keys, new misses).
            for tu in self.rng.sample(range(self.args.tus), max(1, self.args.tus // 6)) if rnd else []:
                self.version[tu] += 1
                self.write_tu(tu)
            time.sleep(0.05)
            for tu in range(self.args.tus):
                self.baseline_of(tu)
            planted = self.plant_old_temps(3)
            cleanups_before = self.figures["evictions"] + self.figures["clears"]
            clear_loop = rnd % 2 == 1
            read_only = rnd % 4 == 2
            fill = rnd % 4 == 3
            self.figures["full_fs_rounds"] += int(fill and self.tmpfs)
            self.figures["read_only_rounds"] += int(read_only and self.tmpfs)
            out_dir = os.path.join(self.ws, "out")
            self.run_kache(["-z"])
            results = self.chaos_round(rnd, out_dir, clear_loop, fill, read_only, corrupted)
            chaos_stats = self.stats()
            self.figures["storage_errors"] += chaos_stats["error_reasons"].get("storage-write", 0)
            # The planted temp files must be gone only if a cleanup pass (an eviction that removed
            # something, or a kache -C) ran this round; the final kache -C checks them all.
            cleaned = self.figures["evictions"] + self.figures["clears"] > cleanups_before
            fails = self.verify_round(rnd, out_dir, results, planted if cleaned else [])
            self.failures += fails
            for f in fails:
                print("FAIL", f, flush=True)
            corrupted = self.corrupt_some(self.args.corrupt)
            print(f"round {rnd}: {len(results)} compiles, {sum(1 for r in results.values() if r[2])} killed, "
                  f"clear/zero loop {'on' if clear_loop else 'off'}, full fs {fill and self.tmpfs}, "
                  f"read-only {read_only and self.tmpfs}: {'ok' if not fails else str(len(fails)) + ' failures'}",
                  flush=True)
        # The final cleanup removes every temp file older than the run.
        old = self.plant_old_temps(3)
        self.run_kache(["-C"])
        left = [p for p in old if os.path.exists(p)] + [
            p for p in self.temp_files() if os.path.getmtime(p) < self.start_time]
        if left:
            self.figures["stale_temps_left"] += len(left)
            self.failures.append(f"after kache -C: temp files older than the run remain: {left}")

    def cleanup(self):
        if self.tmpfs:
            subprocess.run(["umount", "-l", self.mnt])
        if os.environ.get("KACHE_KEEP_TEST_DIRS") != "1":
            shutil.rmtree(self.ws, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--long", action="store_true", default=os.environ.get("KACHE_STRESS_LONG") == "1")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("KACHE_STRESS_SEED", "0")) or None)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--rounds", type=int, help="override the form's number of rounds")
    ap.add_argument("--tus", type=int, help="override the form's number of TUs")
    args = ap.parse_args()
    if NVCC is None:
        print("nvcc is not on PATH: skipped")
        return 77
    args.seed = args.seed or random.randrange(1 << 30)
    if args.long:
        args.tus, args.rounds, args.concurrency, args.corrupt, args.fs_kib = 36, 8, 32, 6, 4096
    else:
        args.tus, args.rounds, args.concurrency, args.corrupt, args.fs_kib = 10, 4, 6, 3, 2048
    args.kill_rate = 0.15
    overrides = {"rounds": ap.parse_args().rounds, "tus": ap.parse_args().tus}
    for name, value in overrides.items():
        if value:
            setattr(args, name, value)
    print(f"stress: {'long' if args.long else 'short'} form, seed {args.seed} (KACHE_STRESS_SEED to repeat), "
          f"{args.tus} TUs, {args.rounds} rounds, {args.concurrency} concurrent", flush=True)
    s = Stress(args)
    s.start_time = time.time()
    try:
        s.run()
    except Failure as e:
        s.failures.append(str(e))
    finally:
        s.cleanup()
    for n in s.notes:
        print("note:", n)
    print("figures:", json.dumps(s.figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(figures=s.figures, notes=s.notes, failures=s.failures, seed=args.seed), f, indent=1)
    if s.failures:
        print(f"{len(s.failures)} failures:")
        for f in s.failures:
            print(" ", f)
        return 1
    print("stress: all invariants held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
