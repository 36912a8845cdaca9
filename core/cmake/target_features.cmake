# Which ISA-specific kernel sources are compiled is decided here, from the *target*
# (CMAKE_SYSTEM_PROCESSOR as set by the toolchain file), never from the build host.
# The decision is written to the build manifest (mosaicrt_build_manifest.json).

# mosaicrt_isa_decision(<out-var>): the one place that maps the target to an ISA family
# (x86_64, arm64, armv7, or the lower-cased processor name). A build may define its own
# before this file runs (CMake file given as CMAKE_PROJECT_INCLUDE): the crosscheck regression
# tests use that hook to inject a decision taken from the build host and prove it is caught.
if(NOT COMMAND mosaicrt_isa_decision)
  function(mosaicrt_isa_decision out)
    string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _proc)
    if(_proc MATCHES "^(x86_64|amd64|x64)$")
      set(_arch "x86_64")
    elseif(_proc MATCHES "^(aarch64|arm64|armv8.*)$")
      set(_arch "arm64")
    elseif(_proc MATCHES "^(arm|armv7.*|armhf)$")
      set(_arch "armv7")
    else()
      set(_arch "${_proc}")
    endif()
    set(${out} "${_arch}" PARENT_SCOPE)
  endfunction()
endif()
mosaicrt_isa_decision(MOSAICRT_TARGET_ARCH)

set(MOSAICRT_X86_SIMD OFF)
set(MOSAICRT_ARM64_KERNELS OFF)
if(MOSAICRT_TARGET_ARCH STREQUAL "x86_64")
  set(MOSAICRT_X86_SIMD ON)
elseif(MOSAICRT_TARGET_ARCH STREQUAL "arm64")
  set(MOSAICRT_ARM64_KERNELS ON)
endif()

function(mrt_add_isa_sources target)
  set(_src "${CMAKE_CURRENT_LIST_DIR}/src")
  if(MOSAICRT_X86_SIMD)
    file(GLOB _avx2 CONFIGURE_DEPENDS "${_src}/*/*_avx2*.cc")
    file(GLOB _avx512 CONFIGURE_DEPENDS "${_src}/*/*_avx512*.cc")
    target_sources(${target} PRIVATE ${_avx2} ${_avx512})
    if(NOT MSVC)
      set_source_files_properties(${_avx2} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
      # GCC 12 warns inside its own headers that the pass-through operand of the masked AVX-512 builtins
      # (behind _mm512_max_ps, the masked loads, the conversions) may be uninitialized: unused by design.
      set_source_files_properties(${_avx512} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mfma;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
    endif()
    target_compile_definitions(${target} PUBLIC MOSAICRT_X86_SIMD=1)
  endif()
  if(MOSAICRT_ARM64_KERNELS)
    file(GLOB _neon CONFIGURE_DEPENDS "${_src}/*/*_neon*.cc")
    file(GLOB _dotprod CONFIGURE_DEPENDS "${_src}/*/*_dotprod*.cc")
    file(GLOB _i8mm CONFIGURE_DEPENDS "${_src}/*/*_i8mm*.cc")
    file(GLOB _sme CONFIGURE_DEPENDS "${_src}/*/*_sme*.cc")  # SME only in inline assembly
    set(_arm64 ${_neon} ${_dotprod} ${_i8mm} ${_sme})
    list(REMOVE_DUPLICATES _arm64)
    target_sources(${target} PRIVATE ${_arm64})
    # The baseline stays armv8-a: only these kernel files may use the optional extensions
    # (the code checks the CPU's HWCAPs before calling into them).
    if(NOT MSVC)
      set_source_files_properties(${_dotprod} PROPERTIES COMPILE_OPTIONS "-march=armv8.2-a+dotprod")
      set_source_files_properties(${_i8mm} PROPERTIES COMPILE_OPTIONS "-march=armv8.2-a+i8mm")
    endif()
    target_compile_definitions(${target} PUBLIC MOSAICRT_ARM64_KERNELS=1)
  endif()
  set(MOSAICRT_TARGET_ARCH "${MOSAICRT_TARGET_ARCH}" PARENT_SCOPE)
  file(WRITE "${CMAKE_BINARY_DIR}/mosaicrt_build_manifest.json"
"{\"target_arch\": \"${MOSAICRT_TARGET_ARCH}\", \"system_processor\": \"${CMAKE_SYSTEM_PROCESSOR}\", \"host_processor\": \"${CMAKE_HOST_SYSTEM_PROCESSOR}\", \"x86_simd\": \"${MOSAICRT_X86_SIMD}\", \"arm64_kernels\": \"${MOSAICRT_ARM64_KERNELS}\", \"version\": \"${MOSAICRT_VERSION}\"}\n")
endfunction()
