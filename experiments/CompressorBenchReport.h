// The reporting side of `gradzip bench compressors` (experiments/
// CompressorBench.cpp measures): what a --compressors entry names, each
// compressor's throughput target, and the markdown table written next to a
// ".jsonl" --out, with the machine, its load and the command line that
// produced it. Private to CompressorBench's files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::experiments::detail {

// A --compressors entry: "name" or "name:{yaml}".
struct CompressorSpec {
  std::string name, options;  // options: a YAML flow mapping, or empty
};
CompressorSpec parseCompressorSpec(const std::string& text);

// The reference entry `fwht:{block_log2: L}` (the butterflies alone), and its L
// (10 by default; UserError outside [3, 24]).
bool isFwht(const CompressorSpec& s);
int fwhtBlockLog2(const CompressorSpec& s);

// The throughput target (ratio to memcpy) for a compressor, 0 if none.
double targetRatio(const CompressorSpec& s);

// One row of the table: GB/s of fp32 input for the codec and for memcpy (on a
// GPU: a device-to-device copy) of the same bytes, vNMSE and declared bits per
// coordinate; or, where the codec failed on a GPU, why.
struct CompressorRow {
  CompressorSpec spec;
  int64_t d;
  double gbps, memcpyGbps, vnmse, bits;
  std::string error;  // non-empty: the row failed and its numbers are NaN
};

// The first line of a text file ("" when it cannot be read), e.g. /proc/loadavg.
std::string readFirstLine(const std::string& path);

// Writes the run's table to `path` (replaced): date, CPU, SIMD tier, load
// before and after, the command line, what each column means, one row per
// measurement, and where a THC all-reduce row misses its target, the share of
// its budget the `fwht` rows of the same size and block take. `device` is
// "cpu" or a CUDA device ("cuda:0"): the GPU report names the device and its
// device-copy yardstick. UserError when `path` cannot be written.
void writeCompressorMarkdown(const std::string& path, const std::vector<CompressorRow>& rows,
                             const std::string& loadBefore, const std::string& loadAfter, const std::string& started,
                             int repeats, const std::string& device = "cpu");

// The throughput target (ratio to the device's copy) on a GPU: fp16,
// bf16 and C_nat 0.5, a THC all-reduce codec 0.2, 0 for the rest.
double gpuTargetRatio(const CompressorSpec& s);

}  // namespace gradzip::experiments::detail
