// pkserve-cli's batch runs (topk and lookup with output files): the split of the input into
// requests within the server's limits, the output files and the --resume sidecar, the run over
// --streams and --connections, the progress line (on a terminal only, unless --quiet), Ctrl-C,
// and the summary. The command-specific part (which outputs, which requests) comes in a BatchJob.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "client/batch_run.h"
#include "client/cli_options.h"
#include "client/client.h"
#include "client/npy_file.h"

namespace pkserve::client {

// The options of a batch run, shared by topk and lookup.
std::span<const OptionSpec> BatchOptionSpecs();

struct BatchOutputFile {
  std::string path;
  std::string descr;
  std::vector<uint64_t> shape;
};

struct BatchJob {
  std::string command;     // "topk" or "lookup": the summary's first word
  const MappedNpy* input = nullptr;
  std::string input_path;
  uint64_t rows = 0;       // score rows of the input
  uint32_t row_group = 1;  // every request holds a multiple of it (lookup: heads)
  size_t row_bytes = 0;
  std::string parameters;  // what the answers depend on, for the --resume key
  std::vector<BatchOutputFile> outputs;
  // The command, once the outputs are open (`outputs` in the order above).
  std::function<std::unique_ptr<BatchCommand>(std::span<NpyOutput* const>)> make_command;
};

// Connects --connections clients, reads the server's limits, and runs `job`; returns the exit
// status (cli_common.h).
int RunBatchJob(const ParsedOptions& options, const BatchJob& job);

}  // namespace pkserve::client
