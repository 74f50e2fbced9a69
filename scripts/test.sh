#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the tests and runs them with ctest: each test file runs as <name>.host (host devices)
# and, in a CUDA build, <name>.cuda (GPUs; the bodies skip visibly without one).
# Usage: bash scripts/test.sh [ctest arguments, e.g. -L host or -R runtime]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_tools
configure
build tessera_tests
say "running ctest with $JOBS jobs"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
