# SPDX-License-Identifier: Apache-2.0
# Sourced by demo.sh and test.sh: checks and installs what the build needs, then configures.
# Environment: BUILD_DIR (default build/), CMAKE_ARGS (extra cmake arguments).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

say() { echo "[tessera] $*"; }

# Runs a command as root: directly when root, through passwordless sudo otherwise.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

# optional_packages LABEL CHECK WITHOUT PACKAGES...: installs PACKAGES through apt-get when the
# function CHECK fails; WITHOUT says what the build lacks when that is not possible.
optional_packages() {
  local label=$1 check=$2 without=$3
  shift 3
  if "$check"; then
    say "$label: found"
  elif command -v apt-get >/dev/null 2>&1 && as_root true; then
    say "$label: missing, installing it: apt-get install -y $*"
    if { [ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -v lock)" ] || as_root apt-get update -qq; } &&
       as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; then
      say "$label: installed"
    else
      say "$label: apt-get failed (offline?); $without"
    fi
  else
    say "$label: missing (install $*); $without"
  fi
}

ensure_tools() {
  if ! command -v cmake >/dev/null 2>&1; then
    say "error: cmake is not installed; install cmake >= 3.24 (apt-get install cmake, or pip install cmake)"
    exit 1
  fi
  say "using $(cmake --version | head -n1)"
  if [ -f /usr/include/doctest/doctest.h ] || [ -f /usr/local/include/doctest/doctest.h ]; then
    say "doctest: found"
  elif command -v apt-get >/dev/null 2>&1 && as_root true; then
    say "doctest: missing, installing it: apt-get update && apt-get install -y doctest-dev"
    if as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq doctest-dev; then
      say "doctest: installed"
    else
      say "doctest: apt-get failed (offline?); CMake will say what is missing"
    fi
  else
    say "doctest: missing and apt-get is not usable here (needs root or passwordless sudo);"
    say "  install doctest and pass its location, e.g. CMAKE_ARGS=-Ddoctest_DIR=/path/lib/cmake/doctest"
  fi
  # Optional: without them the build still works, with less in it.
  have_openblas() { compgen -G "/usr/lib/*/libopenblas.so" >/dev/null || compgen -G "/usr/lib/libopenblas.so" >/dev/null; }
  have_mpi() {
    command -v mpirun >/dev/null 2>&1 && { compgen -G "/usr/lib/*/openmpi/include/mpi.h" >/dev/null ||
                                           [ -f /usr/include/mpi.h ] || command -v mpicxx >/dev/null 2>&1; }
  }
  have_lapacke() { [ -f /usr/include/lapacke.h ] && { compgen -G "/usr/lib/*/liblapacke.so" >/dev/null || [ -f /usr/lib/liblapacke.so ]; }; }
  have_dlpack() { [ -f /usr/include/dlpack/dlpack.h ] || [ -f /usr/local/include/dlpack/dlpack.h ]; }
  have_png() { [ -f /usr/include/png.h ] || [ -f /usr/local/include/png.h ]; }
  optional_packages OpenBLAS have_openblas "host matrix products use another CBLAS or plain loops" libopenblas-dev
  optional_packages LAPACKE have_lapacke "dense solvers (solve, qr, svd, eigh...) run on GPUs only" liblapacke-dev
  optional_packages MPI have_mpi "Tessera builds for one process (docs/distributed.md)" libopenmpi-dev openmpi-bin
  optional_packages DLPack have_dlpack "to_dlpack/from_dlpack are left out" libdlpack-dev
  optional_packages libpng have_png "save_png throws, naming the package" libpng-dev
  have_fftw() { [ -f /usr/include/fftw3.h ] && compgen -G "/usr/lib/*/libfftw3f.so" >/dev/null; }
  optional_packages FFTW3 have_fftw "host-device FFTs use built-in radix-2 / O(n^2) transforms" libfftw3-dev
  if command -v ninja >/dev/null 2>&1; then say "generator: Ninja"; else say "generator: Unix Makefiles (ninja not found)"; fi
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    say "GPUs: $(nvidia-smi -L | grep -c '^GPU ') visible; programs run on them"
  else
    say "GPUs: none visible; programs run on host devices (TESSERA_HOST_DEVICES=${TESSERA_HOST_DEVICES:-1})"
  fi
}

configure() {
  local gen=()
  # A build directory keeps the generator it was created with.
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  say "configuring $BUILD_DIR (Release unless CMAKE_ARGS says otherwise) ${CMAKE_ARGS:-}"
  # shellcheck disable=SC2086 # CMAKE_ARGS is a list of arguments
  cmake -S "$ROOT" -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
}

build() {
  say "building $* with $JOBS jobs"
  cmake --build "$BUILD_DIR" --target "$@" -j "$JOBS"
}
