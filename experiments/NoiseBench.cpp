// `gradzip bench noise`: C_nat's noise stream (compress/kernels/AesNoise.h) as raw
// bytes on stdout, 16 per block in x86 byte order, for statistical test
// batteries (PractRand: `gradzip bench noise | RNG_test stdin32`). Either one
// stream of --seed, or, with --blocks-per-seed N, the first N blocks of the
// stream each training step draws on rank 0 for bucket 0 (Context::
// privateSeed of steps 0, 1, ..), as a run reseeds per step and bucket.
#include "comm/LocalCommunicator.h"
#include "compress/Compressor.h"
#include "compress/kernels/AesNoise.h"
#include "experiments/Benchmarks.h"

#include <cstdio>
#include <vector>

namespace gradzip::experiments {

int benchNoise(const BenchNoiseArgs& args) {
  comm::LocalCommunicator local;
  compress::Context ctx{local, nullptr, "engine", {}, args.seed, /*bucket=*/0, /*step=*/0, nullptr};
  uint64_t seed = args.blocksPerSeed > 0 ? ctx.privateSeed() : args.seed;
  std::vector<uint64_t> buf(2 * 4096);
  int64_t written = 0;
  uint64_t b = 0;  // block within the current stream
  while (args.bytes == 0 || written < args.bytes) {
    for (size_t k = 0; k < buf.size(); k += 2, ++b) {
      if (args.blocksPerSeed > 0 && b == static_cast<uint64_t>(args.blocksPerSeed)) {
        ++ctx.step;
        seed = ctx.privateSeed();
        b = 0;
      }
      const compress::aesnoise::Block bl = compress::aesnoise::block(seed, b);
      buf[k] = bl.lo;  // little-endian: byte j of the block is byte j % 8 of lo, then hi
      buf[k + 1] = bl.hi;
    }
    size_t n = buf.size() * sizeof(uint64_t);
    if (args.bytes > 0 && written + static_cast<int64_t>(n) > args.bytes) n = static_cast<size_t>(args.bytes - written);
    if (std::fwrite(buf.data(), 1, n, stdout) != n) return 0;  // the reader closed the pipe
    written += static_cast<int64_t>(n);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace gradzip::experiments
