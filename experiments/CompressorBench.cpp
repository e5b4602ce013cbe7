// `gradzip bench compressors`: single-core encode+decode throughput of each
// compressor (GB/s of fp32 input, median of repeats) next to memcpy bandwidth
// for the same bytes measured in the same run (alternating with the codec's
// repeats), their ratio, vNMSE
// ||x - decode(encode(x))||² / ||x||² on a fixed synthetic gradient
// (log-normal magnitudes, random signs), and bits per coordinate, declared and
// as measured on the payload. Prints a table; appends JSON lines to --out.
// Compressors are built without error feedback (the codec alone is measured).
// A --compressors entry is a name or `name:{yaml options}`, e.g.
// `thc:{deployment: allreduce, rotation_block_log2: 12}`. When --out ends in
// ".jsonl", the run's results are also written as a markdown table next to it
// (same stem, ".md"; replaced each run) with the targets (ratio to
// memcpy: fp16/bf16/cnat >= 0.5, thc allreduce with partial rotation >= 0.2,
// topkc >= 0.3), the date, the machine load before and after, the CPU and the
// exact command line.
#include "experiments/Benchmarks.h"

#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "compress/SimdKernels.h"
#include "util/Error.h"
#include "util/Median.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iterator>
#include <thread>
#include <cstring>
#include <fstream>

namespace gradzip::experiments {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// |x_i| = exp(N(-6, 1.5²)) (gradient magnitudes spread over decades), random signs.
at::Tensor syntheticGradient(int64_t d) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20240611);
  at::Tensor mag = at::randn({d}, gen, at::kFloat).mul_(1.5).add_(-6.0).exp_();
  at::Tensor sign = at::randint(0, 2, {d}, gen, at::kFloat).mul_(2).sub_(1);
  return mag.mul_(sign);
}

// The memcpy yardstick: two buffers of `bytes` each; copy() times the second
// of two back-to-back copies. The first re-warms the caches, which the codec
// timed in between has filled with its own buffers; the codec is likewise
// timed on its second back-to-back run (main loop below). Timed cold, right
// after the other, both depend on each other's footprint: the copy ran at
// 34-95 GB/s at d = 2^16 within one run.
class MemcpyProbe {
 public:
  explicit MemcpyProbe(int64_t bytes) : src_(static_cast<size_t>(bytes), 1), dst_(static_cast<size_t>(bytes)) {
    std::memcpy(dst_.data(), src_.data(), src_.size());  // warm-up, faults the pages in
  }
  double copy() {
    std::memcpy(dst_.data(), src_.data(), src_.size());  // re-warms what the codec evicted
    auto a = Clock::now();
    std::memcpy(dst_.data(), src_.data(), src_.size());
    auto b = Clock::now();
    src_[static_cast<size_t>(n_++) % src_.size()] = static_cast<char>(dst_[0] + 1);  // keep the copy observable
    return seconds(a, b);
  }

 private:
  std::vector<char> src_, dst_;
  int64_t n_ = 0;
};

struct Spec {
  std::string name, options;  // options: a YAML flow mapping, or empty
};

