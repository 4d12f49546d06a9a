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

// Shared bytes [offset, offset + bytes) with a copy of what they held when last checked in.
struct Region {
  size_t offset = 0;
  size_t bytes = 0;
  std::vector<uint8_t> snapshot;
  bool snapshot_valid = false;
};

constexpr size_t kGuardBytes = 4096;  // checked past the launch's shared memory
constexpr uint8_t kGuardByte = 0xa7;

struct Scheduler {
  std::vector<Fiber> fibers;
  int current = -1;
  int live = 0;
  void* main_sp = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<Barrier> warp_barriers;
  Barrier block_barrier;
  std::vector<std::array<uint64_t, 32>> warp_slots;
  std::vector<Region> private_regions;  // by warp; bytes == 0: none declared
  std::vector<Region> read_only;
  size_t shared_bytes = 0;
  bool random_order = false;
  uint64_t random_state = 0;
  alignas(16) uint8_t shared[kSharedBytes];
  uint64_t pattern = 1;
};

Scheduler& S() {
  static Scheduler* scheduler = new Scheduler;
  return *scheduler;
}

uint64_t NextGarbage(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state;
}

// The first and one past the last byte where `region`'s memory differs from its snapshot.
std::pair<size_t, size_t> ChangedBytes(const Scheduler& s, const Region& region) {
  const uint8_t* now = s.shared + region.offset;
  size_t first = 0;
  while (first < region.bytes && now[first] == region.snapshot[first]) ++first;
  size_t end = region.bytes;
  while (end > first && now[end - 1] == region.snapshot[end - 1]) --end;
  return {first, end};
}

// Warp `warp` is switched back in: its private bytes must be as it left them.
void CheckIn(Scheduler& s, int warp) {
  const Region& region = s.private_regions[warp];
  if (region.bytes == 0 || !region.snapshot_valid) return;
  if (std::memcmp(s.shared + region.offset, region.snapshot.data(), region.bytes) == 0) return;
  const auto [first, end] = ChangedBytes(s, region);
  std::fprintf(stderr,
               "pk-emu: block %u: another warp wrote bytes [%zu, %zu) of warp %d's private shared "
               "memory (block offsets; the region is [%zu, %zu))\n",
               block_index.x, region.offset + first, region.offset + end, warp, region.offset,
               region.offset + region.bytes);
  std::abort();
}

// Warp `warp` is switched out: remember its private bytes.
void CheckOut(Scheduler& s, int warp) {
  Region& region = s.private_regions[warp];
  if (region.bytes == 0) return;
  std::memcpy(region.snapshot.data(), s.shared + region.offset, region.bytes);
  region.snapshot_valid = true;
}

// At the block's end: nothing written past the launch's shared memory or into read-only bytes.
void CheckBlockEnd(Scheduler& s) {
  const size_t guard = std::min(kGuardBytes, kSharedBytes - s.shared_bytes);
  for (size_t i = 0; i < guard; ++i) {
    if (s.shared[s.shared_bytes + i] != kGuardByte) {
      std::fprintf(stderr,
                   "pk-emu: block %u wrote shared memory at offset %zu, past the %zu bytes the "
                   "launch asked for\n",
                   block_index.x, s.shared_bytes + i, s.shared_bytes);
      std::abort();
    }
  }
  for (const Region& region : s.read_only) {
    if (std::memcmp(s.shared + region.offset, region.snapshot.data(), region.bytes) == 0) continue;
    const auto [first, end] = ChangedBytes(s, region);
    std::fprintf(stderr, "pk-emu: block %u changed read-only shared bytes [%zu, %zu)\n",
                 block_index.x, region.offset + first, region.offset + end);
    std::abort();
  }
}

void SwitchTo(int next) {
  Scheduler& s = S();
  Fiber& from = s.fibers[s.current];
  const int from_warp = s.current / 32;
  const int to_warp = next / 32;
  if (from_warp != to_warp) {
    CheckOut(s, from_warp);
    CheckIn(s, to_warp);
  }
  s.current = next;
  thread_index = s.fibers[next].index;
  pk_emu_switch(&from.sp, s.fibers[next].sp);
}

