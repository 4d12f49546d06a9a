// The CUDA lookup kernels' source compiled as C++ for the CPU emulator (cuda_runtime.h beside
// this file).
#include "kernels/cuda/lookup_kernel.cu"
