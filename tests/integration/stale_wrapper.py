#!/usr/bin/env python3
"""A deliberately wrong compiler cache, used only to show that the build-system tests can fail.

`stale_wrapper.py nvcc ARGS` keys an entry on the output path as written (-o) alone: the first compile
for an output path runs nvcc and stores the object (and the -MF file); every later compile for that
path, in any build directory, is a "hit" that restores what was stored, whatever changed in the sources, headers or flags. That is
the silent stale device binary of ADR-1320, made by a cache. It speaks enough of kache's command line
for the tests (--show-stats --json, --zero-stats, --clear) and counts hits, misses and passthrough.

Never used by the suite as a cache under test; run a test against it with
  KACHE_UNDER_TEST=tests/integration/stale_wrapper.py python3 tests/integration/test_device_axis.py
and that test must fail.
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys

CACHE = os.path.join(os.environ.get("KACHE_DIR") or os.path.expanduser("~/.cache/kache"), "stale-wrapper")
STATS = os.path.join(CACHE, "stats.json")


def load_stats():
    try:
        with open(STATS) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"hits": 0, "misses": 0, "passthrough": 0, "passthrough_reasons": {}}


def save_stats(s):
    os.makedirs(CACHE, exist_ok=True)
    with open(STATS, "w") as f:
        json.dump(s, f)


def count(field, reason=None):
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ninja -j2 runs two of these at once
        s = load_stats()
        s[field] += 1
        if reason:
            s["passthrough_reasons"][reason] = s["passthrough_reasons"].get(reason, 0) + 1
        save_stats(s)


def option_value(args, name):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        opts = argv[1:]
        if "--zero-stats" in opts or "-z" in opts:
            save_stats({"hits": 0, "misses": 0, "passthrough": 0, "passthrough_reasons": {}})
        if "--clear" in opts or "-C" in opts:
            shutil.rmtree(os.path.join(CACHE, "entries"), ignore_errors=True)
        if "--show-stats" in opts or "-s" in opts:
            s = load_stats()
            entries = os.path.join(CACHE, "entries")
            s.update(errors=0, entries=len(os.listdir(entries)) // 2 if os.path.isdir(entries) else 0,
                     direct_hits=0, stored=s["misses"], not_stored=0)
            print(json.dumps(s))
        return 0
    compiler, args = argv[1], argv[2:]
    out = option_value(args, "-o")
    device_output = any(a in args for a in ("-fatbin", "--fatbin", "-cubin", "--cubin", "-ptx", "--ptx", "--genco"))
    compiling = ("-c" in args or "-dc" in args or device_output) and "-dlink" not in args and out is not None
    if not compiling:
        count("passthrough", "device-link" if "-dlink" in args else "not-a-compile")
        return subprocess.call([compiler] + args)
    key = hashlib.sha256(out.encode()).hexdigest()
    entry = os.path.join(CACHE, "entries", key)
    depfile = option_value(args, "-MF")
    if "-dependency-file" in args:  # hipcc's spec 003 form: -Xclang -dependency-file -Xclang FILE
        depfile = args[args.index("-dependency-file") + 2]
    if os.path.exists(entry + ".o"):
        shutil.copyfile(entry + ".o", out)
        if depfile and os.path.exists(entry + ".d"):
            shutil.copyfile(entry + ".d", depfile)
        count("hits")
        return 0
    rc = subprocess.call([compiler] + args)
    if rc == 0:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        shutil.copyfile(out, entry + ".o")
        if depfile and os.path.exists(depfile):
            shutil.copyfile(depfile, entry + ".d")
        else:
            open(entry + ".d", "w").close()
        count("misses")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
