#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU machine's full check, in one call: the README's test command (all GPUs), the GPU tests
# again with CUDA_VISIBLE_DEVICES=0 and some with the memory cache off, the demo, bench/elementwise,
# bench/reduce and bench/stencil. `multi`, for a machine of several GPUs: the GPU tests only
# (mpirun runs included), the examples, bench/stencil, bench/linalg, bench/solver and the N processes x 1 GPU
# against 1 process x N GPUs comparison (scripts/bench_distributed.sh). `suite`: the whole build,
# every gpu-labelled test on all GPUs (mpirun runs with up to 4 ranks, stress and soak included),
# the examples, bench_sparse and bench_capture, and a rank killed during an allreduce, a halo
# exchange and a host read on GPUs; bench_elementwise's summary too.
# `ab BASE_TREE`: before/after benchmarks against another tree (scripts/bench_ab.sh) on all GPUs,
# then on one, then bench_stencil and bench_distributed; run it right after `suite`, while the
# machine is warm, to reuse its build. Logs go to $OUT when set.
# `stress [N]`: the stress program N times (default 10) with one rank per GPU, a new seed each run.
# `mgrace [WAVES [BASE_TREE]]`: test_solver's repeated split cholesky in 8 processes at once, WAVES
# times (default 4; MGRACE_REPEAT factors per size each, default 3), with GPU 0 kept busy, printing
# every wrong factor's message; BASE_TREE's first.
# `scaling`: the copy, halo, stencil, overlap and capture tests (every ctest variant), then
# bench_stencil with its diagnostic rows.
# `bulk`: the elementwise tests, then bench_elementwise with and without the staged vector path.
# `ranks`: the distributed tests under mpirun on the GPUs, then bench_distributed (RANKS_VARIANTS:
# again with other NCCL or Tessera settings).
# `final`: the tests of the paths a session changed and bench_elementwise, when the suite no
# longer fits the session's device time.
# `launchers`: the tests of the GPU launcher threads' paths, then bench_reduce (5) and bench_capture
# with and without them.
# `profile`: a sampled profile of the host thread of one bench (bench/support/sample_profile.cpp).
# `reduce_probe`: hand-written one-kernel float sums against CUB's DeviceReduce (no Tessera).
# `stencil_probe`: hand-written Jacobi and 3-D diffusion kernels against cudaMemcpy (no Tessera).
# `soak`: the GPU soak cycle by cycle (which cycles grow GPU memory or threads).
# `jit`: the stencil tests and bench_stencil with and without the run-time compiled stencil kernels.
# `trace`: a GPU timeline of one bench through CUPTI (TRACE_BENCH, TRACE_ARGS, TRACE_MATCH, TRACE_API;
# TRACE_RANKS: under mpirun, a trace per rank; TRACE_AROUND, TRACE_WINDOW; scripts/timeline.py).
# `kernels`: the kept graphs' and user kernels' tests, then bench_kernels and bench_capture with and
# without kept graphs (LAUNCH_VARIANTS).
# `launch`: the bare launch's host cost (bench/support/launch_probe.cu; on several GPUs also one thread
# per GPU at once), then bench_capture and bench_reduce's sum to the host with kept graphs, through
# the driver (TESSERA_GRAPH_LAUNCH=0) and through the runtime (also TESSERA_RUNTIME_LAUNCH=1).
# `peer`: the copy tests (default and forced NCCL copies, and the gather kernel), then bench_stencil's re-shard and
# bench_fft's fft2 with the default, the copy engines and other NCCL chunk sizes (PEER_VARIANTS adds
# more: space-separated variants, each VAR=value settings joined by commas).
# Usage: bash scripts/gpu_check.sh [tests|bench|all|multi|suite|stress [N]|mgrace [WAVES [BASE_TREE]]|peer|scaling|bulk|ranks|final|trace|launch|kernels|launchers|profile|reduce_probe|stencil_probe|soak|jit|ab BASE_TREE]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-/tmp/tessera-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # root in the GPU machine's container
export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CUDA_ARCHITECTURES=90"
what=${1:-all}
# For the focused modes below: configures, builds the given targets, runs the gpu-labelled ctest
# entries matching REGEX and prints the counts (logs NAME_build.log, NAME_ctest.log); a failing
# test sets status, a failing build ends the script.
build_and_test() {
  local name=$1 regex=$2
  shift 2
  source "$ROOT/scripts/common.sh"
  set +e
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target "$@" -j "$(nproc)" > "$OUT/${name}_build.log" 2>&1 ||
    { grep -E "error" "$OUT/${name}_build.log" | head -20; exit 1; }
  (cd "$BUILD_DIR" && ctest -L gpu -R "$regex" -j 4 --output-on-failure) > "$OUT/${name}_ctest.log" 2>&1 ||
    { status=1; grep -B4 -A12 -E "ERROR:|FATAL|terminate|what\(\)" "$OUT/${name}_ctest.log" | head -n 60; }
  grep -E "tests passed|Failed|\*\*\*" "$OUT/${name}_ctest.log" | tail -n 12
}
# The ctest names of these test programs, every variant: ^(test_a|test_b)\.
# For the modes that run one bench: configures and builds target $1 (log $OUT/$2_build.log); a
# failing configure or build ends the script.
build_one() {
  source "$ROOT/scripts/common.sh"
  set +e
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target "$1" -j "$(nproc)" > "$OUT/$2_build.log" 2>&1 ||
    { grep -E "error" "$OUT/$2_build.log" | head -20; exit 1; }
}
variants_of() { echo "^($(echo "$@" | tr ' ' '|'))\\."; }
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
  for b in "$ROOT"/build/bench_elementwise "$ROOT"/build/bench_reduce "$ROOT"/build/bench_stencil "$ROOT"/build/bench_fft; do
    [ -x "$b" ] && "$b" 2>&1 | tee "$OUT/$(basename "$b").log"
  done
