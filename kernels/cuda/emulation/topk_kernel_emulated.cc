// The CUDA kernel's source compiled as C++ for the CPU emulator (cuda_runtime.h beside this file).
#include "kernels/cuda/topk_kernel.cu"
