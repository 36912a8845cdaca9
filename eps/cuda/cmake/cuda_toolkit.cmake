# Locate the CUDA toolkit for the CUDA EP, before project() enables the CUDA language.
#
# Order (first hit wins):
#   1. CMAKE_CUDA_COMPILER (cache) or the CUDACXX environment variable: used as given.
#   2. MOSAICRT_CUDA_ROOT: a toolkit folder holding bin/nvcc.
#   3. The NVIDIA toolkit wheels from PyPI importable by the Python running the build
#      (scikit-build-core passes Python_EXECUTABLE; the wheels are in build-system.requires):
#      CUDA 13 wheels install into site-packages/nvidia/cu13/{bin,include,lib},
#      CUDA 12 wheels into site-packages/nvidia/<part>/{bin,include,lib}.
# A system toolkit (/usr/local/cuda) is deliberately NOT searched implicitly: a build must say
# which toolkit it used, so it is reproducible.
#
# Sets MOSAICRT_NVIDIA_SITE_DIRS: the site-packages/nvidia folders searched for headers and
# libraries after project() (empty when the toolkit did not come from wheels).

set(MOSAICRT_CUDA_ROOT "" CACHE PATH "CUDA toolkit folder (bin/nvcc); default: the nvidia-* wheels of the build's Python")
set(MOSAICRT_NVIDIA_SITE_DIRS "")