fi
if [ "$what" = multi ]; then
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  source "$ROOT/scripts/common.sh"
  set +e  # common.sh sets -e: report every failure below instead of stopping at the first
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target tessera_tests tessera_examples bench_stencil bench_linalg bench_solver bench_fft bench_sparse bench_capture bench_distributed \
    -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
  # The benchmarks first: they are the shortest part and hold the targets.
  "$BUILD_DIR/bench_stencil" 2>&1 | tee "$OUT/bench_stencil.log" | tail -n 17
  BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/bench_distributed.sh" "$gpus" 2>&1 | tee "$OUT/bench_distributed.log" | tail -n 14
  echo "== GPU tests on $gpus GPUs (mpirun runs included)"
  ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure -j 8 2>&1 | tee "$OUT/test_gpus.log" | tail -n 25
  [ "${PIPESTATUS[0]}" = 0 ] || { status=1; grep -B4 -A8 -E "ERROR:|FATAL|terminate|what\(\)" "$OUT/test_gpus.log" | head -n 80; }
  for e in jacobi game_of_life multi_gpu least_squares poisson_fft sparse_cg pagerank; do
    "$BUILD_DIR/$e" > "$OUT/$e.log" 2>&1 || { status=1; echo "$e FAILED"; }
    tail -n 2 "$OUT/$e.log"
  done
  echo "== mpirun -np $gpus $BUILD_DIR/distributed"
  mpirun -np "$gpus" -x NCCL_NVLS_ENABLE "$BUILD_DIR/distributed" 2>&1 | tee "$OUT/distributed.log" | tail -n 12
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  "$BUILD_DIR/bench_linalg" --reps 5 2>&1 | tee "$OUT/bench_linalg.log" | tail -n 8
  "$BUILD_DIR/bench_solver" --reps 3 2>&1 | tee "$OUT/bench_solver.log" | tail -n 8
  "$BUILD_DIR/bench_fft" --reps 5 2>&1 | tee "$OUT/bench_fft.log" | tail -n 8
  "$BUILD_DIR/bench_sparse" 2>&1 | tee "$OUT/bench_sparse.log" | tail -n 16
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  "$BUILD_DIR/bench_capture" 2>&1 | tee "$OUT/bench_capture.log" | tail -n 9
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "$what" = suite ]; then
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  source "$ROOT/scripts/common.sh"
  set +e
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
  echo "== GPU tests on $gpus GPUs (mpirun runs included)"
  ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure -j 8 > "$OUT/test_gpus.log" 2>&1
  [ $? = 0 ] || { status=1; grep -B4 -A8 -E "ERROR:|FATAL|terminate|what\(\)" "$OUT/test_gpus.log" | head -n 80; }
  grep -E "tests passed|\*\*\*|Failed|Skipped|SKIPPED" "$OUT/test_gpus.log" | sort | uniq -c | sort -rn | head -30
  for e in jacobi game_of_life multi_gpu fused_broadcast reductions user_kernels linear_algebra least_squares poisson_fft sparse_cg pagerank; do
    [ -x "$BUILD_DIR/$e" ] || continue
    "$BUILD_DIR/$e" > "$OUT/ex_$e.log" 2>&1 || { status=1; echo "$e FAILED"; }
    echo "$e: $(tail -n 1 "$OUT/ex_$e.log")"
  done
  for b in bench_sparse bench_capture bench_stencil bench_elementwise; do
    [ -x "$BUILD_DIR/$b" ] || continue
    "$BUILD_DIR/$b" > "$OUT/$b.log" 2>&1 || { status=1; echo "$b FAILED"; }
    sed -n '/== summary/,$p' "$OUT/$b.log"
  done
  "$BUILD_DIR/bench_fft" --reps 5 > "$OUT/bench_fft.log" 2>&1 || { status=1; echo "bench_fft FAILED"; }
  grep -E "^  \(2\) fft2" "$OUT/bench_fft.log" | tail -n 1
  "$BUILD_DIR/bench_reduce" --cases 5 > "$OUT/bench_reduce5.log" 2>&1 || { status=1; echo "bench_reduce FAILED"; }
  grep -E "Tessera float|plain" "$OUT/bench_reduce5.log" | head -n 8
  if [ "$gpus" -ge 4 ] && [ -x "$BUILD_DIR/test_mpi_killed_rank" ]; then
    for op in allreduce halo read reshard; do
      TESSERA_BACKEND=cuda TESSERA_MPI_TIMEOUT=5 bash "$ROOT/tests/mpi/killed_rank.sh" "$(command -v mpirun)" \
        "$BUILD_DIR/test_mpi_killed_rank" "$op" 4 > "$OUT/killed_$op.log" 2>&1 || status=1
      echo "killed rank during $op (4 GPU ranks): $(tail -n 1 "$OUT/killed_$op.log")"
    done
  fi
