#!/usr/bin/env bash
# Callgrind instructions of one direct hit of `kache gcc -c foo.c -o foo.o` with a warm cache: the figure
# docs/remote-execution.md and the kache-reapi commit compare (main's kache against this one: a hit must
# not pay for remote execution). Four runs fill the cache (the first two are misses: foo.c is new), two
# runs under valgrind let the toolchain probe settle (valgrind's environment is keyed), then the count.
#   bash bench/gcc_hit_callgrind.sh KACHE_BINARY [WORK_DIR=/tmp/kache-gcc-hit]
# Deterministic (instructions, not time); it asserts nothing.
set -euo pipefail
bin="$(realpath "$1")"
work="${2:-/tmp/kache-gcc-hit}"
rm -rf "$work" && mkdir -p "$work/src"
cd "$work/src"
printf '#include <stdio.h>\nint f(int x) { return x * 3; }\nint main(void) { printf("%%d\\n", f(2)); return 0; }\n' >foo.c
touch -d 2026-01-01 foo.c
export KACHE_DIR="$work/cache" HOME="$work"
for _ in 1 2 3 4; do "$bin" gcc -c foo.c -o foo.o; done
for i in 1 2 3; do
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.$i" "$bin" gcc -c foo.c -o foo.o 2>"$work/valgrind.$i"
done
grep -o 'Collected : [0-9]*' "$work/valgrind.3"
"$bin" -s | grep -E '^(hits|misses)'
