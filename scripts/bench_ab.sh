#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Before/after benchmark comparison in one run: builds bench/<name> for each name in $BENCHES
# (default "elementwise reduce") from a base source tree (e.g. `git archive <rev> | tar -x -C
# .base`) and from this tree, then runs the two builds alternately, ROUNDS times each, so that both
# see the same machine state. A bench program the base tree lacks is copied into it from this tree
# (it must use only API the base has). Logs go to $OUT (default /tmp/tessera-out) as
# <bench>.<base|new>.<round>.log; the PASS/MISS/RESULT lines of each run are printed.
# Usage: [BENCHES="..."] bash scripts/bench_ab.sh BASE_TREE [ROUNDS] [extra bench arguments...]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=$(cd "${1:?usage: bench_ab.sh BASE_TREE [ROUNDS]}" && pwd)
ROUNDS=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
OUT=${OUT:-/tmp/tessera-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_EXAMPLES=OFF ${CMAKE_ARGS:-})
BENCHES=${BENCHES:-elementwise reduce}
targets=()
for b in $BENCHES; do
  targets+=("bench_$b")
  [ -f "$BASE/bench/$b.cpp" ] || { echo "bench_ab: $BASE lacks bench/$b.cpp: copied from this tree"; cp "$ROOT/bench/$b.cpp" "$BASE/bench/$b.cpp"; }
done
status=0
for tree in "$BASE" "$ROOT"; do
  cmake -S "$tree" -B "$tree/build-ab" "${args[@]}" > "$OUT/ab_configure.log" 2>&1 &&
    cmake --build "$tree/build-ab" --target "${targets[@]}" -j "$(nproc)" > "$OUT/ab_build.log" 2>&1 ||
    { echo "bench_ab: building $tree failed"; tail -n 30 "$OUT/ab_build.log"; exit 1; }
done
for r in $(seq 1 "$ROUNDS"); do
  for b in $BENCHES; do
    for side in base new; do
      tree=$([ "$side" = base ] && echo "$BASE" || echo "$ROOT")
      log="$OUT/$b.$side.$r.log"
      "$tree/build-ab/bench_$b" "$@" > "$log" 2>&1 || { status=1; echo "bench_$b ($side) failed"; }
      echo "== bench_$b $side round $r"
      grep -E "PASS|MISS|RESULT" "$log"
    done
  done
done
exit $status
