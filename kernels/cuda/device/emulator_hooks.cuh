// The kernel's hooks into the CPU emulator (emulation/cuda_runtime.h): under PK_CUDA_EMULATION
// they declare which shared memory a warp alone may write and which is read-only once built, and
// poison a warp's scratch before each row, so that the emulated tests catch a breach of those
// rules or a read of a previous row's data. On the GPU every hook compiles to nothing.
#pragma once

#include <cstdint>

#include "kernels/cuda/kernel_params.h"
#include "kernels/cuda/warp_ops.cuh"

namespace pk::cuda {
namespace {

// Emulation builds: the pair table is read-only once its warp has built it (see
// EmulatorDeclareRules). No code on the GPU.
__device__ __forceinline__ void EmulatorDeclareTable(const KernelParams& p, const uint8_t* table) {
#if defined(PK_CUDA_EMULATION)
  __syncwarp();
  if (LaneId() == 0) pk::emu::DeclareReadOnly(table, p.table_bytes);
#else
  (void)p, (void)table;
#endif
}

// Emulation builds (emulation/cuda_runtime.h) check memory rules that the GPU does not: a warp's
// scratch (its slice, less the factor lists in block-per-row mode, where every warp of the block
// writes warp 0's) is written by that warp alone, the pair table by no one once built
// (EmulatorDeclareTable), and each row starts from poisoned scratch, so that nothing left by the
// previous row can be read back. The latency kernel's spare warp has no slice. No code on the GPU.
__device__ __forceinline__ void EmulatorDeclareRules(const KernelParams& p, const uint8_t* slice,
                                                     bool block_per_row) {
#if defined(PK_CUDA_EMULATION)
  if (block_per_row && static_cast<int>(threadIdx.x >> 5) >= p.factors) return;
  const uint32_t first = block_per_row ? p.running_offset : 0u;
  pk::emu::DeclarePrivate(slice + first, p.warp_bytes - first);
#else
  (void)p, (void)slice, (void)block_per_row;
#endif
}
__device__ __forceinline__ void EmulatorPoisonScratch(const KernelParams& p, uint8_t* slice,
                                                      bool block_per_row) {
#if defined(PK_CUDA_EMULATION)
  if (block_per_row && static_cast<int>(threadIdx.x >> 5) >= p.factors) return;
  __syncwarp();
  const uint32_t first = block_per_row ? p.running_offset : 0u;
  if (LaneId() == 0) pk::emu::Poison(slice + first, p.warp_bytes - first);
  __syncwarp();
#else
  (void)p, (void)slice, (void)block_per_row;
#endif
}

// Emulation builds: stage f's survivors, tallied where PK_EMU_STAGE_STATS asks for it
// (pk::emu::CountSurvivors; lean: LeanStage's, else CutStage's). No code on the GPU.
__device__ __forceinline__ void EmulatorCountSurvivors(const KernelParams& p, int f, int survivors,
                                                       bool lean) {
#if defined(PK_CUDA_EMULATION)
  if (LaneId() == 0) pk::emu::CountSurvivors(p.factors, f, p.kept[f], survivors, lean);
#else
  (void)p, (void)f, (void)survivors, (void)lean;
#endif
}

}  // namespace
}  // namespace pk::cuda
