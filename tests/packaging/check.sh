#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that another CMake project can use Tessera, both ways README.md describes, by building
# and running the tiny CXX-only project in tests/packaging/consumer (main.cpp and kernel.cu):
#   subdirectory  add_subdirectory(<this repo>) + tessera_add_program
#   package       a fresh build of Tessera (tessera_runtime only), `cmake --install` into a
#                 temporary prefix, then find_package(Tessera) + tessera_add_program, and
#                 tessera::tessera linked by hand (CUDA builds)
# Each program runs on host devices (TESSERA_BACKEND=host) and, where GPUs are visible, on them.
# ctest runs it as the test `packaging` (label host; the top CMakeLists.txt registers it).
#
# Usage: bash tests/packaging/check.sh [--mode both|subdirectory|package] [--work DIR] [--jobs N]
#                                      [--keep] [-- CMAKE_ARGS...]
#   CMAKE_ARGS configure Tessera (the install build and the add_subdirectory build), e.g.
#   -DTESSERA_ENABLE_CUDA=OFF; the find_package consumer gets none of them (it finds nvcc itself).
#   --work: where the builds go (emptied first; default: a temporary folder, removed on success
#   unless --keep). --jobs: build jobs (default 2). Environment: CMAKE_GENERATOR (default Ninja
#   when found), CMAKE_BUILD_TYPE (default Release), CXX.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
mode=both
work=
jobs=2
keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --mode) mode=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) echo "check.sh: unknown argument $1 (see the usage at the top of the file)" >&2; exit 2 ;;
  esac
done
case $mode in both | subdirectory | package) ;; *) echo "check.sh: --mode both|subdirectory|package" >&2; exit 2 ;; esac
tessera_args=("$@")

if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-packaging.XXXXXX")
else
  keep=1
  mkdir -p "$work"
  rm -rf "${work:?}/consumer" "$work/subdirectory" "$work/tessera-build" "$work/prefix" "$work/package"
fi
work=$(cd "$work" && pwd)

gen=()
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
common=("${gen[@]}" "-DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release}")

say() { echo "[packaging] $*"; }
step() {  # step NAME command...: runs a command, prints its time, shows its log on failure
  local name=$1 start=$SECONDS; shift
  say "$name: $*"
  if ! "$@" > "$work/$name.log" 2>&1; then
    tail -n 60 "$work/$name.log"
    say "FAILED: $name (log: $work/$name.log)"
    exit 1
  fi
  say "$name: done in $((SECONDS - start)) s"
}
# Runs a consumer program on host devices and, where GPUs are visible, on the default devices.
run_program() {
  local bin=$1
  [ -x "$bin" ] || return 0
  say "running $bin (TESSERA_BACKEND=host)"
  TESSERA_BACKEND=host NCCL_NVLS_ENABLE=0 "$bin" || { say "FAILED: $bin"; exit 1; }
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    say "running $bin (default devices: the GPUs when Tessera has CUDA)"
    env -u TESSERA_BACKEND NCCL_NVLS_ENABLE=0 "$bin" || { say "FAILED: $bin"; exit 1; }
  fi
}

# The consumer is built from a copy, so that nothing in it can reach this repository by a
# relative path: in package mode it sees only the install prefix.
cp -r "$HERE/consumer" "$work/consumer"
total=$SECONDS

if [ "$mode" = both ] || [ "$mode" = subdirectory ]; then
  say "== add_subdirectory($ROOT) from a CXX-only project"
  step subdirectory-configure cmake -S "$work/consumer" -B "$work/subdirectory" "${common[@]}" \
    "-DTESSERA_SOURCE_DIR=$ROOT" "${tessera_args[@]}"
  step subdirectory-build cmake --build "$work/subdirectory" -j "$jobs"
  run_program "$work/subdirectory/consumer"
  run_program "$work/subdirectory/consumer_linked"
fi

if [ "$mode" = both ] || [ "$mode" = package ]; then
  say "== cmake --install, then find_package(Tessera) from a CXX-only project"
  step tessera-configure cmake -S "$ROOT" -B "$work/tessera-build" "${common[@]}" -DTESSERA_BUILD_TESTS=OFF \
    -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_BENCH=OFF "${tessera_args[@]}"
  step tessera-build cmake --build "$work/tessera-build" -j "$jobs"
  step tessera-install cmake --install "$work/tessera-build" --prefix "$work/prefix"
  for f in include/tessera/tessera/tessera.hpp include/tessera/tessera/device.hpp include/tessera/backend/execute.hpp \
           include/tessera/backend/cuda/executor.cuh lib/cmake/Tessera/TesseraConfig.cmake \
           lib/cmake/Tessera/TesseraConfigVersion.cmake lib/cmake/Tessera/TesseraTargets.cmake \
           lib/cmake/Tessera/TesseraFunctions.cmake; do
    [ -f "$work/prefix/$f" ] || { say "FAILED: $f is not installed"; exit 1; }
  done
  compgen -G "$work/prefix/lib*/libtessera_runtime.a" >/dev/null || { say "FAILED: libtessera_runtime.a is not installed"; exit 1; }
  # Tessera's source and build trees are hidden from the consumer, so it can only use the prefix.
  step package-configure cmake -S "$work/consumer" -B "$work/package" "${common[@]}" "-DCMAKE_PREFIX_PATH=$work/prefix"
  if grep -rqsF -e "$ROOT/dsl" -e "$ROOT/base" -e "$ROOT/backend" -e "$work/tessera-build" "$work/package" --include=build.ninja --include=flags.make \
       --include=link.txt --include=CMakeCache.txt; then
    say "FAILED: the find_package consumer refers to Tessera's source or build tree:"
    grep -rsF -e "$ROOT/dsl" -e "$ROOT/base" -e "$ROOT/backend" -e "$work/tessera-build" "$work/package" --include=build.ninja --include=flags.make \
      --include=link.txt --include=CMakeCache.txt | head -5
    exit 1
  fi
  step package-build cmake --build "$work/package" -j "$jobs"
  run_program "$work/package/consumer"
  run_program "$work/package/consumer_linked"
fi

say "OK ($mode) in $((SECONDS - total)) s"
if [ "$keep" = 0 ]; then rm -rf "$work"; else say "builds kept in $work"; fi
