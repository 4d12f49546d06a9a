# Settings shared by the whole project and by the stand-alone kernels/ build (GPU hosts that have
# only a compiler, CMake and the CUDA toolkit). Included once, from whichever is the top level.
include_guard(GLOBAL)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type (Release by default)" FORCE)
endif()

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra>)

# The CUDA backend: on when nvcc is found, off otherwise; -DPK_WITH_CUDA=OFF forces it off.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_pk_cuda_default ON)
else()
  set(_pk_cuda_default OFF)
endif()
option(PK_WITH_CUDA "Build the CUDA backend (needs nvcc)" ${_pk_cuda_default})
if(PK_WITH_CUDA AND NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "PK_WITH_CUDA=ON but no CUDA compiler (nvcc) was found")
endif()
if(PK_WITH_CUDA)
  # Hopper (sm_90); must be set before the language is enabled, or nvcc's default (sm_75) wins.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "pkserve: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "pkserve: CUDA backend OFF (no CUDA toolkit found, or PK_WITH_CUDA=OFF): "
                 "the CUDA kernel and executor are not built")
endif()

# Sanitizers for the tests: PK_SANITIZE=address (AddressSanitizer + UBSan) or thread.
set(PK_SANITIZE "" CACHE STRING "Sanitizer build: empty, 'address' (ASan + UBSan) or 'thread'")
if(PK_SANITIZE STREQUAL "address")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
elseif(PK_SANITIZE STREQUAL "thread")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread>)
  add_link_options(-fsanitize=thread)
  # The CPU kernels' run-time SIMD dispatch (target_clones) is made of ifunc resolvers, which the
  # loader runs before TSan's runtime is up: instrumented, they crash every binary at start.
  add_compile_definitions(PK_NO_SIMD_DISPATCH)
elseif(NOT PK_SANITIZE STREQUAL "")
  message(FATAL_ERROR "PK_SANITIZE must be empty, 'address' or 'thread', got '${PK_SANITIZE}'")
endif()
