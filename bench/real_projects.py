#!/usr/bin/env python3
"""Sharing and fidelity on real CUDA projects (issue 35): hits in a second build directory of the same
checkout, hits in a second checkout with the portable-path recipe, and every object compared with the
plain compiler's in its place by every allocated section.

Run on the GPU machine (16 cores), from the repository root, with the projects as tarballs:

    python3 bench/real_projects.py --kache PATH/kache --tarballs DIR --out DIR [ggml cuda-samples cuSZ]

For each project:
  1. checkout A, build-1 through kache (cold, empty cache);
  2. checkout A, build-2 through kache (a fresh build directory, same cache): hits, misses and reasons;
  3. build-2 built again by the plain compilers in the same place, every object compared with kache's;
  4. with --recipe (cuSZ): checkouts A and B at two paths, both with the portable-path recipe
     (-ffile-prefix-map=<checkout>=. for C, C++ and CUDA through -Xcompiler, and the checkout as a base
     dir), B's build all hits,
     B's objects compared with a plain recipe build of B.
Writes DIR/real-projects.json and DIR/real-projects.md. Nothing here is timed for a ratio: the counts
and the comparisons are the figures.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import elfsections  # noqa: E402

# name: (tarball, top directory in it, CMake arguments, a patch applied to the tree before configuring)
PROJECTS = {
    "ggml": ("ggml.tar.gz", "ggml", ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"], None),
    # cuda-samples sets its own nine architectures with set(); one (sm_90) keeps the cold build short
    # without changing what is compiled (the same 229 compiles).
    "cuda-samples": ("cuda-samples.tar.gz", "cuda-samples", [],
                     ("CMakeLists.txt", "set(CMAKE_CUDA_ARCHITECTURES 75 80 86 87 89 90 100 110 120)",
                      "set(CMAKE_CUDA_ARCHITECTURES 90)")),
    "cuSZ": ("cuSZ.tar.gz", "cuSZ", ["-DPSZ_BACKEND=CUDA", "-DCMAKE_CUDA_ARCHITECTURES=90"], None),
}
LAUNCHERS = ["-DCMAKE_C_COMPILER_LAUNCHER={k}", "-DCMAKE_CXX_COMPILER_LAUNCHER={k}",
             "-DCMAKE_CUDA_COMPILER_LAUNCHER={k}"]


def run(cmd, cwd=None, env=None, log=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if log is not None:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{r.stdout[-4000:]}{r.stderr[-4000:]}\n")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def unpack(tarball, top, patch, into):
    os.makedirs(into, exist_ok=True)
    with tarfile.open(tarball) as t:
        t.extractall(into)
    root = os.path.join(into, top)
    if patch:
        path = os.path.join(root, patch[0])
        with open(path) as f:
            text = f.read()
        assert patch[1] in text, f"{patch[0]} no longer holds {patch[1]!r}"
        with open(path, "w") as f:
            f.write(text.replace(patch[1], patch[2]))
    return root


def recipe_flags(checkout):
    m = f"-ffile-prefix-map={checkout}=."
    return [f"-DCMAKE_C_FLAGS={m}", f"-DCMAKE_CXX_FLAGS={m}", f"-DCMAKE_CUDA_FLAGS=-Xcompiler={m}"]


def build(src, bdir, cmake_args, env, kache=None, log=None, jobs=16):
    shutil.rmtree(bdir, ignore_errors=True)
    args = ["cmake", "-S", src, "-B", bdir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] + cmake_args
    if kache:
        args += [a.format(k=kache) for a in LAUNCHERS]
    run(args, env=env, log=log)
    t = time.monotonic()
    # -k 0: a target that fails to build in this image (a missing library) does not hide the others.
    r = subprocess.run(["ninja", "-C", bdir, "-k", "0", f"-j{jobs}"], env=env, capture_output=True, text=True)
    with open(log, "a") as f:
        f.write(f"$ ninja -C {bdir} (rc {r.returncode})\n{r.stdout[-6000:]}{r.stderr[-3000:]}\n")
    return time.monotonic() - t, r.returncode


def stats(kache, env):
    return json.loads(run([kache, "-s", "--json"], env=env).stdout)


def delta(after, before):
    out = {}
    for k, v in after.items():
        if isinstance(v, int) and k in before:
            out[k] = v - before[k]
        elif isinstance(v, dict):
            out[k] = {n: c - before.get(k, {}).get(n, 0) for n, c in v.items()
                      if isinstance(c, int) and c - before.get(k, {}).get(n, 0)}
    return out


def objects(bdir):
    found = {}
    for d, _, files in os.walk(bdir):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                found[os.path.relpath(p, bdir)] = p
    return found


def snapshot(bdir, into):
    shutil.rmtree(into, ignore_errors=True)
    kept = {}
    for rel, p in objects(bdir).items():
        dst = os.path.join(into, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(p, dst)
        kept[rel] = dst
    return kept


def compare(kept, bdir):
    """Objects of kache's build (kept) against the plain build now in bdir, by every allocated section."""
    plain = objects(bdir)
    equal, differ, missing = 0, [], []
    for rel, p in sorted(kept.items()):
        if rel not in plain:
            missing.append(rel)
            continue
        a, b = elfsections.allocated_sections(p), elfsections.allocated_sections(plain[rel])
        diff = sorted(s for s in set(a) | set(b) if a.get(s) != b.get(s))
        if diff:
            differ.append({"object": rel, "sections": diff})
        else:
            equal += 1
    return {"objects": len(kept), "equal": equal, "differ": differ, "missing_in_plain": missing}


