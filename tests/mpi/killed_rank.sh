#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 20, item 3: runs tests/mpi/killed_rank.cpp under mpirun (rank 1 SIGKILLs itself during
# <op>) and checks that every other rank printed a distributed_error within TESSERA_MPI_TIMEOUT + 5 s
# of the kill and exited non-zero without a crash signal, that the victim died of SIGKILL, and
# that the whole job ended (no hang). Prints the job's output and one PASS/FAIL line per check.
#
# Usage: killed_rank.sh <mpiexec> <test_mpi_killed_rank> allreduce|halo|read|reshard [ranks (default 4)]
#   TESSERA_MPI_TIMEOUT   the deadline under test (default 5 here)
#
# Each rank runs inside `bash -c`, which prints the rank's own exit status (a signal shows as
# 128 + its number) and exits 0 itself. The launcher must let the job go on after a rank dies
# (by default it kills every rank at once, and nothing would be left to test): Open MPI 4
# --mca orte_enable_recovery 1, Open MPI 5 --enable-recovery, MPICH -disable-auto-cleanup.
set -uo pipefail
mpiexec=$1
program=$2
op=$3
ranks=${4:-4}
export TESSERA_MPI_TIMEOUT=${TESSERA_MPI_TIMEOUT:-5}
victim=1

version=$("$mpiexec" --version 2>&1 | head -n 3)
case "$version" in
  *"Open MPI"*" 4."* | *"Open MPI"*" 3."*) keep_going=(--oversubscribe --mca orte_enable_recovery 1) ;;
  *"Open MPI"* | *"OpenRTE"* | *prte*) keep_going=(--oversubscribe --enable-recovery) ;;
  *HYDRA* | *MPICH*) keep_going=(-disable-auto-cleanup) ;;
  *) keep_going=() ;;
esac

dir=$(mktemp -d /tmp/tessera-killed-rank.XXXXXX)
trap 'rm -rf "$dir"' EXIT
log=$dir/log
limit=$(awk -v t="$TESSERA_MPI_TIMEOUT" 'BEGIN { print t + 5 }')
start=$(date +%s.%N)
# The job must end by itself well within this: a timeout here is the hang the issue forbids.
timeout -k 5 $((${TESSERA_MPI_TIMEOUT%.*} + 60)) "$mpiexec" -np "$ranks" "${keep_going[@]}" \
  bash -c '"$0" "$1" "$2"; s=$?; echo "rank ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-?}} exit status $s"; exit 0' \
  "$program" "$op" "$dir" >"$log" 2>&1
launcher=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat "$log"
echo "---- killed_rank.sh: $op, $ranks ranks, TESSERA_MPI_TIMEOUT=$TESSERA_MPI_TIMEOUT, job ended after $elapsed s"

fail=0
check() {  # check <ok: 0/1> <text>
  if [ "$1" = 1 ]; then echo "PASS: $2"; else echo "FAIL: $2"; fail=1; fi
}
check "$([ "$launcher" != 124 ] && [ "$launcher" != 137 ] && echo 1 || echo 0)" \
  "the job ended by itself (launcher status $launcher)"
check "$(grep -q "^rank $victim exit status 137$" "$log" && echo 1 || echo 0)" "rank $victim died of SIGKILL"
check "$(grep -Eqi 'segmentation fault|signal 11|core dumped|SIGSEGV' "$log" && echo 0 || echo 1)" \
  "no segmentation fault anywhere"
for ((r = 0; r < ranks; ++r)); do
  [ "$r" = "$victim" ] && continue
  line=$(grep -m1 "^rank $r: distributed_error " "$log")
  after=$(sed -n 's/^rank [0-9]*: distributed_error \([-0-9.]*\) s after.*/\1/p' <<<"$line")
  ok=0
  if [ -n "$after" ] && awk -v a="$after" -v l="$limit" 'BEGIN { exit !(a >= 0 && a <= l) }'; then ok=1; fi
  check "$ok" "rank $r: distributed_error ${after:-(none)} s after the kill (limit $limit s)"
  status=$(sed -n "s/^rank $r exit status \([0-9]*\)$/\1/p" "$log" | head -n 1)
  ok=0
  case "$status" in
    0 | 132 | 134 | 135 | 136 | 139) ;;  # success, or a crash (SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGSEGV)
    "")
      # The first survivor's finalize() ends the job (MPI_Abort) once every survivor has reported;
      # the launcher may then take a rank down, its bash -c too, before it prints its status: it
      # ended by the job's abort (non-zero). A crash would have been reported by the launcher,
      # which the "no segmentation fault" check above reads.
      if grep -q "MPI_ABORT was invoked" "$log"; then ok=1; status="ended by the job's MPI_Abort"; fi ;;
    *) ok=1 ;;
  esac
  check "$ok" "rank $r exited non-zero without a crash (status ${status:-unknown})"
done
exit $fail