function(_mrt_python_for_cuda out)
  foreach(var Python_EXECUTABLE Python3_EXECUTABLE PYTHON_EXECUTABLE)
    if(DEFINED ${var} AND EXISTS "${${var}}")
      set(${out} "${${var}}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  find_program(_mrt_py NAMES python3 python)
  set(${out} "${_mrt_py}" PARENT_SCOPE)
endfunction()

# A compiler this file found earlier is looked up again: isolated wheel builds install the
# toolkit wheels into a new temporary environment each time, so a cached path goes stale.
if(CMAKE_CUDA_COMPILER AND CMAKE_CUDA_COMPILER STREQUAL "${_MRT_CUDA_COMPILER_AUTO}")
  unset(CMAKE_CUDA_COMPILER CACHE)
  unset(CMAKE_CUDA_COMPILER)
endif()
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  if(MOSAICRT_CUDA_ROOT)
    if(NOT EXISTS "${MOSAICRT_CUDA_ROOT}/bin/nvcc")
      message(FATAL_ERROR "MOSAICRT_CUDA_ROOT=${MOSAICRT_CUDA_ROOT} has no bin/nvcc")
    endif()
    set(CMAKE_CUDA_COMPILER "${MOSAICRT_CUDA_ROOT}/bin/nvcc" CACHE FILEPATH "" FORCE)
  else()
    _mrt_python_for_cuda(_mrt_python)
    if(NOT _mrt_python)
      message(FATAL_ERROR "No Python found to locate the nvidia-cuda-nvcc wheel; set MOSAICRT_CUDA_ROOT or CMAKE_CUDA_COMPILER")
    endif()
    # Prints: <nvidia package dirs separated by ';'>|<nvcc path or empty>
    execute_process(
      COMMAND "${_mrt_python}" -c [=[
import os
try:
    import nvidia
    roots = [os.path.realpath(p) for p in nvidia.__path__]
except ImportError:
    roots = []
nvcc = ""
for r in roots:
    for sub in ("cu13", "cu12", "cuda_nvcc"):
        cand = os.path.join(r, sub, "bin", "nvcc")
        if not nvcc and os.path.isfile(cand):
            nvcc = cand
print(";".join(roots) + "|" + nvcc, end="")
]=]
      OUTPUT_VARIABLE _mrt_probe RESULT_VARIABLE _mrt_rc)
    string(FIND "${_mrt_probe}" "|" _bar)
    if(NOT _mrt_rc EQUAL 0 OR _bar LESS 0)
      message(FATAL_ERROR "Probing ${_mrt_python} for the nvidia-* CUDA wheels failed (rc=${_mrt_rc})")
    endif()
    string(SUBSTRING "${_mrt_probe}" 0 ${_bar} _roots)
    math(EXPR _bar "${_bar} + 1")
    string(SUBSTRING "${_mrt_probe}" ${_bar} -1 _nvcc)
    if(NOT _nvcc)
      message(FATAL_ERROR
        "nvcc not found: ${_mrt_python} has no nvidia-cuda-nvcc wheel. Install the toolkit wheels "
        "(pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cublas) or set "
        "MOSAICRT_CUDA_ROOT / CMAKE_CUDA_COMPILER.")
    endif()
    set(CMAKE_CUDA_COMPILER "${_nvcc}" CACHE FILEPATH "" FORCE)
    set(_MRT_CUDA_COMPILER_AUTO "${_nvcc}" CACHE INTERNAL "nvcc found in the nvidia wheels")
    set(MOSAICRT_NVIDIA_SITE_DIRS "${_roots}")
  endif()
endif()
message(STATUS "mosaicrt CUDA EP: nvcc = ${CMAKE_CUDA_COMPILER}$ENV{CUDACXX}")

# The 13.0 nvcc wheel's nvcc.profile points the linker at lib64/, but the wheels install
# into lib/: without help the compiler check of project() cannot link. Add lib/ explicitly.
if(CMAKE_CUDA_COMPILER)
  get_filename_component(_mrt_tk "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  get_filename_component(_mrt_tk "${_mrt_tk}" DIRECTORY)
  if(EXISTS "${_mrt_tk}/lib/libcudart_static.a" AND NOT EXISTS "${_mrt_tk}/lib64")
    set(CMAKE_CUDA_FLAGS_INIT "${CMAKE_CUDA_FLAGS_INIT} -L${_mrt_tk}/lib")
  endif()
endif()

# After project(): find cudart and cuBLAS (versioned shared objects; the wheels ship no
# unversioned libcudart.so / libcublas.so) and their headers. Defines the imported targets
# mrt_cuda::cudart and mrt_cuda::cublas and MOSAICRT_CUDA_RUNPATH (the $ORIGIN-relative run
# path entries that find the libraries in the user's pip-installed nvidia wheels).
function(mrt_find_cuda_libraries)
  string(REGEX MATCH "^[0-9]+" _major "${CMAKE_CUDA_COMPILER_VERSION}")
  get_filename_component(_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  get_filename_component(_tk "${_nvcc_dir}" DIRECTORY)
  set(_inc_hints "${_tk}/include" ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
  set(_lib_hints "${_tk}/lib" "${_tk}/lib64" "${_tk}/targets/x86_64-linux/lib" "${_tk}/targets/sbsa-linux/lib")
  foreach(r IN LISTS MOSAICRT_NVIDIA_SITE_DIRS)
    file(GLOB _parts LIST_DIRECTORIES true "${r}/*")
    foreach(p IN LISTS _parts)
      list(APPEND _inc_hints "${p}/include")
      list(APPEND _lib_hints "${p}/lib")
    endforeach()
  endforeach()
  foreach(v MRT_CUBLAS_INCLUDE_DIR MRT_CUDART_INCLUDE_DIR MRT_CUDART_LIBRARY MRT_CUBLAS_LIBRARY)
    unset(${v} CACHE)  # always from this configure's toolkit (its folder may be a new temp env)
  endforeach()
  find_path(MRT_CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${_inc_hints} NO_DEFAULT_PATH)
  find_path(MRT_CUDART_INCLUDE_DIR cuda_runtime.h HINTS ${_inc_hints} NO_DEFAULT_PATH)
  find_file(MRT_CUDART_LIBRARY NAMES "libcudart.so.${_major}" HINTS ${_lib_hints} NO_DEFAULT_PATH)
  find_file(MRT_CUBLAS_LIBRARY NAMES "libcublas.so.${_major}" HINTS ${_lib_hints} NO_DEFAULT_PATH)
  foreach(v MRT_CUBLAS_INCLUDE_DIR MRT_CUDART_INCLUDE_DIR MRT_CUDART_LIBRARY MRT_CUBLAS_LIBRARY)
    if(NOT ${v})
      message(FATAL_ERROR "CUDA EP: ${v} not found (CUDA ${_major}; searched ${_inc_hints} ${_lib_hints}). "
                          "Install nvidia-cuda-runtime and nvidia-cublas for CUDA ${_major}.")
    endif()
  endforeach()
  add_library(mrt_cuda::cudart SHARED IMPORTED GLOBAL)
  set_target_properties(mrt_cuda::cudart PROPERTIES IMPORTED_LOCATION "${MRT_CUDART_LIBRARY}"
    IMPORTED_NO_SONAME FALSE INTERFACE_INCLUDE_DIRECTORIES "${MRT_CUDART_INCLUDE_DIR}")
  add_library(mrt_cuda::cublas SHARED IMPORTED GLOBAL)
  set_target_properties(mrt_cuda::cublas PROPERTIES IMPORTED_LOCATION "${MRT_CUBLAS_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MRT_CUBLAS_INCLUDE_DIR}")

  # The plugin is installed as site-packages/mosaicrt_ep_cuda/<lib>; the wheels' libraries
  # live under site-packages/nvidia/... . Known layouts first, then whatever this build used
  # when it came from wheels too.
  if(_major GREATER_EQUAL 13)
    set(_rp "$ORIGIN/../nvidia/cu${_major}/lib")
  else()
    set(_rp "$ORIGIN/../nvidia/cuda_runtime/lib" "$ORIGIN/../nvidia/cublas/lib")
  endif()
  foreach(lib "${MRT_CUDART_LIBRARY}" "${MRT_CUBLAS_LIBRARY}")
    get_filename_component(_d "${lib}" DIRECTORY)
    if(_d MATCHES "/nvidia/(.+)$")
      list(APPEND _rp "$ORIGIN/../nvidia/${CMAKE_MATCH_1}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _rp)
  set(MOSAICRT_CUDA_RUNPATH "${_rp}" PARENT_SCOPE)
  set(MOSAICRT_CUDA_MAJOR "${_major}" PARENT_SCOPE)
  message(STATUS "mosaicrt CUDA EP: CUDA ${CMAKE_CUDA_COMPILER_VERSION}; cudart ${MRT_CUDART_LIBRARY}; cuBLAS ${MRT_CUBLAS_LIBRARY}")
endfunction()