// Runs another live fiber: the next one after the current one in thread order, or with
// PK_EMU_SCHEDULE_SEED the first live one from a point drawn at random (possibly the current one
// again). The current one may be done.
void Yield() {
  Scheduler& s = S();
  const int n = static_cast<int>(s.fibers.size());
  int start = s.current + 1;
  if (s.random_order) {
    // Mostly a lane of the same warp (a switch between warps costs the private-memory checks),
    // one time in eight any thread of the block.
    const uint64_t draw = NextGarbage(s.random_state) >> 32;
    start = (draw & 7u) != 0 ? (s.current & ~31) + static_cast<int>((draw >> 3) & 31u)
                             : static_cast<int>((draw >> 3) % static_cast<uint64_t>(n));
  }
  for (int step = 0; step < n; ++step) {
    const int next = (start + step) % n;
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

namespace {
// The offset of [begin, begin + bytes) in the block's shared memory; aborts when it is not inside
// the launch's shared memory.
size_t SharedOffset(const void* begin, size_t bytes, const char* what) {
  const Scheduler& s = S();
  const auto* at = static_cast<const uint8_t*>(begin);
  if (at < s.shared || at + bytes > s.shared + s.shared_bytes) {
    std::fprintf(
        stderr,
        "pk-emu: %s: %zu bytes at %p are not inside the launch's %zu bytes of shared memory\n",
        what, bytes, begin, s.shared_bytes);
    std::abort();
  }
  return static_cast<size_t>(at - s.shared);
}
}  // namespace

void DeclarePrivate(const void* begin, size_t bytes) {
  Scheduler& s = S();
  Region& region = s.private_regions[thread_index.x >> 5];
  region.offset = SharedOffset(begin, bytes, "DeclarePrivate");
  region.bytes = bytes;
  region.snapshot.resize(bytes);
  region.snapshot_valid = false;
}

void DeclareReadOnly(const void* begin, size_t bytes) {
  Scheduler& s = S();
  Region region;
  region.offset = SharedOffset(begin, bytes, "DeclareReadOnly");
  region.bytes = bytes;
  region.snapshot.assign(s.shared + region.offset, s.shared + region.offset + bytes);
  region.snapshot_valid = true;
  s.read_only.push_back(std::move(region));
}

void Poison(void* begin, size_t bytes) {
  Scheduler& s = S();
  auto* at = static_cast<uint8_t*>(begin);
  SharedOffset(begin, bytes, "Poison");
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t word = NextGarbage(s.pattern);
    std::memcpy(at + i, &word, std::min<size_t>(8, bytes - i));
  }
}

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
  s.shared_bytes = shared_bytes;
  if (const char* seed = std::getenv("PK_EMU_SCHEDULE_SEED"); seed != nullptr && *seed != '\0') {
    s.random_order = true;
    if (s.random_state == 0) {
      s.random_state = std::strtoull(seed, nullptr, 10) * 0x9e3779b97f4a7c15ull + 1;
    }
  }
  grid_dim = grid;
  block_dim = block;
  for (unsigned b = 0; b < grid.x; ++b) {
    // Garbage in shared memory: reading what the block never wrote must not look like zeros.
    Poison(s.shared, shared_bytes);
    std::memset(s.shared + shared_bytes, kGuardByte,
                std::min(kGuardBytes, kSharedBytes - shared_bytes));
    s.private_regions.assign(threads / 32, Region{});
    s.read_only.clear();
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
    CheckBlockEnd(s);
  }
}

namespace {

// The survivors tallied by CountSurvivors, by (factors, stage, kept, lean); printed at exit.
class SurvivorTally {
 public:
  ~SurvivorTally() {
    if (counts_.empty()) return;
    std::fprintf(stderr, "stage survivors (PK_EMU_STAGE_STATS): factors stage kept path: stages, "
                         "min / p10 / median / p90 / max, how many fit 64 / 128 / 256 keys / more\n");
    for (auto& [key, survivors] : counts_) {
      std::sort(survivors.begin(), survivors.end());
      const size_t n = survivors.size();
      auto at = [&](double q) { return survivors[std::min(n - 1, static_cast<size_t>(q * n))]; };
      int fit[4] = {};
      for (int c : survivors) ++fit[c <= 64 ? 0 : c <= 128 ? 1 : c <= 256 ? 2 : 3];
      const auto& [factors, stage, kept, lean] = key;
      std::fprintf(stderr, "  F=%d f=%d kept=%d %s: %zu, %d / %d / %d / %d / %d, %d / %d / %d / %d\n",
                   factors, stage, kept, lean ? "lean" : "cut", n, survivors.front(), at(0.1), at(0.5),
                   at(0.9), survivors.back(), fit[0], fit[1], fit[2], fit[3]);
    }
  }
  void Add(int factors, int stage, int kept, int survivors, bool lean) {
    const std::lock_guard<std::mutex> lock(mutex_);
    counts_[{factors, stage, kept, lean}].push_back(survivors);
  }

 private:
  std::mutex mutex_;
  std::map<std::tuple<int, int, int, bool>, std::vector<int>> counts_;
};

bool StageStatsOn() {
  static const bool on = [] {
    const char* value = std::getenv("PK_EMU_STAGE_STATS");
    return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
  }();
  return on;
}

}  // namespace

void CountSurvivors(int factors, int stage, int kept, int survivors, bool lean) {
  if (!StageStatsOn()) return;
  static SurvivorTally tally;
  tally.Add(factors, stage, kept, survivors, lean);
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
cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned) { return cudaMalloc(pointer, bytes); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = reinterpret_cast<cudaEvent_t>(new char);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<char*>(event);
  return cudaSuccess;
}
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
