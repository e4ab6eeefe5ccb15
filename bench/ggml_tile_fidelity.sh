#!/bin/bash
# Usage: OUT=DIR bash bench/ggml_tile_fidelity.sh  (from the repo root, with .gpu-carry/kache and .gpu-carry/ggml.tar.gz)
# Fidelity of ggml's fattn-tile-instance objects: plain nvcc twice, kache's miss (build-1) and hit (build-2) of each, compared by every allocated section.
set -u
REPO=$PWD; K=$REPO/.gpu-carry/kache
W=/tmp/gt; rm -rf $W; mkdir -p $W; cd $W
tar xzf $REPO/.gpu-carry/ggml.tar.gz
cd ggml
for b in build-1 build-2; do
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER_LAUNCHER=$K > /dev/null 2>&1 || echo "cmake $b failed"
done
T=$(ninja -C build-1 -t targets all | grep -Eo '^[^:]*fattn-tile-instance-dkq(64|72|96|112|128|256|320|512)-[^:]*\.cu\.o' | head -100)
echo "targets: $T"
export KACHE_DIR=$W/cache KACHE_CONFIG=/dev/null/none
python3 - <<'PY' > $OUT/cmd.txt
import json; d=json.load(open("build-1/compile_commands.json"))
for e in d:
    if "fattn-tile-instance" in e["file"]: print(e["command"]); break
PY
cat $OUT/cmd.txt | head -c 3000; echo
time ninja -C build-1 $T > $OUT/b1.log 2>&1; echo "b1 rc $?"
$K -s --json > $OUT/s1.json
time ninja -C build-2 $T > $OUT/b2.log 2>&1; echo "b2 rc $?"
$K -s --json > $OUT/s2.json
(cd build-2 && $K explain --last > $OUT/explain.txt 2>&1)
for t in $T; do mkdir -p $OUT/objs/$(dirname $t); cp build-1/$t $OUT/objs/$t.b1; cp build-2/$t $OUT/objs/$t.b2; done
# plain twice in build-2
sed -i "s|$K ||" build-2/build.ninja
for n in p1 p2; do rm -f $(for t in $T; do echo build-2/$t; done); ninja -C build-2 $T > $OUT/$n.log 2>&1; echo "$n rc $?"; for t in $T; do cp build-2/$t $OUT/objs/$t.$n; done; done
python3 - <<PY
import sys, os, glob
sys.path.insert(0, "$REPO/tests/integration"); import elfsections as e
for t in """$T""".split():
    base = "$OUT/objs/" + t
    s = {n: e.allocated_sections(base + "." + n) for n in ("b1", "b2", "p1", "p2")}
    for a, b in (("p1", "p2"), ("b1", "p1"), ("b2", "p1"), ("b1", "b2")):
        d = sorted(k for k in set(s[a]) | set(s[b]) if s[a].get(k) != s[b].get(k))
        print(os.path.basename(t), a, "vs", b, "differ in", d)
PY
python3 -c "
import json; a=json.load(open('$OUT/s1.json')); b=json.load(open('$OUT/s2.json'))
print('s1', {k:v for k,v in a.items() if k in ('hits','misses','passthrough','not_stored_reasons','stored_per_checkout')})
print('s2', {k:v for k,v in b.items() if k in ('hits','misses','passthrough','not_stored_reasons','stored_per_checkout')})"
head -50 $OUT/explain.txt
