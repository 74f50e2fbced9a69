#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compile time of a user's program (DESIGN.md, "Targets"): compiles the probes of bench/compile_time
# with the flags a configured build gives a program (tessera_add_program: nvcc in a CUDA build, the
# C++ compiler in a host-only one), RUNS times each after one warm-up, and prints min, median and
# max wall seconds (and user+sys CPU seconds) for each:
#   include_only.cpp      includes <tessera/tessera.hpp> only     target <= 3 s with nvcc, 2 cores
#   fused_reductions.cpp  10 fused expressions, 5 reductions      target <= 15 s with nvcc, 2 cores
# The flags are read from the build: the compile command of one of its programs (examples/, bench/;
# `ninja -t commands`, else compile_commands.json), else rebuilt from CMakeCache.txt. With --base
# TREE the probes are also compiled against TREE's headers (another checkout, e.g. from `git archive
# <rev> | tar -x -C .base`), alternating with this tree's so that both see the same machine state.
# With --phases, nvcc's per-phase seconds (--time) of the last run of each probe are printed too;
# --flags '...' appends flags to the command (e.g. -DCCCL_DISABLE_FP16_SUPPORT, docs/performance.md).
# Compile times depend on the load: the script prints `uptime` before and after; quote medians
# taken on an otherwise idle machine.
#
# Usage: bash scripts/compile_time.sh [--build DIR] [--runs N] [--base TREE] [--phases] [--flags '...']
#                                     [FILE.cpp...]
#        (default build: build/; FILE.cpp: more programs to time, after the two probes)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
RUNS=5
BASE=""
PHASES=0
EXTRA=""
probes=("$ROOT/bench/compile_time/include_only.cpp" "$ROOT/bench/compile_time/fused_reductions.cpp")
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --base) BASE=$(cd "$2" && pwd); shift 2 ;;
    --phases) PHASES=1; shift ;;
    --flags) EXTRA=$2; shift 2 ;;
    -h|--help) sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compile_time.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) probes+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
  esac
done
[ -f "$BUILD/CMakeCache.txt" ] || { echo "compile_time.sh: $BUILD is not a configured build (--build DIR)" >&2; exit 2; }
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt" | head -n 1; }

# -- the compile command of a program of this build ------------------------------------------------
# One line from the build's own commands: a program's source compiled with -c (the probe's path and
# output replace its own below).
program_command() {
  local pattern=" -c $ROOT/(examples|bench)/[a-z_0-9]+\\.cpp( |$)"
  if [ -f "$BUILD/build.ninja" ] && command -v ninja > /dev/null; then
    ninja -C "$BUILD" -t commands 2> /dev/null | grep -E -- "$pattern" | grep -v -- "-O1 " | head -n 1 && return
  fi
  if [ -f "$BUILD/compile_commands.json" ]; then
    grep -E '"command"' "$BUILD/compile_commands.json" | grep -E -- "$pattern" | head -n 1 |
      sed -e 's/^ *"command": *"//' -e 's/",\{0,1\} *$//' -e 's/\\"/"/g' && return
  fi
  return 1
}
# Rebuilt from the cache as tessera_add_program gives them, when the build lists no program.
cache_command() {
  local cuda_compiler flags
  cuda_compiler=$(cache CMAKE_CUDA_COMPILER)
  flags="-I$ROOT/base -I$ROOT/dsl -I$ROOT -O3 -DNDEBUG"
  if [ "$(cache TESSERA_ENABLE_CUDA)" != OFF ] && [ -n "$cuda_compiler" ] && [ -x "$cuda_compiler" ]; then
    local arch
    arch=$(cache CMAKE_CUDA_ARCHITECTURES)
    arch=${arch:-90}
    echo "$cuda_compiler -DTESSERA_HAS_CUDA=1 $flags --generate-code=arch=compute_${arch},code=[compute_${arch},sm_${arch}]" \
         "--extended-lambda --expt-relaxed-constexpr -std=c++20 -x cu -c PROBE"
  else
    echo "$(cache CMAKE_CXX_COMPILER) -DTESSERA_HAS_CUDA=0 $flags -std=c++20 -c PROBE"
  fi
}
line=$(program_command || true)
origin="the compile command of a program of $BUILD"
if [ -z "$line" ]; then
  line=$(cache_command)
  origin="rebuilt from $BUILD/CMakeCache.txt (no program compile command found)"
