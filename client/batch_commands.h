// The two commands a batch run can compute (client/batch_run.h): top-k over TopKStream and
// lookups over LookupStream. Each cuts its requests out of a mapped input (no copy of the file
// beyond the request being sent; the input's pages behind the requests are released, see
// MappedNpy::DoneReading) and writes each answer's rows straight into the output files
// at the rows' place, after checking that the answer has the shape the outputs were made for.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/batch_run.h"
#include "client/npy_file.h"
#include "pkserve/v1/pkserve.pb.h"

namespace pkserve::client {

struct TopKBatchSpec {
  std::vector<uint32_t> factor_widths;
  uint32_t k = 0;
  uint32_t kk = 0;  // min(k, product of the widths): the slots of each answer row
  v1::DType dtype = v1::DTYPE_FLOAT32;
  const MappedNpy* input = nullptr;   // the file of `scores`
  std::span<const std::byte> scores;  // every input row, row_bytes each
  size_t row_bytes = 0;
  NpyOutput* values = nullptr;  // [rows, kk] of dtype; nullptr: not written
  NpyOutput* slots = nullptr;   // [rows, kk] uint32; nullptr: not written
};

struct LookupBatchSpec {
  std::string memory;
  uint32_t k = 0;
  uint32_t kk = 0;     // min(k, the memory's slots)
  uint32_t heads = 1;  // chunks hold a multiple of heads rows
  uint32_t dim = 0;
  v1::DType dtype = v1::DTYPE_FLOAT32;         // of the scores
  v1::DType output_dtype = v1::DTYPE_FLOAT32;  // of the values (the memory's)
  const MappedNpy* input = nullptr;  // the file of `scores`
  std::span<const std::byte> scores;
  size_t row_bytes = 0;
  NpyOutput* values = nullptr;   // [rows / heads, dim] of output_dtype
  NpyOutput* slots = nullptr;    // [rows, kk] uint32; nullptr: not asked for
  NpyOutput* weights = nullptr;  // [rows, kk] float32; nullptr: not asked for
};

std::unique_ptr<BatchCommand> MakeTopKBatch(TopKBatchSpec spec);
std::unique_ptr<BatchCommand> MakeLookupBatch(LookupBatchSpec spec);

// Bytes of one element of `dtype` (2 for bfloat16, 4 for float32).
size_t DTypeBytes(v1::DType dtype);

}  // namespace pkserve::client
