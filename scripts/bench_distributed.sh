#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# N processes x 1 device against 1 process x N devices (bench/distributed.cpp): a rank sees only its
# own GPUs, so the two configurations are two runs of the same program. This script runs the
# one-process baseline (bench_distributed --save), then the same program under mpirun, one device
# per rank (--against), which prints every ratio and the PASS/MISS summary. Both runs use the same
# N GPUs (CUDA_VISIBLE_DEVICES=0..N-1 unless it is set) or, with --host, N host devices.
#
# Usage: bash scripts/bench_distributed.sh [--host] [N] [extra bench_distributed arguments...]
#   BUILD_DIR   the build holding bench_distributed (default build/)
#   MPIRUN      the launcher (default mpirun; --oversubscribe is added with --host)
# As root (the GPU machines' containers) OpenMPI refuses to start without OMPI_ALLOW_RUN_AS_ROOT=1
# and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1: the script sets both there unless the caller did.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
MPIRUN=${MPIRUN:-mpirun}
host=0
if [ "${1:-}" = "--host" ]; then
  host=1
  shift
fi
N=${1:-2}
[ $# -gt 0 ] && shift
bench="$BUILD_DIR/bench_distributed"
[ -x "$bench" ] || { echo "bench_distributed.sh: $bench not found: cmake --build $BUILD_DIR --target bench_distributed"; exit 1; }
base=$(mktemp /tmp/tessera-bench-distributed.XXXXXX)
trap 'rm -f "$base"' EXIT
export NCCL_NVLS_ENABLE=0
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
fi

if [ "$host" = 1 ]; then
  export TESSERA_BACKEND=host
  one=(env TESSERA_HOST_DEVICES="$N")
  many=("$MPIRUN" -np "$N" --oversubscribe -x TESSERA_BACKEND -x TESSERA_HOST_DEVICES=1)
else
  if [ -z "${CUDA_VISIBLE_DEVICES:-}" ]; then
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((N - 1)))
    export CUDA_VISIBLE_DEVICES
  fi
  one=(env)
  # Tessera gives each rank its share of CUDA_VISIBLE_DEVICES (one GPU each with N ranks).
  many=("$MPIRUN" -np "$N" -x CUDA_VISIBLE_DEVICES -x NCCL_NVLS_ENABLE)
fi
# The caller's NCCL and Tessera settings reach every rank (variants of one measurement).
for v in $(compgen -e | grep -E '^(NCCL_|TESSERA_)' || true); do many+=(-x "$v"); done

echo "== 1 process x $N $([ "$host" = 1 ] && echo "host devices" || echo "GPUs (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)")"
"${one[@]}" "$bench" --save "$base" "$@"
echo
echo "== $N processes x 1 $([ "$host" = 1 ] && echo "host device" || echo GPU), against the run above"
"${many[@]}" "$bench" --against "$base" "$@"
