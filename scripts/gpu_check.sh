#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU machine's full check, in one call: the README's test command (all GPUs), the GPU tests
# again with CUDA_VISIBLE_DEVICES=0 and some with the memory cache off, the demo, bench/elementwise,
# bench/reduce and bench/stencil. `multi`, for a machine of several GPUs: the GPU tests only
# (mpirun runs included), the examples, bench/stencil, bench/linalg and the N processes x 1 GPU
# against 1 process x N GPUs comparison (scripts/bench_distributed.sh). Logs go to $OUT when set.
# Usage: bash scripts/gpu_check.sh [tests|bench|all|multi]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-/tmp/tessera-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # root in the GPU machine's container
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
  for b in "$ROOT"/build/bench_elementwise "$ROOT"/build/bench_reduce "$ROOT"/build/bench_stencil; do
    [ -x "$b" ] && "$b" 2>&1 | tee "$OUT/$(basename "$b").log"
  done
fi
if [ "$what" = multi ]; then
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  source "$ROOT/scripts/common.sh"
  set +e  # common.sh sets -e: report every failure below instead of stopping at the first
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target tessera_tests tessera_examples bench_stencil bench_linalg bench_distributed \
    -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
  # The benchmarks first: they are the shortest part and hold the targets.
  "$BUILD_DIR/bench_stencil" 2>&1 | tee "$OUT/bench_stencil.log" | tail -n 17
  BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/bench_distributed.sh" "$gpus" 2>&1 | tee "$OUT/bench_distributed.log" | tail -n 14
  echo "== GPU tests on $gpus GPUs (mpirun runs included)"
  ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure -j 8 2>&1 | tee "$OUT/test_gpus.log" | tail -n 25
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  for e in jacobi game_of_life multi_gpu; do
    "$BUILD_DIR/$e" > "$OUT/$e.log" 2>&1 || { status=1; echo "$e FAILED"; }
    tail -n 2 "$OUT/$e.log"
  done
  echo "== mpirun -np $gpus $BUILD_DIR/distributed"
  mpirun -np "$gpus" -x NCCL_NVLS_ENABLE "$BUILD_DIR/distributed" 2>&1 | tee "$OUT/distributed.log" | tail -n 12
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  "$BUILD_DIR/bench_linalg" --reps 5 2>&1 | tee "$OUT/bench_linalg.log" | tail -n 8
fi
echo "gpu_check status: $status"
exit $status
