# SPDX-License-Identifier: Apache-2.0
# Runs the C++ compiler on one compile-fail source (syntax only) and checks the outcome against
# the directives in the file's comments:
#   // expect: TEXT            compilation must fail and the diagnostics must contain TEXT
#                              (several lines: all must be present)
#   // expect-not: TEXT        the diagnostics must not contain TEXT
#   // expect-max-lines: N     the diagnostics must be at most N lines long (a short error)
#   // expect-success          compilation must succeed (a positive control)
#   // with-cccl               compiled with -isystem CCCL (given as -DCCCL=<include dir>, which holds
#                              cuda/std/complex), as under nvcc
# Usage: cmake -DCOMPILER=<c++> -DREPO=<repository root> -DSOURCE=<file.cpp> [-DCCCL=<dir>] -P check_compile.cmake
cmake_minimum_required(VERSION 3.20)

foreach(_var COMPILER REPO SOURCE)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "check_compile.cmake: -D${_var}=... is required")
  endif()
endforeach()

file(STRINGS "${SOURCE}" _expect REGEX "^// expect: ")
file(STRINGS "${SOURCE}" _expect_not REGEX "^// expect-not: ")
file(STRINGS "${SOURCE}" _max_lines REGEX "^// expect-max-lines: [0-9]+")
file(STRINGS "${SOURCE}" _success REGEX "^// expect-success")
if(_success AND _expect)
  message(FATAL_ERROR "${SOURCE}: both '// expect-success' and '// expect:' given")
endif()
if(NOT _success AND NOT _expect)
  message(FATAL_ERROR "${SOURCE}: no '// expect: MESSAGE' (or '// expect-success') line")
endif()

set(_cccl_flags "")
file(STRINGS "${SOURCE}" _with_cccl REGEX "^// with-cccl")
if(_with_cccl)
  if(NOT DEFINED CCCL)
    message(FATAL_ERROR "${SOURCE} is marked '// with-cccl': -DCCCL=<CCCL include directory> is required")
  endif()
  set(_cccl_flags "-isystem" "${CCCL}")
endif()

# LC_ALL=C: plain ASCII quotes in GCC's diagnostics, whatever the caller's locale.
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env LC_ALL=C LANG=C
          "${COMPILER}" -std=c++20 -fsyntax-only -DTESSERA_HAS_CUDA=0 "-I${REPO}/base" "-I${REPO}/dsl" "-I${REPO}" ${_cccl_flags} "${SOURCE}"
  RESULT_VARIABLE _rc
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _out)
string(REGEX MATCHALL "\n" _newlines "${_out}")
list(LENGTH _newlines _nlines)

if(_success)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} must compile, but the compiler failed (exit ${_rc}):\n${_out}")
  endif()
  message(STATUS "compiled as expected: ${SOURCE}")
  return()
endif()

if(_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} must NOT compile, but it compiled.")
endif()
set(_failures "")
foreach(_line IN LISTS _expect)
  string(REGEX REPLACE "^// expect: " "" _text "${_line}")
  string(STRIP "${_text}" _text)
  string(FIND "${_out}" "${_text}" _pos)
  if(_pos EQUAL -1)
    string(APPEND _failures "  the diagnostics do not contain \"${_text}\"\n")
  endif()
endforeach()
foreach(_line IN LISTS _expect_not)
  string(REGEX REPLACE "^// expect-not: " "" _text "${_line}")
  string(STRIP "${_text}" _text)
  string(FIND "${_out}" "${_text}" _pos)
  if(NOT _pos EQUAL -1)
    string(APPEND _failures "  the diagnostics contain \"${_text}\", which they must not\n")
  endif()
endforeach()
foreach(_line IN LISTS _max_lines)
  string(REGEX REPLACE "^// expect-max-lines: ([0-9]+).*" "\\1" _max "${_line}")
  if(_nlines GREATER _max)
    string(APPEND _failures "  the diagnostics are ${_nlines} lines long, more than ${_max}\n")
  endif()
endforeach()
if(_failures)
  message(FATAL_ERROR "${SOURCE} failed to compile, but not as expected:\n${_failures}"
                      "Compiler output (exit ${_rc}):\n${_out}")
endif()
message(STATUS "failed to compile as expected (${_nlines} lines of diagnostics): ${SOURCE}")