// "name" or "name:{yaml}".
Spec parseSpec(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {text, ""};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

// The options mapping with error feedback off (the codec alone is measured).
std::string withoutErrorFeedback(const std::string& options) {
  if (options.empty()) return "{error_feedback: false}";
  const auto open = options.find('{'), close = options.rfind('}');
  GZ_CHECK(open != std::string::npos && close != std::string::npos && close > open,
           "bench compressors: options must be a YAML flow mapping {{...}}, got '{}'", options);
  const std::string inner = options.substr(open + 1, close - open - 1);
  const bool empty = inner.find_first_not_of(' ') == std::string::npos;
  return "{error_feedback: false" + std::string(empty ? "" : ", ") + inner + "}";
}

// The throughput target (ratio to memcpy) for a compressor, 0 if none.
double targetRatio(const Spec& s) {
  if (s.name == "fp16" || s.name == "bf16" || s.name == "cnat") return 0.5;
  if (s.name == "topkc") return 0.3;
  if (s.name == "thc" && s.options.find("allreduce") != std::string::npos &&
      s.options.find("rotation_block_log2") != std::string::npos)
    return 0.2;
  return 0.0;
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// This process's argv, shell-quoted where needed.
std::string commandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find('\0', start);
    const std::string arg = all.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const bool quote = arg.find_first_of(" {}:,'") != std::string::npos;
    out += (out.empty() ? "" : " ") + (quote ? "'" + arg + "'" : arg);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Row {
  Spec spec;
  int64_t d;
  double gbps, memcpyGbps, vnmse, bits;
};

void writeMarkdown(const std::string& path, const std::vector<Row>& rows, const std::string& loadBefore,
                   const std::string& loadAfter, const std::string& started, int repeats) {
  std::ofstream md(path, std::ios::trunc);
  GZ_CHECK(md.good(), "bench compressors: cannot write '{}'", path);
  md << "# Compressor throughput (single core)\n\n";
  md << fmt::format("- date: {}\n- machine: {} ({} online CPUs); one thread (at::set_num_threads(1))\n", started,
                    cpuModel(), std::thread::hardware_concurrency());
  md << fmt::format("- SIMD tier of the compressors' kernels: {} (the CPU's: {})\n",
                    compress::simd::levelName(compress::simd::level()),
                    compress::simd::levelName(compress::simd::cpuLevel()));
  md << fmt::format("- load average (/proc/loadavg: 1, 5, 15 min, running/total): before `{}`, after `{}`\n",
                    loadBefore, loadAfter);
  md << fmt::format("- command: `{}`\n", commandLine());
  md << fmt::format(
      "- GB/s: fp32 input bytes (4d) / median wall time of encode+decode over {} repeats, each the second of two "
      "back-to-back runs (the first re-warms the caches the copies evicted); memcpy GB/s: median "
      "time of copying the same 4d bytes between two buffers, the second of two back-to-back copies, timed alternately with that row's encode+decode repeats (so both "
      "see the same machine load); ratio = GB/s / memcpy GB/s. vNMSE = ||x - decode(encode(x))||² / ||x||² on the fixed "
      "synthetic gradient (log-normal magnitudes, random signs); bits/coord as declared (equal to the measured "
      "payload). Error feedback off.\n\n",
      repeats);
  md << "| compressor | options | d | GB/s | memcpy GB/s | ratio | target | met? | vNMSE | bits/coord |\n";
  md << "|---|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const auto& r : rows) {
    const double ratio = r.gbps / r.memcpyGbps, target = targetRatio(r.spec);
    md << fmt::format("| {} | {} | 2^{} | {:.3f} | {:.3f} | {:.3f} | {} | {} | {:.4g} | {:.4f} |\n", r.spec.name,
                      r.spec.options.empty() ? std::string("defaults") : "`" + r.spec.options + "`",
                      static_cast<int>(std::lround(std::log2(static_cast<double>(r.d)))), r.gbps, r.memcpyGbps,
                      ratio, target > 0 ? fmt::format(">= {}", target) : std::string("—"),
                      target > 0 ? (ratio >= target ? "yes" : "**no**") : "—", r.vnmse, r.bits);
  }
}

}  // namespace