fi
# Drops the dependency-file flags, the output and the source: what is left are the flags.
read -r -a words <<< "$line"
cmd=()
skip=0
for w in "${words[@]}"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  case "$w" in
    -MD|-MMD) ;;
    -MT|-MF|-o) skip=1 ;;
    -c) skip=1 ;;
    *) cmd+=("$w") ;;
  esac
done
compiler=${cmd[0]}
nvcc=0
case "$(basename "$compiler")" in nvcc*) nvcc=1 ;; esac

# Flags for a tree: this tree's include directories replaced by the other tree's.
flags_for() {
  local tree=$1 w
  for w in "${cmd[@]}"; do
    case "$w" in
      -I"$ROOT"*) echo "-I$tree${w#-I"$ROOT"}" ;;
      *) echo "$w" ;;
    esac
  done
}
read -r -a extra_flags <<< "$EXTRA"
cmd+=("${extra_flags[@]}")
mapfile -t new_cmd < <(flags_for "$ROOT")
base_cmd=()
[ -n "$BASE" ] && mapfile -t base_cmd < <(flags_for "$BASE")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "compiler: $compiler ($([ $nvcc = 1 ] && echo "nvcc: a CUDA build" || echo "host-only build: the C++ compiler"))"
echo "flags: $origin:"
echo "  ${new_cmd[*]:1}"
echo "machine: $(nproc) cores; load before: $(uptime | sed 's/.*load average: //')"

# time_one VAR_PREFIX CMD...: appends one run's wall and user+sys seconds to $tmp/<prefix>.{wall,cpu}.
time_one() {
  local prefix=$1
  shift
  local t0 t1 ts
  t0=$(date +%s.%N)
  ts=$( { TIMEFORMAT='%U %S'; time "$@" > "$tmp/log" 2>&1; } 2>&1 ) || {
    echo "compile_time.sh: the compile failed:"
    tail -n 20 "$tmp/log"
    exit 1
  }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }' >> "$tmp/$prefix.wall"
  echo "$ts" | awk '{ printf "%.3f\n", $1 + $2 }' >> "$tmp/$prefix.cpu"
}
# stats FILE: min median max of the numbers in FILE.
stats() {
  sort -g "$1" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                              printf "%6.2f %6.2f %6.2f", v[1], m, v[NR] }'
}

printf '\n%-24s %-5s %22s   %22s\n' "program" "tree" "wall s: min median max" "cpu s: min median max"
for probe in "${probes[@]}"; do
  name=$(basename "$probe" .cpp)
  sides=(new)
  [ -n "$BASE" ] && sides=(base new)
  for side in "${sides[@]}"; do rm -f "$tmp/$side".*; done
  for run in $(seq 0 "$RUNS"); do  # run 0 is the warm-up (page cache, nvcc's first start)
    for side in "${sides[@]}"; do
      if [ "$side" = base ]; then c=("${base_cmd[@]}"); else c=("${new_cmd[@]}"); fi
      extra=()
      if [ $PHASES = 1 ] && [ $nvcc = 1 ] && [ "$run" = "$RUNS" ]; then extra=(--time "$tmp/$side.phases.csv"); fi
      if [ "$run" = 0 ]; then
        "${c[@]}" "${extra[@]}" -c "$probe" -o "$tmp/probe.o" > "$tmp/log" 2>&1 ||
          { echo "compile_time.sh: compiling $probe ($side) failed:"; tail -n 20 "$tmp/log"; exit 1; }
      else
        time_one "$side" "${c[@]}" "${extra[@]}" -c "$probe" -o "$tmp/probe.o"
      fi
    done
  done
  for side in "${sides[@]}"; do
    printf '%-24s %-5s %22s   %22s\n' "$name" "$([ "$side" = base ] && echo base || echo this)" \
      "$(stats "$tmp/$side.wall")" "$(stats "$tmp/$side.cpu")"
    if [ -f "$tmp/$side.phases.csv" ]; then
      # nvcc --time rows: file, phase, inputs, output, arch, tool, milliseconds, unit.
      awk -F' , ' 'NR > 1 && $2 != "" && $7 + 0 > 0 {
                     p = $2; sub(/ \(preprocessing.*/, " (preprocessing)", p); s[p] += $7 }
                   END { printf "  phases (last run):"; for (p in s) printf "  %s %.2f s", p, s[p] / 1000; print "" }' \
        "$tmp/$side.phases.csv"
    fi
  done
done
echo
echo "load after: $(uptime | sed 's/.*load average: //')"
[ $nvcc = 1 ] && echo "targets (DESIGN.md, nvcc on a 2-core machine): include_only <= 3 s, fused_reductions <= 15 s"
exit 0
