#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds every example and runs each one, on the visible GPUs or else on host devices.
# Usage: bash scripts/demo.sh   (BUILD_DIR, CMAKE_ARGS, TESSERA_* variables are honoured)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_tools
configure
build tessera_examples

shopt -s nullglob
examples=("$ROOT"/examples/*.cpp)
if [ ${#examples[@]} -eq 0 ]; then
  say "no examples yet (examples/ holds no .cpp file)"
  exit 0
fi
failed=()
for src in "${examples[@]}"; do
  name=$(basename "$src" .cpp)
  say "running $name"
  if ! "$BUILD_DIR/$name"; then failed+=("$name"); fi
  echo
done
if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "all ${#examples[@]} examples ran"
