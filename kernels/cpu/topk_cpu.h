// The CPU implementation of the product-key top-k contract (../shared/SPEC.md), one thread.
//
// Per row: each factor's top kf columns come from a cheap lower bound (the kf-th largest of about
// 2 kf strided group maxima: at least kf columns reach it) that filters the row with SIMD
// compares, then a sorting network over the survivors (sort.h; select.h when more than 256).
// Each pairing stage walks only the candidate staircase (i+1)(j+1) <= n, filters it by the larger
// of the staircase's worst corner and the best far corner of a full n-pair rectangle, and selects
// the n best by (score, i+j, i), by one sort where 32-bit keys can carry that order. The final slots are
// ordered by slot, and their values are the lists' sums (from the raw row where a NaN may have
// gone in). The plan of a shape (stage sizes, staircase rows) is made once per call; nothing is
// allocated per row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/problem.h"

namespace pk::cpu {

struct WorkspaceBuffers;

// Scratch memory for TopKRows, sized for every valid problem. One per thread; not thread-safe.
class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  WorkspaceBuffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<WorkspaceBuffers> buffers_;
};

// Computes the contract for `rows` consecutive rows.
// scores: rows * problem.row_width() elements of problem.dtype, little-endian, any alignment.
// values: room for rows * problem.kk() elements of problem.dtype (any alignment).
// slots:  room for rows * problem.kk() slots.
// Each row's output is in slot order. Rows are independent: any split gives the same bits.
void TopKRows(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
              uint32_t* slots, Workspace& workspace);

// Which vector path the CPU implementation picked on this machine (e.g. "avx512", "generic").
const char* CpuPathName();

}  // namespace pk::cpu
