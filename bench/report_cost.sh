#!/bin/bash
# Usage: bench/report_cost.sh PROJ NAME=BIN,EVENTS... (PROJ: a genproject.py tree, as bench/hit_profile.py makes;
# EVENTS: KACHE_EVENTS for that run). Issue 32: what the event log adds to a hit.
# Instructions (callgrind) of one warm hit per binary and TU. The hit is repeated first so the cache is in
# its steady state, and the measured run must itself be a hit (kache's statistics, zeroed before it).
set -e
proj=$1; shift
cd $proj
for spec in "$@"; do
  name=${spec%%=*}; rest=${spec#*=}; bin=${rest%%,*}; events=${rest#*,}
  for kind in tiny thrust; do
    src=$(ls src | grep "^$kind" | head -1)
    cmd="nvcc -std=c++17 -O2 -Iinclude -gencode arch=compute_75,code=sm_75 -c src/$src -o out/$kind.o -MD -MF out/$kind.o.d -MT out/$kind.o"
    export KACHE_DIR=$proj/../cache-$name KACHE_CONFIG=$proj/../k.toml KACHE_EVENTS=$events
    for i in 1 2 3; do $bin $cmd; done
    $bin -z > /dev/null
    valgrind --tool=callgrind --callgrind-out-file=/tmp/report-cg-$name-$kind.out $bin $cmd 2>/dev/null
    ir=$(grep -E "^(summary|totals):" /tmp/report-cg-$name-$kind.out | head -1 | awk '{print $2}')
    hits=$($bin --print-stats | awk '$1 == "hits" {print $2}')
    misses=$($bin --print-stats | awk '$1 == "misses" {print $2}')
    echo "$name $kind $ir hits=${hits:-0} misses=${misses:-0}"
  done
done
