# The CUDA memory lookup (included by CMakeLists.txt beside this file): its kernels and host entry
# joined to pk_kernels_cuda, the lookup benchmark, and the golden lookup checker on the CPU
# emulator of the CUDA runtime (emulation/), so that machines without a GPU run the kernels' own
# source against the golden cases.
target_sources(pk_kernels_cuda PRIVATE lookup_kernel.cu lookup_cuda.cc)

add_executable(pk-bench-lookup-cuda tools/pk_bench_lookup_cuda.cu)
target_link_libraries(pk-bench-lookup-cuda PRIVATE pk_kernels_cuda)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  add_executable(pk-golden-lookup-emu
    emulation/emulator.cc
    emulation/topk_kernel_emulated.cc
    emulation/lookup_kernel_emulated.cc
    topk_cuda.cc
    lookup_cuda.cc
    ../tools/pk_golden_lookup.cc
  )
  target_include_directories(pk-golden-lookup-emu BEFORE PRIVATE
                             ${CMAKE_CURRENT_SOURCE_DIR}/emulation)
  target_link_libraries(pk-golden-lookup-emu PRIVATE pk_kernels pk_cuda_launch_plan)
  target_compile_definitions(pk-golden-lookup-emu PRIVATE PK_HAVE_CUDA=1)
  target_compile_options(pk-golden-lookup-emu PRIVATE -Wno-unknown-pragmas -Wno-array-bounds
                         -Wno-maybe-uninitialized -fno-strict-aliasing)
endif()

# The randomized differential check of the CUDA lookup against the CPU one: on a GPU, and on the
# CPU emulator.
add_executable(pk-lookup-diff tools/pk_lookup_diff.cc)
target_link_libraries(pk-lookup-diff PRIVATE pk_kernels_cuda)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  add_executable(pk-lookup-emu-diff
    emulation/emulator.cc
    emulation/topk_kernel_emulated.cc
    emulation/lookup_kernel_emulated.cc
    topk_cuda.cc
    lookup_cuda.cc
    tools/pk_lookup_diff.cc
  )
  target_include_directories(pk-lookup-emu-diff BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/emulation)
  target_link_libraries(pk-lookup-emu-diff PRIVATE pk_kernels pk_cuda_launch_plan)
  target_compile_options(pk-lookup-emu-diff PRIVATE -Wno-unknown-pragmas -Wno-array-bounds
                         -Wno-maybe-uninitialized -fno-strict-aliasing)
endif()
