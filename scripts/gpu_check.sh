#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU machine's full check, in one call: the README's test command (all GPUs), the GPU tests
# again with CUDA_VISIBLE_DEVICES=0 and some with the memory cache off, the demo, bench/elementwise
# and bench/reduce. Logs go to $OUT when set.
# Usage: bash scripts/gpu_check.sh [tests|bench|all]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-/tmp/tessera-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CUDA_ARCHITECTURES=90"
what=${1:-all}
nvidia-smi -L | tee "$OUT/gpus.txt"
status=0
if [ "$what" = all ] || [ "$what" = tests ]; then
  bash "$ROOT/scripts/test.sh" 2>&1 | tee "$OUT/test_all_gpus.log" | tail -n 40 || status=1
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  if [ "$(nvidia-smi -L | grep -c '^GPU ')" -gt 1 ]; then
    echo "== GPU tests with CUDA_VISIBLE_DEVICES=0"
    CUDA_VISIBLE_DEVICES=0 ctest --test-dir "$ROOT/build" -L gpu --output-on-failure -j 8 2>&1 | tee "$OUT/test_one_gpu.log" | tail -n 15
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
  echo "== GPU tests that allocate and free the most, with the memory cache off (TESSERA_MEMORY_POOL=0)"
  TESSERA_MEMORY_POOL=0 ctest --test-dir "$ROOT/build" -L gpu -R "residency|reduce_dims|collectives" --output-on-failure \
    -j 8 2>&1 | tee "$OUT/test_no_pool.log" | tail -n 8
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  bash "$ROOT/scripts/demo.sh" > "$OUT/demo.log" 2>&1 || { status=1; echo "demo FAILED"; tail -n 30 "$OUT/demo.log"; }
  grep -E "ok|OK|PASS|max error|FAIL" "$OUT/demo.log" | head -20
  cmake --build "$ROOT/build" --target tessera_bench -j "$(nproc)" > "$OUT/bench_build.log" 2>&1 || { status=1; tail -n 30 "$OUT/bench_build.log"; }
  for b in "$ROOT"/build/bench_elementwise "$ROOT"/build/bench_reduce; do
    [ -x "$b" ] && "$b" 2>&1 | tee "$OUT/$(basename "$b").log"
  done
fi
echo "gpu_check status: $status"
exit $status
