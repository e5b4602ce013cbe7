// `gradzip bench compressors`: single-core encode+decode throughput of each
// compressor (GB/s of fp32 input, median of repeats) next to memcpy bandwidth
// for the same bytes measured in the same run, their ratio, vNMSE
// ||x - decode(encode(x))||² / ||x||² on a fixed synthetic gradient
// (log-normal magnitudes, random signs), and bits per coordinate, declared and
// as measured on the payload. Prints a table; appends JSON lines to --out.
// Compressors are built without error feedback (the codec alone is measured).
#include "experiments/Benchmarks.h"

#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "util/Error.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

namespace gradzip::experiments {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// |x_i| = exp(N(-6, 1.5²)) (gradient magnitudes spread over decades), random signs.
at::Tensor syntheticGradient(int64_t d) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20240611);
  at::Tensor mag = at::randn({d}, gen, at::kFloat).mul_(1.5).add_(-6.0).exp_();
  at::Tensor sign = at::randint(0, 2, {d}, gen, at::kFloat).mul_(2).sub_(1);
  return mag.mul_(sign);
}

// Median seconds of copying `bytes` between two warm buffers.
double memcpySeconds(int64_t bytes, int repeats) {
  std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes));
  std::memcpy(dst.data(), src.data(), src.size());  // warm-up, faults the pages in
  std::vector<double> t;
  for (int i = 0; i < std::max(repeats, 3); ++i) {
    auto a = Clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    auto b = Clock::now();
    t.push_back(seconds(a, b));
    src[static_cast<size_t>(i) % src.size()] = static_cast<char>(dst[0] + 1);  // keep the copy observable
  }
  return median(t);
}

}  // namespace

int benchCompressors(const BenchCompressorsArgs& args) {
  GZ_CHECK(args.minLog2 >= 1 && args.maxLog2 >= args.minLog2 && args.maxLog2 <= 30,
           "bench compressors: need 1 <= min-log2 <= max-log2 <= 30, got {}..{}", args.minLog2, args.maxLog2);
  GZ_CHECK(args.repeats >= 1, "bench compressors: repeats must be >= 1, got {}", args.repeats);
  const std::vector<std::string> names = args.compressors.empty() ? compress::compressorNames() : args.compressors;
  at::set_num_threads(1);  // single core: kernels are compared with one memcpy stream
  // Keep freed blocks in the heap: otherwise glibc returns every buffer above
  // 128 KiB to the OS and each encode/decode pays page faults on fresh memory
  // (measured: fp32->fp16 at 1.4 GB/s instead of 9.8 GB/s). A training process
  // wants the same setting; PyTorch's CPU allocator does not cache.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  comm::LocalCommunicator local;
  std::ofstream out;
  if (!args.out.empty()) {
    out.open(args.out, std::ios::app);
    GZ_CHECK(out.good(), "bench compressors: cannot append to '{}'", args.out);
  }
  fmt::print("{:<10} {:>10} {:>10} {:>10} {:>7} {:>11} {:>9} {:>9}\n", "compressor", "d", "GB/s", "memcpy", "ratio",
             "vNMSE", "bits", "payload");
  for (int k = args.minLog2; k <= args.maxLog2; ++k) {
    const int64_t d = int64_t{1} << k;
    const at::Tensor x = syntheticGradient(d);
    const double bytes = 4.0 * static_cast<double>(d);
    const double memcpyGbps = bytes / memcpySeconds(static_cast<int64_t>(bytes), args.repeats) / 1e9;
    for (const auto& name : names) {
      auto comp = compress::makeCompressor(name, "{error_feedback: false}");
      compress::Context ctx{local, nullptr, "engine", {}, /*seed=*/1, /*bucket=*/0, /*step=*/0, nullptr};
      // The first round (fresh state) gives vNMSE and the payload size, and warms up.
      compress::Payload p = comp->encode(x, ctx);
      const at::Tensor y = comp->decode(p, d, ctx);
      const double vnmse = (x - y).square().sum().item<double>() / x.square().sum().item<double>();
      const double payloadBits = 8.0 * static_cast<double>(p.bytes()) / static_cast<double>(d);
      std::vector<double> t;
      for (int r = 0; r < args.repeats; ++r) {
        ctx.step = r + 1;
        auto a = Clock::now();
        compress::Payload q = comp->encode(x, ctx);
        at::Tensor z = comp->decode(q, d, ctx);
        auto b = Clock::now();
        t.push_back(seconds(a, b));
      }
      const double gbps = bytes / median(t) / 1e9;
      const double bits = comp->bitsPerCoordinate(d, 1);
      fmt::print("{:<10} {:>10} {:>10.3f} {:>10.3f} {:>7.3f} {:>11.4g} {:>9.4f} {:>9.4f}\n", name, d, gbps,
                 memcpyGbps, gbps / memcpyGbps, vnmse, bits, payloadBits);
      if (out.is_open()) {
        nlohmann::json j = {{"bench", "compressors"}, {"compressor", name},  {"d", d},
                            {"gbps", gbps},          {"memcpy_gbps", memcpyGbps}, {"ratio", gbps / memcpyGbps},
                            {"vnmse", vnmse},        {"bits", bits},        {"payload_bits", payloadBits},
                            {"repeats", args.repeats}, {"threads", 1}};
        out << j.dump() << "\n";
      }
    }
  }
  return 0;
}

}  // namespace gradzip::experiments
