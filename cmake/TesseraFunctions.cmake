# SPDX-License-Identifier: Apache-2.0
# Tessera's CMake commands, for this repository and for projects using it: included by the top
# CMakeLists.txt (also when a parent project embeds Tessera with add_subdirectory) and by the
# installed TesseraConfig.cmake (find_package(Tessera)).
#
#   tessera_add_program(target source...)
#       An executable using Tessera. Its .cpp/.cc/.cxx/.cu sources are compiled as Tessera was
#       built: by nvcc (LANGUAGE CUDA, they hold kernels through the DSL) when Tessera has CUDA,
#       by the C++ compiler otherwise (.cu files included). Enables CUDA in the calling directory
#       first (tessera_enable_cuda), so a `project(x LANGUAGES CXX)` parent needs nothing else.
#   tessera_enable_cuda()
#       When Tessera was built with CUDA: enables the CUDA language in the calling directory if it
#       is not enabled there yet (CMAKE_CUDA_ARCHITECTURES: `native` with a GPU visible, else 90,
#       when undefined), gives nvcc its C++20 flag on CMake < 3.26 and makes programs link the
#       shared cudart (CMAKE_CUDA_RUNTIME_LIBRARY, when undefined). A no-op in host-only builds.
#       For targets that link tessera::tessera themselves and have .cu sources.
#
# Both are macros: enable_language() sets its variables in the scope it runs in, so they must run
# in the file scope of the directory that holds the targets (not inside a function). A function
# that calls tessera_add_program needs a tessera_enable_cuda() at file scope before it.
include_guard(GLOBAL)

# The architectures the top CMakeLists.txt uses when CMAKE_CUDA_ARCHITECTURES is undefined:
# `native` fails without a GPU, so machines without one (dev, CI) build for Hopper.
function(_tessera_default_cuda_architectures out)
  get_property(_archs GLOBAL PROPERTY _TESSERA_DEFAULT_CUDA_ARCHITECTURES)
  if(NOT _archs)
    execute_process(COMMAND nvidia-smi -L OUTPUT_VARIABLE _gpus ERROR_QUIET RESULT_VARIABLE _smi)
    if(_smi EQUAL 0 AND _gpus MATCHES "GPU [0-9]")
      set(_archs native)
    else()
      set(_archs 90)
    endif()
    set_property(GLOBAL PROPERTY _TESSERA_DEFAULT_CUDA_ARCHITECTURES ${_archs})
  endif()
  set(${out} ${_archs} PARENT_SCOPE)
endfunction()

# Enables CUDA in the calling directory when a CUDA compiler is found; sets _tessera_cuda_enabled.
macro(_tessera_enable_cuda_language)
  if(NOT CMAKE_CUDA_COMPILER_LOADED)  # set by enable_language(CUDA) in this directory or a parent
    if(NOT CMAKE_CUDA_COMPILER)
      # check_language() configures a child project that sees only the environment, so the nvcc
      # found here (also in system folders not on PATH), else the one Tessera was built with, else
      # the usual install location, is handed to it through CUDACXX.
      find_program(_tessera_nvcc nvcc)
      if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
        get_property(_tessera_nvcc_hints GLOBAL PROPERTY TESSERA_CUDA_COMPILER)
        list(PREPEND _tessera_nvcc_hints ${_tessera_nvcc})
        list(APPEND _tessera_nvcc_hints /usr/local/cuda/bin/nvcc)
        foreach(_tessera_nvcc_hint IN LISTS _tessera_nvcc_hints)
          if(EXISTS "${_tessera_nvcc_hint}")
            set(ENV{CUDACXX} "${_tessera_nvcc_hint}")
            break()
          endif()
        endforeach()
      endif()
      include(CheckLanguage)
      check_language(CUDA)
    endif()
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        _tessera_default_cuda_architectures(CMAKE_CUDA_ARCHITECTURES)
      endif()
      enable_language(CUDA)
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER_LOADED)
    # CMake < 3.26 knows no C++20 flag for nvcc, and a target requiring cxx_std_20 (as
    # tessera::tessera does) also asks for that dialect when compiled as CUDA.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    # Programs link the shared cudart like tessera_runtime does: two copies of the runtime in one
    # process would keep two "current device" states.
    if(NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
      set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    endif()
    set(_tessera_cuda_enabled TRUE)
  else()
    set(_tessera_cuda_enabled FALSE)
  endif()
endmacro()

macro(tessera_enable_cuda)
  get_property(_tessera_has_cuda GLOBAL PROPERTY TESSERA_HAS_CUDA)
  if(_tessera_has_cuda)
    if(NOT CMAKE_CUDA_COMPILER_LOADED AND CMAKE_CURRENT_FUNCTION)
      message(FATAL_ERROR "Tessera: CUDA is not enabled in ${CMAKE_CURRENT_SOURCE_DIR}, and enabling it inside "
                          "the function ${CMAKE_CURRENT_FUNCTION}() would not outlive it: call tessera_enable_cuda() "
                          "at file scope in that directory before calling ${CMAKE_CURRENT_FUNCTION}()")
    endif()
    _tessera_enable_cuda_language()
    if(NOT _tessera_cuda_enabled)
      message(FATAL_ERROR "Tessera was built with CUDA, but no CUDA compiler was found for "
                          "${CMAKE_CURRENT_SOURCE_DIR}: put nvcc on PATH, or set CUDACXX or CMAKE_CUDA_COMPILER")
    endif()
  endif()
endmacro()

macro(tessera_add_program _tessera_target)
  tessera_enable_cuda()
  _tessera_add_program(${_tessera_target} ${ARGN})
endmacro()

function(_tessera_add_program target)
  add_executable(${target} ${ARGN})
  set(_sources)
  set(_cu_sources)
  foreach(_src IN LISTS ARGN)
    if(_src MATCHES "\\.(cpp|cc|cxx|c\\+\\+|cu)$")
      list(APPEND _sources "${_src}")
    endif()
    if(_src MATCHES "\\.cu$")
      list(APPEND _cu_sources "${_src}")
    endif()
  endforeach()
  get_property(_has_cuda GLOBAL PROPERTY TESSERA_HAS_CUDA)
  if(_has_cuda)
    if(_sources)
      set_source_files_properties(${_sources} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CUDA)
    endif()
    # Also for programs of a parent project, whose CMAKE_CUDA_RUNTIME_LIBRARY is its own.
    set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  elseif(_cu_sources)
    # A host-only Tessera: the DSL needs no nvcc, and the project need not have CUDA at all.
    set_source_files_properties(${_cu_sources} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX)
  endif()
  target_link_libraries(${target} PRIVATE tessera::tessera)
endfunction()