int benchCompressors(const BenchCompressorsArgs& args) {
  GZ_CHECK(args.minLog2 >= 1 && args.maxLog2 >= args.minLog2 && args.maxLog2 <= 30,
           "bench compressors: need 1 <= min-log2 <= max-log2 <= 30, got {}..{}", args.minLog2, args.maxLog2);
  GZ_CHECK(args.repeats >= 1, "bench compressors: repeats must be >= 1, got {}", args.repeats);
  if (!args.simd.empty()) compress::simd::capLevel(compress::simd::parseLevel(args.simd));
  std::vector<Spec> specs;
  for (const auto& c : args.compressors.empty() ? compress::compressorNames() : args.compressors)
    specs.push_back(parseSpec(c));
  const std::string loadBefore = readFirstLine("/proc/loadavg");
  const std::string started = fmt::format("{:%Y-%m-%d %H:%M:%S %z}", fmt::localtime(std::time(nullptr)));
  std::vector<Row> rows;
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
  fmt::print("SIMD tier of the kernels: {} (the CPU's: {})\n", compress::simd::levelName(compress::simd::level()),
             compress::simd::levelName(compress::simd::cpuLevel()));
  fmt::print("{:<10} {:>10} {:>10} {:>10} {:>7} {:>11} {:>9} {:>9}\n", "compressor", "d", "GB/s", "memcpy", "ratio",
             "vNMSE", "bits", "payload");
  for (int k = args.minLog2; k <= args.maxLog2; ++k) {
    const int64_t d = int64_t{1} << k;
    const at::Tensor x = syntheticGradient(d);
    const double bytes = 4.0 * static_cast<double>(d);
    MemcpyProbe probe(static_cast<int64_t>(bytes));
    for (const auto& spec : specs) {
      auto comp = compress::makeCompressor(spec.name, withoutErrorFeedback(spec.options));
      compress::Context ctx{local, nullptr, "engine", {}, /*seed=*/1, /*bucket=*/0, /*step=*/0, nullptr};
      // The first round (fresh state) gives vNMSE and the payload size, and warms up.
      compress::Payload p = comp->encode(x, ctx);
      const at::Tensor y = comp->decode(p, d, ctx);
      const double vnmse = (x - y).square().sum().item<double>() / x.square().sum().item<double>();
      const double payloadBits = 8.0 * static_cast<double>(p.bytes()) / static_cast<double>(d);
      // memcpy and the codec alternate, so both see the same machine load (a
      // shared machine's load changes within seconds); medians of each. Each
      // is timed warm: on its second run back to back (MemcpyProbe).
      std::vector<double> t, m;
      for (int r = 0; r < args.repeats; ++r) {
        m.push_back(probe.copy());
        ctx.step = 2 * r + 1;
        comp->decode(comp->encode(x, ctx), d, ctx);  // re-warms what the copies evicted
        ctx.step = 2 * r + 2;
        auto a = Clock::now();
        compress::Payload q = comp->encode(x, ctx);
        at::Tensor z = comp->decode(q, d, ctx);
        auto b = Clock::now();
        t.push_back(seconds(a, b));
      }
      const double gbps = bytes / median(t) / 1e9;
      const double memcpyGbps = bytes / median(m) / 1e9;
      const double bits = comp->bitsPerCoordinate(d, 1);
      fmt::print("{:<10} {:>10} {:>10.3f} {:>10.3f} {:>7.3f} {:>11.4g} {:>9.4f} {:>9.4f}  {}\n", spec.name, d,
                 gbps, memcpyGbps, gbps / memcpyGbps, vnmse, bits, payloadBits, spec.options);
      rows.push_back({spec, d, gbps, memcpyGbps, vnmse, bits});
      if (out.is_open()) {
        nlohmann::json j = {{"bench", "compressors"}, {"compressor", spec.name}, {"options", spec.options}, {"d", d},
                            {"gbps", gbps},          {"memcpy_gbps", memcpyGbps}, {"ratio", gbps / memcpyGbps},
                            {"vnmse", vnmse},        {"bits", bits},        {"payload_bits", payloadBits},
                            {"repeats", args.repeats}, {"threads", 1},
                            {"simd", compress::simd::levelName(compress::simd::level())}};
        out << j.dump() << "\n";
      }
    }
  }
  const std::string suffix = ".jsonl";
  if (args.out.size() > suffix.size() && args.out.compare(args.out.size() - suffix.size(), suffix.size(), suffix) == 0)
    writeMarkdown(args.out.substr(0, args.out.size() - suffix.size()) + ".md", rows, loadBefore,
                  readFirstLine("/proc/loadavg"), started, args.repeats);
  return 0;
}

}  // namespace gradzip::experiments
