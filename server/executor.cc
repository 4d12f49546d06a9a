#include "server/executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace pkserve {

void Batch::set_sources(std::vector<std::span<const std::byte>> sources) {
  sources_ = std::move(sources);
}

void Batch::GatherScores(size_t begin, size_t end) const {
  end = std::min(end, scores_.size());
  size_t source_start = 0;  // where the current source begins in the batch
  for (const std::span<const std::byte>& source : sources_) {
    if (begin >= end) return;
    const size_t source_end = source_start + source.size();
    if (begin < source_end) {
      const size_t bytes = std::min(end, source_end) - begin;
      std::memcpy(scores_.data() + begin, source.data() + (begin - source_start), bytes);
      begin += bytes;
    }
    source_start = source_end;
  }
}

}  // namespace pkserve
