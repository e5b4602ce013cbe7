// Benchmarks reachable from the CLI (`gradzip bench ...`). They print ratios
// measured side by side in one run and append JSON lines to a results file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::experiments {

struct BenchCollectivesArgs {
  int64_t minBytes = 4 << 10;
  int64_t maxBytes = 64 << 20;
  int repeats = 5;
  std::string out;  // JSON lines appended here by rank 0 (empty: print only)
};
// Ring, tree and PS all-reduce (float sum) against c10d's Gloo all-reduce for
// float tensors from minBytes to maxBytes (powers of 4); run under launch.
int benchCollectives(const BenchCollectivesArgs& args);

struct BenchCompressorsArgs {
  std::vector<std::string> compressors;  // empty = every registered compressor
  int minLog2 = 16;                      // d from 2^minLog2 ...
  int maxLog2 = 24;                      // ... to 2^maxLog2
  int repeats = 3;
  std::string out;  // JSON lines appended here (empty: print only)
  std::string simd;  // cap on the kernels' SIMD tier ("portable" | "avx2" | "avx512"; empty: the CPU's)
  std::string device = "cpu";  // "cpu" | "cuda": where the gradient lives and the codecs run
};
// Single-core encode+decode throughput (GB/s of fp32 input) of each compressor
// next to memcpy bandwidth measured in the same run, with vNMSE and bits per
// coordinate on a fixed synthetic gradient. With device "cuda" the gradient
// lives on the GPU, every codec runs its device-generic path, and the yardstick
// is a device-to-device copy of the same bytes; UserError naming what is
// missing where no GPU can be used. Returns 1 when a codec failed on the GPU
// (its row says why; the others are still measured), else 0.
int benchCompressors(const BenchCompressorsArgs& args);

struct BenchNoiseArgs {
  uint64_t seed = 1;
  int64_t blocksPerSeed = 0;  // 0: one stream; else the streams of steps 0, 1, .. (rank 0, bucket 0), this many blocks each
  int64_t bytes = 0;          // stop after this many bytes (0: when stdout closes)
};
// C_nat's noise (compress/kernels/AesNoise.h) as raw bytes on stdout, 16 a block, for
// statistical test batteries (e.g. PractRand's `RNG_test stdin32`).
int benchNoise(const BenchNoiseArgs& args);

struct BenchProbeArgs {
  std::string out;  // JSON line appended here by rank 0 (empty: print only)
};
// Ping-pong probe of α (latency) and β (seconds per byte) between the ranks
// (run under launch or inside emulated namespaces).
int benchProbe(const BenchProbeArgs& args);

struct BenchTrainArgs {
  std::vector<std::string> models = {"resnet20", "vgg11", "bert"};
  int steps = 20;       // timed steps per model (after warm-up)
  int warmup = 3;
  int batch = 64;       // images per step (BERT: sequences of `seqLen`)
  int seqLen = 128;
  int threads = 1;
  std::string out;      // JSON lines appended here
};
// Single-worker training throughput (samples/s) of gradzip's models on synthetic
// batches of the real shapes: forward, loss, backward, SGD step, same batch and
// threads as experiments/python/throughput.py, which runs the same models in
// PyTorch for the side-by-side ratio.
int benchTrain(const BenchTrainArgs& args);

}  // namespace gradzip::experiments
