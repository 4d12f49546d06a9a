// The fiber scheduler and host runtime behind cuda_runtime.h (see there). x86-64 only: a fiber
// switch saves the callee-saved registers on the fiber's own stack and swaps stack pointers.
#include "kernels/cuda/emulation/cuda_runtime.h"

namespace pk::emu {

uint3 thread_index;
uint3 block_index;
dim3 block_dim;
dim3 grid_dim;

namespace {

extern "C" void pk_emu_switch(void** save_sp, void* load_sp);
asm(R"(
.text
.globl pk_emu_switch
.type pk_emu_switch, @function
pk_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size pk_emu_switch, .-pk_emu_switch
)");

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kSharedBytes = 228 * 1024;
constexpr long kSpinLimit = 50'000'000;  // yields without progress before a deadlock is declared

struct Fiber {
  void* sp = nullptr;
  std::unique_ptr<char[]> stack;
  uint3 index;
  bool done = false;
};

struct Barrier {
  int arrived = 0;
  unsigned generation = 0;
};

struct Scheduler {
  std::vector<Fiber> fibers;
  int current = -1;
  int live = 0;
  void* main_sp = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<Barrier> warp_barriers;
  Barrier block_barrier;
  std::vector<std::array<uint64_t, 32>> warp_slots;
  alignas(16) uint8_t shared[kSharedBytes];
  uint64_t pattern = 1;
};

Scheduler& S() {
  static Scheduler* scheduler = new Scheduler;
  return *scheduler;
}

void SwitchTo(int next) {
  Scheduler& s = S();
  Fiber& from = s.fibers[s.current];
  s.current = next;
  thread_index = s.fibers[next].index;
  pk_emu_switch(&from.sp, s.fibers[next].sp);
}

// Runs the next live fiber after the current one (the current one may be done).
void Yield() {
  Scheduler& s = S();
  const int n = static_cast<int>(s.fibers.size());
  for (int step = 1; step <= n; ++step) {
    const int next = (s.current + step) % n;
    if (!s.fibers[next].done) {
      if (next == s.current) return;
      SwitchTo(next);
      return;
    }
  }
  // Every fiber is done: back to the launcher.
  Fiber& from = s.fibers[s.current];
  pk_emu_switch(&from.sp, s.main_sp);
}

extern "C" void pk_emu_fiber_entry() {
  Scheduler& s = S();
  (*s.body)();
  s.fibers[s.current].done = true;
  --s.live;
  Yield();
  std::abort();  // a finished fiber is never resumed
}

void Wait(Barrier& barrier, int participants) {
  const unsigned generation = barrier.generation;
  if (++barrier.arrived == participants) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  long spins = 0;
  while (barrier.generation == generation) {
    Yield();
    if (++spins > kSpinLimit) {
      std::fprintf(stderr, "pk-emu: deadlock at a barrier (thread %u of block %u)\n",
                   thread_index.x, block_index.x);
      std::abort();
    }
  }
}

}  // namespace

const uint64_t* WarpExchange(uint64_t mine) {
  Scheduler& s = S();
  const int warp = static_cast<int>(thread_index.x >> 5);
  s.warp_slots[warp][thread_index.x & 31u] = mine;
  Wait(s.warp_barriers[warp], 32);
  return s.warp_slots[warp].data();
}

void WarpBarrier() {
  Scheduler& s = S();
  Wait(s.warp_barriers[thread_index.x >> 5], 32);
}

void BlockBarrier() {
  Scheduler& s = S();
  Wait(s.block_barrier, static_cast<int>(s.fibers.size()));
}

uint8_t* DynamicShared() { return S().shared; }

void RunGrid(dim3 grid, dim3 block, size_t shared_bytes, const std::function<void()>& body) {
  Scheduler& s = S();
  const int threads = static_cast<int>(block.x);
  if (static_cast<int>(s.fibers.size()) != threads) {
    s.fibers.clear();
    s.fibers.resize(threads);
    for (Fiber& f : s.fibers) f.stack.reset(new char[kStackBytes]);
  }
  s.warp_barriers.assign(threads / 32, Barrier{});
  s.warp_slots.assign(threads / 32, {});
  s.body = &body;
  grid_dim = grid;
  block_dim = block;
  for (unsigned b = 0; b < grid.x; ++b) {
    // Garbage in shared memory: reading what the block never wrote must not look like zeros.
    for (size_t i = 0; i < shared_bytes; i += 8) {
      s.pattern = s.pattern * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t word = s.pattern;
      std::memcpy(s.shared + i, &word, std::min<size_t>(8, shared_bytes - i));
    }
    block_index = uint3{b, 0, 0};
    s.block_barrier = Barrier{};
    for (int t = 0; t < threads; ++t) {
      Fiber& f = s.fibers[t];
      f.done = false;
      f.index = uint3{static_cast<unsigned>(t), 0, 0};
      char* top = f.stack.get() + kStackBytes;
      top = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t{15});
      void** sp = reinterpret_cast<void**>(top);
      *--sp = nullptr;  // return address of the entry function (never used)
      *--sp = reinterpret_cast<void*>(&pk_emu_fiber_entry);
      for (int r = 0; r < 6; ++r) *--sp = nullptr;
      f.sp = sp;
    }
    s.live = threads;
    s.current = 0;
    thread_index = s.fibers[0].index;
    pk_emu_switch(&s.main_sp, s.fibers[0].sp);
    if (s.live != 0) std::abort();
  }
}

cudaError_t& LastError() {
  static cudaError_t error = cudaSuccess;
  return error;
}

}  // namespace pk::emu

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "emulated H200");
  p->multiProcessorCount = 132;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->regsPerMultiprocessor = 65536;
  p->l2CacheSize = 60 << 20;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaMallocHost(void** pointer, size_t bytes) { return cudaMalloc(pointer, bytes); }
cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* pointer) { return cudaFree(pointer); }
cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind) {
  std::memcpy(to, from, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(to, from, bytes, kind);
}
cudaError_t cudaMemset(void* to, int value, size_t bytes) {
  std::memset(to, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaGetLastError() {
  const cudaError_t error = pk::emu::LastError();
  pk::emu::LastError() = cudaSuccess;
  return error;
}
cudaError_t cudaPeekAtLastError() { return pk::emu::LastError(); }
