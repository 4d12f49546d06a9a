// The straightforward CPU top-k the benchmark compares against: per factor std::partial_sort to
// kf, every pair of the running list and the factor list summed, std::partial_sort to n, and a
// final sort by slot. It follows SPEC.md's orders but not its candidate staircase, so it agrees
// with the contract only where no ties decide: a speed baseline, not a reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/problem.h"

namespace pk::bench {

class NaiveTopK {
 public:
  void Run(const Problem& problem, const std::byte* scores, size_t rows, std::byte* values,
           uint32_t* slots);

 private:
  struct Entry {
    uint32_t key;      // ranking key of the value
    uint32_t tiebreak; // larger wins on equal keys
    float value;
    uint32_t slot;
    uint64_t columns;  // 16 bits per factor
  };
  std::vector<Entry> factor_;
  std::vector<Entry> running_;
  std::vector<Entry> pairs_;
};

}  // namespace pk::bench