fi
if [ "$what" = stress ]; then
  # Issue 20: the 4-rank stress program 10 times in a row (a new seed each time) on the build above.
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  source "$ROOT/scripts/common.sh"
  set +e
  cmake --build "$BUILD_DIR" --target test_mpi_stress -j "$(nproc)" > "$OUT/stress_build.log" 2>&1 || { tail -n 30 "$OUT/stress_build.log"; exit 1; }
  for i in $(seq 1 "${2:-10}"); do
    start=$(date +%s)
    mpirun -np "$gpus" -x NCCL_NVLS_ENABLE "$BUILD_DIR/test_mpi_stress" --ops 2000 --seed "$((100 + i))" > "$OUT/stress_$i.log" 2>&1
    rc=$?
    [ $rc = 0 ] || status=1
    echo "stress run $i of ${2:-10} ($gpus GPU ranks, seed $((100 + i))): rc $rc, $(( $(date +%s) - start )) s: $(tail -n 1 "$OUT/stress_$i.log")"
  done
fi
if [ "$what" = mgrace ]; then
  # The split cholesky failed only under `ctest -j 8`, where every single-GPU test runs on GPU 0:
  # GPU 0 is kept busy by a second process (PyTorch or CuPy, when either imports) while 8 processes
  # of the repeated test run at once on the GPUs (TESSERA_BACKEND=cuda), WAVES times; with
  # BASE_TREE, that tree's test_solver runs the same waves first (before/after a fix, one machine).
  source "$ROOT/scripts/common.sh"
  set +e
  base=${3:-}
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  base_pid=""
  if [ -n "$base" ]; then
    (cmake -S "$base" -B "$base/build-mg" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_EXAMPLES=OFF ${CMAKE_ARGS:-} \
      > "$OUT/mgrace_base_configure.log" 2>&1 &&
      cmake --build "$base/build-mg" --target test_solver -j "$(nproc)" > "$OUT/mgrace_base_build.log" 2>&1) &
    base_pid=$!
  fi
  cmake --build "$BUILD_DIR" --target test_solver -j "$(nproc)" > "$OUT/mgrace_build.log" 2>&1 ||
    { grep -E "error" "$OUT/mgrace_build.log" | head -20; exit 1; }
  if [ -n "$base_pid" ] && ! wait "$base_pid"; then
    echo "mgrace: building $base failed"
    tail -n 20 "$OUT/mgrace_base_configure.log" "$OUT/mgrace_base_build.log"
    exit 1
  fi
  load_pid=""
  for lib in torch cupy; do
    python3 -c "import $lib" 2> /dev/null || continue
    if [ $lib = torch ]; then
      code="import torch
x=torch.ones(1<<26,device='cuda:0')
while True: x.mul_(1.0000001); y=x[:1024]*2"
    else
      code="import cupy