def measure(name, args, work):
    tar, top, cmake_args, patch = PROJECTS[name]
    kache = os.path.abspath(args.kache)
    base = dict(os.environ)
    for k in list(base):
        if k.startswith("KACHE_") or k.startswith("CCACHE_"):
            del base[k]
    log = os.path.join(args.out, f"{name}.log")
    env = dict(base, KACHE_DIR=os.path.join(work, "cache"), KACHE_CONFIG="/dev/null/none",
               KACHE_SYSTEM_CONFIG="/dev/null/none")
    a = unpack(os.path.join(args.tarballs, tar), top, patch, os.path.join(work, "A"))
    res = {"project": name, "cmake_args": cmake_args, "patch": patch and patch[2]}
    s0 = stats(kache, env)
    res["build1_seconds"], res["build1_rc"] = build(a, os.path.join(a, "build-1"), cmake_args, env, kache, log)
    s1 = stats(kache, env)
    res["build1"] = delta(s1, s0)
    res["build2_seconds"], res["build2_rc"] = build(a, os.path.join(a, "build-2"), cmake_args, env, kache, log)
    res["build2"] = delta(stats(kache, env), s1)
    with open(os.path.join(args.out, f"{name}-partial.json"), "w") as f:  # a run cut short keeps the counts
        json.dump(res, f, indent=1)
    kept = snapshot(os.path.join(a, "build-2"), os.path.join(work, "kept-2"))
    res["plain_seconds"], res["plain_rc"] = build(a, os.path.join(a, "build-2"), cmake_args, base, None, log)
    res["fidelity_build2"] = compare(kept, os.path.join(a, "build-2"))
    if args.recipe and name in args.recipe:
        res["recipe"] = measure_recipe(name, args, work, kache, base, log)
    return res


def measure_recipe(name, args, work, kache, base, log):
    tar, top, cmake_args, patch = PROJECTS[name]
    env = dict(base, KACHE_DIR=os.path.join(work, "cache-recipe"), KACHE_CONFIG="/dev/null/none",
               KACHE_SYSTEM_CONFIG="/dev/null/none")
    a = os.path.join(work, "A", top)
    b = unpack(os.path.join(args.tarballs, tar), top, patch, os.path.join(work, "second", "place"))
    out = {}
    # The recipe (docs/sharing.md, "Portable paths"): the compiler's own map of the checkout to ".", and
    # the checkout as a base dir, so the map is keyed by the root's name.
    env_a, env_b = dict(env, KACHE_PATHS_BASE_DIRS=a), dict(env, KACHE_PATHS_BASE_DIRS=b)
    s0 = stats(kache, env)
    out["a_seconds"], _ = build(a, os.path.join(a, "build-r"), cmake_args + recipe_flags(a), env_a, kache, log)
    s1 = stats(kache, env)
    out["a"] = delta(s1, s0)
    out["b_seconds"], out["b_rc"] = build(b, os.path.join(b, "build-r"), cmake_args + recipe_flags(b), env_b,
                                          kache, log)
    out["b"] = delta(stats(kache, env), s1)
    kept = snapshot(os.path.join(b, "build-r"), os.path.join(work, "kept-r"))
    build(b, os.path.join(b, "build-r"), cmake_args + recipe_flags(b), base, None, log)
    out["fidelity_b"] = compare(kept, os.path.join(b, "build-r"))
    return out


def markdown(results):
    lines = ["| project | build-1 (cold) | build-2: hits / misses / passthrough | objects equal to plain |",
             "|---|---|---|---|"]
    for r in results:
        b1, b2, f = r["build1"], r["build2"], r["fidelity_build2"]
        lines.append(f"| {r['project']} | {b1.get('misses', 0)} misses, {b1.get('passthrough', 0)} passthrough, "
                     f"{r['build1_seconds']:.0f} s | {b2.get('hits', 0)} / {b2.get('misses', 0)} / "
                     f"{b2.get('passthrough', 0)} | {f['equal']}/{f['objects']} |")
        if "recipe" in r:
            rb, rf = r["recipe"]["b"], r["recipe"]["fidelity_b"]
            lines.append(f"| {r['project']}, second checkout with the recipe | | {rb.get('hits', 0)} / "
                         f"{rb.get('misses', 0)} / {rb.get('passthrough', 0)} | {rf['equal']}/{rf['objects']} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kache", required=True)
    p.add_argument("--tarballs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/kache-real")
    p.add_argument("--recipe", nargs="*", default=["cuSZ"])
    p.add_argument("projects", nargs="*", default=list(PROJECTS))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for name in args.projects:
        work = os.path.join(args.work, name)
        shutil.rmtree(work, ignore_errors=True)
        try:
            results.append(measure(name, args, work))
        except Exception as e:  # one project's failure is reported, the others still run
            results.append({"project": name, "error": str(e)[-4000:]})
        with open(os.path.join(args.out, "real-projects.json"), "w") as f:
            json.dump(results, f, indent=1)
    ok = [r for r in results if "error" not in r]
    with open(os.path.join(args.out, "real-projects.md"), "w") as f:
        f.write(markdown(ok))
    print(markdown(ok))
    for r in results:
        if "error" in r:
            print(f"{r['project']}: {r['error']}")


if __name__ == "__main__":
    main()