x=cupy.ones(1<<26,dtype=cupy.float32)
while True: x*=1.0000001; y=x[:1024]*2"
    fi
    CUDA_VISIBLE_DEVICES=0 python3 -c "$code" > "$OUT/mgrace_load.log" 2>&1 &
    load_pid=$!
    trap 'kill "$load_pid" 2> /dev/null' EXIT
    echo "mgrace: GPU 0 kept busy by $lib (pid $load_pid)"
    break
  done
  [ -n "$load_pid" ] || echo "mgrace: neither PyTorch nor CuPy imports: no extra load on GPU 0"
  sleep 5
  for tree in ${base:+"$base/build-mg"} "$BUILD_DIR"; do
    logs=$(mktemp -d)
    for w in $(seq 1 "${2:-4}"); do
      pids=()
      for p in 1 2 3 4 5 6 7 8; do
        TESSERA_BACKEND=cuda TESSERA_TEST_REPEAT=${MGRACE_REPEAT:-3} timeout 300 "$tree/test_solver" \
          -tc='*repeated after a split solve*' > "$logs/$w.$p.log" 2>&1 &
        pids+=($!)
      done
      wait "${pids[@]}"
    done
    # A pass counts only where the test case ran (doctest reports success when the filter matches
    # nothing) and reached the GPUs (it skips with a message on fewer than two).
    passed=$(grep -l -E 'test cases: +1 \| +1 passed' "$logs"/*.log | xargs -r grep -L "SKIPPED" | wc -l)
    echo "mgrace $tree: $passed of $(ls "$logs"/*.log | wc -l) processes ran the case on GPUs and passed"
    grep -h -E "columns that differ|logged:|values:|SKIPPED" "$logs"/*.log | sort | uniq -c | sort -rn | head -20
    [ "$tree" = "$BUILD_DIR" ] && { [ "$passed" = "$(ls "$logs"/*.log | wc -l)" ] || status=1; }
  done
  [ -n "$load_pid" ] && kill "$load_pid" 2> /dev/null
fi
if [ "$what" = peer ]; then
  # Issue 22 item 2: the copy paths between GPUs. The copy tests through ctest (their `.cuda` runs
  # take NCCL for large batches by default, their `.nccl` runs for every batch in 1 MiB chunks),
  # then bench_stencil's re-shard row (2) and bench_fft's fft2 over all GPUs with the default, the
  # copy engines (TESSERA_PEER_NCCL=0) and other NCCL chunk sizes, on one machine.
  source "$ROOT/scripts/common.sh"
  set +e
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target bench_stencil bench_fft test_copy test_halo test_placement test_fft_distributed \
    -j "$(nproc)" > "$OUT/peer_build.log" 2>&1 || { grep -E "error" "$OUT/peer_build.log" | head -20; exit 1; }
  (cd "$BUILD_DIR" && ctest -R "^test_(copy|halo|placement|fft_distributed)\.(cuda|nccl)$" -j 4 --output-on-failure) \
    > "$OUT/peer_ctest.log" 2>&1 || status=1
  grep -E "tests passed|Failed|\*\*\*" "$OUT/peer_ctest.log" | tail -n 12
  # The gather kernel (TESSERA_PEER_KERNEL=3, copy engines' batches only: NCCL off).
  for t in test_copy test_halo test_placement test_fft_distributed; do
    log=$(TESSERA_PEER_NCCL=0 TESSERA_PEER_KERNEL=3 TESSERA_BACKEND=cuda timeout 120 "$BUILD_DIR/$t" 2>&1)
    rc=$?
    echo "== $t with TESSERA_PEER_KERNEL=3: rc $rc, $(echo "$log" | tail -n 1)"
    [ $rc = 0 ] || { status=1; echo "$log" | grep -E "ERROR|error" | head -n 5; }
  done
  variants=("" "TESSERA_PEER_NCCL=0" "TESSERA_PEER_NCCL=0,TESSERA_PEER_KERNEL=3" "TESSERA_PEER_NCCL_CHUNK_MB=1024"
            ${PEER_VARIANTS:-})
  for v in "${variants[@]}"; do
    echo "== ${v:-default}"
    env ${v//,/ } "$BUILD_DIR/bench_stencil" 2>&1 | grep -E "^  \(2\) (copyto|re-shard)|GB/s per device" | tail -n 7
    env ${v//,/ } "$BUILD_DIR/bench_fft" --reps 5 2>&1 | grep -E "^  \(2\) fft2" | tail -n 1
  done
fi
if [ "$what" = scaling ]; then
  # Issue 22 items 1 and 2 on a machine of several GPUs: the copy, halo, stencil, overlap and capture
  # tests (every ctest variant: default, NCCL, gather kernels), then bench_stencil with its
  # diagnostic rows (the sweep alone, the hidden sweep captured).
  tests="test_copy test_halo test_placement test_fft_distributed test_stencil_paths test_hide_communication test_capture"
  build_and_test scaling "$(variants_of $tests)" bench_stencil $tests
  "$BUILD_DIR/bench_stencil" --reps ${SCALING_REPS:-5} > "$OUT/bench_stencil.log" 2>&1 || status=1
  sed -n '/^  (2) copyto/,$p' "$OUT/bench_stencil.log" | grep -v "^      [0-9.]* iterations/s"
fi
if [ "$what" = soak ]; then
  # The GPU soak's growth, cycle by cycle: test_mpi_soak --trace 1 under mpirun, one rank per GPU,
  # with the defaults and without the NCCL exchange (TESSERA_PEER_NCCL=0): each rank names the
  # cycles after which its GPU memory or its threads passed their highest so far.
  # SOAK_CYCLES: cycles per run (default 3000).
  source "$ROOT/scripts/common.sh"
  set +e
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target test_mpi_soak -j "$(nproc)" > "$OUT/soak_build.log" 2>&1 ||
    { grep -E "error" "$OUT/soak_build.log" | head -20; exit 1; }
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  for v in "TESSERA_PEER_NCCL=" "TESSERA_PEER_NCCL=0"; do
    echo "== $v"
    env "$v" CUDA_MODULE_LOADING=EAGER TESSERA_BACKEND=cuda timeout 400 mpirun -np "$gpus" --oversubscribe \
      -x TESSERA_PEER_NCCL -x CUDA_MODULE_LOADING -x TESSERA_BACKEND -x NCCL_NVLS_ENABLE \
      "$BUILD_DIR/test_mpi_soak" --cycles "${SOAK_CYCLES:-3000}" --trace 1 > "$OUT/soak_nccl${v#*=}.log" 2>&1 || status=1
    grep -E "trace|PASS|FAIL|rror" "$OUT/soak_nccl${v#*=}.log" | head -n 40
  done
fi
if [ "$what" = jit ]; then
  # Issue 22 item 1: the run-time compiled stencil kernels (backend/rtc/stencil.cpp). The stencil, halo,
  # overlap and capture tests with them (the default) and without (TESSERA_JIT_STENCIL=0), then
  # bench_stencil's one-GPU rows (Jacobi, 3-D diffusion) with and without them, alternating, twice.
  # JIT_TESTS: another list of tests; JIT_ARGS: bench_stencil's arguments; JIT_VARIANTS: below.
  tests=${JIT_TESTS:-"test_stencil_paths test_halo test_hide_communication test_capture test_views_assign test_broadcast"}
  build_and_test jit "$(variants_of $tests)" bench_stencil $tests
  echo "== the same tests with TESSERA_JIT_STENCIL=0"
  (cd "$BUILD_DIR" && TESSERA_JIT_STENCIL=0 ctest -L gpu -R "$(variants_of $tests)" -j 4 --output-on-failure) \
    > "$OUT/jit_off_ctest.log" 2>&1 || { status=1; grep -B4 -A12 -E "ERROR:|FATAL" "$OUT/jit_off_ctest.log" | head -40; }
  grep -E "tests passed" "$OUT/jit_off_ctest.log"
  for round in 1 2; do
    for v in 1 0; do
      echo "== round $round, TESSERA_JIT_STENCIL=$v"
      TESSERA_JIT_STENCIL=$v "$BUILD_DIR/bench_stencil" ${JIT_ARGS:-} > "$OUT/stencil_${round}_$v.log" 2>&1 || status=1
      grep -E "Jacobi sweep|diffusion 512|memcpy of the grid|plain CUDA 5-point|vs memcpy" "$OUT/stencil_${round}_$v.log" | head -30
    done
  done
  # JIT_VARIANTS: other settings to compare, space-separated, each VAR=value settings joined by
  # commas (e.g. TESSERA_JIT_STENCIL_ROWS=2,TESSERA_JIT_STENCIL_PLANES=16), one run each.
  for v in ${JIT_VARIANTS:-}; do
    echo "== $v"
    env ${v//,/ } "$BUILD_DIR/bench_stencil" ${JIT_ARGS:-} > "$OUT/stencil_variant.log" 2>&1 || status=1
    grep -E "vs memcpy" "$OUT/stencil_variant.log" | head -8
  done
fi
if [ "$what" = bulk ]; then
  # Issue 22 item 4: the staged vector path (bulk copies into shared memory) against the per-thread
  # vector loads (TESSERA_ELEMENTWISE_BULK=0), alternating, after the elementwise tests on the GPU.
  tests="test_operators test_functions test_functions_more test_half_arrays test_broadcast test_complex test_views_assign"
  build_and_test bulk "$(variants_of $tests)" bench_elementwise $tests
  for round in 1 2; do
    for v in 1 0; do
      echo "== round $round, TESSERA_ELEMENTWISE_BULK=$v"
      TESSERA_ELEMENTWISE_BULK=$v "$BUILD_DIR/bench_elementwise" > "$OUT/bench_elementwise_${round}_$v.log" 2>&1 || status=1
      sed -n '/== summary/,$p' "$OUT/bench_elementwise_${round}_$v.log"
    done
  done
fi
if [ "$what" = ranks ]; then
  # Issue 22 item 2 across ranks: the distributed tests under mpirun (1, 2 and 4 ranks on the GPUs;
  # the FFT's transposes and the sparse matrices' re-shards are copies between ranks too), then
  # bench_distributed (1 process x N GPUs against N processes x 1 GPU).
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  build_and_test ranks "^test_(distributed|distributed_values|fft_distributed|sparse_distributed)\\.mpi[0-9x]+(\\.nccl|\\.chunks|\\.small_chunks)?\\.cuda$" \
    test_distributed_values test_distributed test_fft_distributed test_sparse_distributed bench_distributed
  BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/bench_distributed.sh" "$gpus" 2>&1 | tee "$OUT/bench_distributed.log" |
    grep -E "^\(5\)|copyto|summary|vs 1 proc|allreduce" | tail -n 14
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  # RANKS_VARIANTS: more runs with other settings (space-separated, each VAR=value settings joined
  # by commas; NCCL_ and TESSERA_ variables reach every rank), the re-shard rows only.
  for v in ${RANKS_VARIANTS:-}; do
    echo "== $v"
    env ${v//,/ } BUILD_DIR="$BUILD_DIR" bash "$ROOT/scripts/bench_distributed.sh" "$gpus" >> "$OUT/bench_distributed.log" 2>&1 ||
      status=1
    grep -E "^  copyto|^  \(5\)" "$OUT/bench_distributed.log" | tail -n 2
  done
fi
if [ "$what" = final ]; then
  # The tests of the paths changed since the last suite run (copies between GPUs, stencils and
  # overlap, captures, elementwise, distributed values under mpirun), then bench_elementwise: for a
  # session's last minutes of device time, when the whole suite no longer fits.
  tests="test_copy test_halo test_placement test_fft_distributed test_stencil_paths test_hide_communication test_capture"
  tests="$tests test_operators test_distributed_values"
  build_and_test final "$(variants_of $tests)" bench_elementwise $tests
  "$BUILD_DIR/bench_elementwise" > "$OUT/bench_elementwise.log" 2>&1 || status=1
  sed -n '/== summary/,$p' "$OUT/bench_elementwise.log"
fi
if [ "$what" = trace ]; then
  # A GPU timeline of one bench (bench/support/cupti_trace.cpp, CUPTI; no Nsight Systems on these
  # machines): TRACE_BENCH (default stencil) with TRACE_ARGS (default "--reps 3 --warmup 1") under
  # the tracer, the records in $OUT/trace.csv.gz, then scripts/timeline.py's per-sample summary of
  # the samples that ran a kernel named like TRACE_MATCH (default tessera_stencil), or, for a bench
  # timed on the host (no spin kernels: TRACE_BENCH=reduce TRACE_ARGS="--cases 5"), each kernel's
  # count and durations. TRACE_API=1 records the host's CUDA calls too and prints where each
  # thread's time from one launch to the next goes (TRACE_BENCH=capture: the plain launches).
  # TRACE_RANKS=N runs the bench under mpirun, one GPU per rank, one trace per rank
  # (trace_r<rank>.csv.gz); TRACE_AROUND=TEXT prints, instead of the summary, what ran around the
  # last kernels named like TEXT (timeline.py --around, TRACE_WINDOW ms, default -1,1), e.g.
  # TRACE_BENCH=distributed TRACE_RANKS=2 TRACE_API=1 TRACE_AROUND=signa for a re-shard across ranks.
  bench="bench_${TRACE_BENCH:-stencil}"
  build_one "$bench" trace
  cuda=${CUDA_HOME:-/usr/local/cuda}
  g++ -O2 -shared -fPIC -o "$BUILD_DIR/cupti_trace.so" "$ROOT/bench/support/cupti_trace.cpp" -I"$cuda/include" \
    -L"$cuda/lib64" -lcupti 2>&1 | tail -n 5
  if [ -n "${TRACE_RANKS:-}" ]; then
    wrapper="$BUILD_DIR/trace_rank.sh"  # each rank's own file
    printf '#!/bin/bash\nexport TRACE_OUT="%s/trace_r$OMPI_COMM_WORLD_RANK.csv"\nexec "$@"\n' "$OUT" > "$wrapper"
    chmod +x "$wrapper"
    export TRACE_API="${TRACE_API:-0}"
    export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((TRACE_RANKS - 1)))}"
    # shellcheck disable=SC2086
    CUDA_INJECTION64_PATH="$BUILD_DIR/cupti_trace.so" mpirun -np "$TRACE_RANKS" -x CUDA_VISIBLE_DEVICES \
      -x NCCL_NVLS_ENABLE -x CUDA_INJECTION64_PATH -x TRACE_API "$wrapper" "$BUILD_DIR/$bench" \
      ${TRACE_ARGS:---reps 3 --warmup 1} > "$OUT/trace_bench.log" 2>&1 || status=1
  else
    # shellcheck disable=SC2086
    CUDA_INJECTION64_PATH="$BUILD_DIR/cupti_trace.so" TRACE_OUT="$OUT/trace.csv" "$BUILD_DIR/$bench" \
      ${TRACE_ARGS:---reps 3 --warmup 1} > "$OUT/trace_bench.log" 2>&1 || status=1
  fi
  for t in "$OUT"/trace*.csv; do
    [ -f "$t" ] || continue
    gzip -f "$t"
    name=$(basename "$t" .csv)
    echo "== $name"
    if [ -n "${TRACE_AROUND:-}" ]; then
      python3 "$ROOT/scripts/timeline.py" "$t.gz" --around "$TRACE_AROUND" --window="${TRACE_WINDOW:--1,1}" |
        tee "$OUT/timeline_$name.txt" | head -n 60
    else
      python3 "$ROOT/scripts/timeline.py" "$t.gz" --match "${TRACE_MATCH:-tessera_stencil}" |
        tee "$OUT/timeline_$name.txt" | head -n 80
    fi
    if [ "${TRACE_API:-0}" = 1 ]; then
      python3 "$ROOT/scripts/timeline.py" "$t.gz" --api | tee "$OUT/timeline_api_$name.txt" | head -n 40
    fi
  done
fi
if [ "$what" = launch ]; then
  # Issue 22 item 3: the bare launch's host cost on this machine (bench/support/launch_probe.cu),
  # then bench_capture's plain launches and bench_reduce's sum to the host (case 5) under each of
  # LAUNCH_VARIANTS (space-separated, each VAR=value settings joined by commas; default: kept
  # graphs, the driver, the runtime), alternating, two rounds, on one machine.
  source "$ROOT/scripts/common.sh"
  set +e
  mkdir -p "$BUILD_DIR"
  nvcc -std=c++17 -arch=sm_90 -o "$BUILD_DIR/launch_probe" "$ROOT/bench/support/launch_probe.cu" -lcuda -lpthread 2>&1 | tail -n 5
  "$BUILD_DIR/launch_probe" || status=1
  configure > "$OUT/configure.log" 2>&1 || { tail -n 30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD_DIR" --target bench_capture bench_reduce -j "$(nproc)" > "$OUT/launch_build.log" 2>&1 ||
    { grep -E "error" "$OUT/launch_build.log" | head -20; exit 1; }
  variants=${LAUNCH_VARIANTS:-"TESSERA_GRAPH_LAUNCH=1 TESSERA_GRAPH_LAUNCH=0 TESSERA_GRAPH_LAUNCH=0,TESSERA_RUNTIME_LAUNCH=1"}
  for round in 1 2; do
    for v in $variants; do
      echo "== round $round, $v"
      # shellcheck disable=SC2046
      env $(echo "$v" | tr ',' ' ') "$BUILD_DIR/bench_capture" --iters 2000 --reps 5 | grep -E "^  [0-9]+ GPU" || status=1
      # shellcheck disable=SC2046
      env $(echo "$v" | tr ',' ' ') "$BUILD_DIR/bench_reduce" --cases 5 | grep -E "Tessera float|plain" | head -n 8 || status=1
    done
  done
fi
if [ "$what" = kernels ]; then
  # Kept graphs (backend/runtime/kept_graphs.cpp) for the library's and the user kernels: their
  # tests, then bench_kernels (user kernels against the DSL) and bench_capture under each of
  # LAUNCH_VARIANTS (default: kept graphs, then TESSERA_GRAPH_LAUNCH=0), two rounds alternating;
  # the stencil tests too (the run-time compiled stencils launch as kept graphs), and bench_stencil.
  tests="test_kept_graphs test_kernels test_kernel_tasks test_launchers test_capture test_stencil_paths test_halo"
  tests="$tests test_hide_communication"
  build_and_test kernels "$(variants_of $tests)" bench_kernels bench_capture bench_stencil $tests
  variants=${LAUNCH_VARIANTS:-"TESSERA_GRAPH_LAUNCH=1 TESSERA_GRAPH_LAUNCH=0"}
  for round in 1 2; do
    for v in $variants; do
      echo "== round $round, $v"
      log="$OUT/bench_kernels_${round}_${v//[=,]/_}.log"
      # shellcheck disable=SC2046
      env $(echo "$v" | tr ',' ' ') "$BUILD_DIR/bench_kernels" > "$log" 2>&1 || status=1
      grep -E "fused DSL|PASS|MISS" "$log" | head -n 10
      # shellcheck disable=SC2046
      env $(echo "$v" | tr ',' ' ') "$BUILD_DIR/bench_capture" --iters 2000 --reps 5 | grep -E "^  [0-9]+ GPU" || status=1
    done
  done
  "$BUILD_DIR/bench_stencil" > "$OUT/bench_stencil.log" 2>&1 || status=1
  sed -n '/== summary/,$p' "$OUT/bench_stencil.log" | grep -v "n/a"
fi
if [ "$what" = reduce_probe ]; then
  # Issue 22 item 5: what one-kernel full reductions of 30M floats reach on this GPU against CUB's
  # DeviceReduce::Sum (bench/support/reduce_probe.cu), GPU time and host time to a host result.
  mkdir -p "$ROOT/build"
  nvcc -std=c++17 -O3 -arch=sm_90 -o "$ROOT/build/reduce_probe" "$ROOT/bench/support/reduce_probe.cu" -lcuda 2>&1 | tail -n 5
  "$ROOT/build/reduce_probe" ${REDUCE_PROBE_N:-} 2>&1 | tee "$OUT/reduce_probe.log" || status=1
fi
if [ "$what" = profile ]; then
  # Where the host's time goes (issue 22 item 3): bench/support/sample_profile.cpp samples the main
  # thread's stack of PROFILE_BENCH (default capture) run with PROFILE_ARGS; $OUT/profile.txt.
  bench="bench_${PROFILE_BENCH:-capture}"
  build_one "$bench" profile
  g++ -O2 -shared -fPIC -o "$BUILD_DIR/sample_profile.so" "$ROOT/bench/support/sample_profile.cpp" -ldl 2>&1 | tail -n 5
  # shellcheck disable=SC2086
  LD_PRELOAD="$BUILD_DIR/sample_profile.so" SAMPLE_OUT="$OUT/profile.txt" "$BUILD_DIR/$bench" \
    ${PROFILE_ARGS:---iters 2000 --reps 5} > "$OUT/profile_bench.log" 2>&1 || status=1
  grep -E "^  [0-9]+ GPU|summary" "$OUT/profile_bench.log"
  head -n 30 "$OUT/profile.txt"
  grep -A 40 "== inclusive" "$OUT/profile.txt"
fi
if [ "$what" = stencil_probe ]; then
  # Issue 22 item 1: what hand-written Jacobi and 3-D diffusion kernels reach on this GPU against
  # cudaMemcpy (bench/support/stencil_probe.cu), before a generated kernel copies their scheme.
  mkdir -p "$ROOT/build"
  nvcc -std=c++20 -O3 -arch=sm_90 -o "$ROOT/build/stencil_probe" "$ROOT/bench/support/stencil_probe.cu" 2>&1 | tail -n 5
  "$ROOT/build/stencil_probe" 2>&1 | tee "$OUT/stencil_probe.log" || status=1
fi
if [ "$what" = launchers ]; then
  # Issue 22 items 3 and 5: the GPU launcher threads and the reduction's done signal. The tests of
  # the paths they carry, then bench_reduce's host-result sum and bench_capture's plain launches
  # with both on, the launchers off (TESSERA_PARALLEL_LAUNCH=0) and both off, alternating. Logs:
  # reduce.log and capture.log (the device tool returns 8 files).
  tests="test_launchers test_reduce test_reduce_dims test_operators test_capture test_hide_communication test_broadcast test_copy test_stencil_paths test_complex_reductions test_statistics"
  # LAUNCHERS_TESTS: another list of tests; LAUNCHERS_BENCH=0: the tests only.
  tests=${LAUNCHERS_TESTS:-$tests}
  benches="bench_reduce bench_capture"
  [ "${LAUNCHERS_BENCH:-1}" = 1 ] || benches=""
  build_and_test launchers "$(variants_of $tests)" $benches $tests
  [ -n "$benches" ] || exit $status
  for round in 1 2; do
    for v in "1 1" "0 1" "0 0"; do
      set -- $v
      echo "== round $round, TESSERA_PARALLEL_LAUNCH=$1 TESSERA_REDUCE_SIGNAL=$2" | tee -a "$OUT/reduce.log" "$OUT/capture.log"
      TESSERA_PARALLEL_LAUNCH=$1 TESSERA_REDUCE_SIGNAL=$2 "$BUILD_DIR/bench_reduce" --cases 5 > "$OUT/r.log" 2>&1 || status=1
      cat "$OUT/r.log" >> "$OUT/reduce.log"
      grep -E "Tessera float s|plain CUB into mapped|WRONG|error" "$OUT/r.log"
      TESSERA_PARALLEL_LAUNCH=$1 TESSERA_REDUCE_SIGNAL=$2 "$BUILD_DIR/bench_capture" --iters 2000 --reps 5 > "$OUT/r.log" 2>&1 || status=1
      cat "$OUT/r.log" >> "$OUT/capture.log"
      grep -E "^  [0-9]+ GPU|WRONG|error" "$OUT/r.log"
    done
  done
  rm -f "$OUT/r.log"
fi
if [ "$what" = ab ]; then
  base=${2:?usage: gpu_check.sh ab BASE_TREE}
  BENCHES="${AB_BENCHES:-elementwise reduce kernels linalg}" bash "$ROOT/scripts/bench_ab.sh" "$base" 1 2>&1 | tee "$OUT/ab_all.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  echo "== one GPU"
  CUDA_VISIBLE_DEVICES=0 BENCHES="elementwise reduce" OUT="$OUT/one" bash "$ROOT/scripts/bench_ab.sh" "$base" 1 2>&1 | tee "$OUT/ab_one.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
echo "gpu_check status: $status"
exit $status
