// `gradzip bench compressors`, the measuring side: single-core encode+decode
// throughput of each compressor (GB/s of fp32 input, median of repeats) next
// to memcpy bandwidth for the same bytes measured in the same run (alternating
// with the codec's repeats), their ratio, vNMSE ||x - decode(encode(x))||² /
// ||x||² on a fixed synthetic gradient (log-normal magnitudes, random signs),
// and bits per coordinate, declared and as measured on the payload. Prints a
// table; appends JSON lines to --out; when --out ends in ".jsonl", also writes
// the markdown report next to it (experiments/CompressorBenchReport.h).
// Compressors are built without error feedback (the codec alone is measured).
// A --compressors entry is a name or `name:{yaml options}`, e.g.
// `thc:{deployment: allreduce, rotation_block_log2: 12}`. The reference entry
// `fwht:{block_log2: L}` times the Walsh–Hadamard butterflies alone, forward
// and inverse in 2^L blocks (compress/kernels/Hadamard.h fwhtInPlace, twice):
// every THC codec with that block computes them besides its signs,
// quantisation and packing, so where the vectors stay in the caches its GB/s
// bound THC's from above. GradiVeQ compresses conv weights only, and only
// after its warm-up and sampling phases: its row lays the gradient out as
// [16, 16, 4, 4] conv weights, runs `warmup` (0) and `samples` (8)
// aggregations of the gradient plus a 5% perturbation per step, and then
// times its compressed phase (benchOptions). With --device cuda the gradient
// lives on the GPU, the codecs run their device-generic paths, every timed
// region is synchronised, and a device-to-device copy replaces memcpy
// (experiments/BenchDevice.h); the JSON lines say "device" and "copy_gbps",
// and the markdown report says GPU.
#include "experiments/Benchmarks.h"

#include "comm/LocalCommunicator.h"
#include "compress/Factory.h"
#include "compress/GradiVeQ.h"
#include "compress/kernels/Hadamard.h"
#include "compress/kernels/SimdKernels.h"
#include "experiments/BenchDevice.h"
#include "experiments/CompressorBenchReport.h"
#include "util/Error.h"
#include "util/Median.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

namespace gradzip::experiments {
namespace {

using namespace detail;  // experiments/CompressorBenchReport.h

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
// after the other, each would depend on the other's cache footprint
// (experiments/results/compressors_log.md, "Measurements behind the kernels'
// and the bench's choices").
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

// A spec's options as the bench builds it: error feedback off (the codec
// alone is measured); GradiVeQ's sampling phase shortened to 8 steps after no
// warm-up unless the spec sets them (it is timed in its compressed phase).
std::string benchOptions(const CompressorSpec& spec) {
  YAML::Node n(YAML::NodeType::Map);
  try {
    if (!spec.options.empty()) n = YAML::Load(spec.options);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("bench compressors: options of {} '{}' are not YAML: {}", spec.name, spec.options,
                                e.what()));
  }
  GZ_CHECK(n.IsMap(), "bench compressors: options must be a YAML flow mapping {{...}}, got '{}'", spec.options);
  n["error_feedback"] = false;
  if (spec.name == "gradiveq") {
    if (!n["warmup"]) n["warmup"] = 0;
    if (!n["samples"]) n["samples"] = 8;
  }
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}


// d coordinates as [16, 16, 4, 4] conv weights (4096 each), the rest flat.
std::vector<compress::TensorSlot> convLayout(int64_t d) {
  std::vector<compress::TensorSlot> slots;
  for (int64_t off = 0; off + 4096 <= d; off += 4096)
    slots.push_back({fmt::format("conv{}.weight", slots.size()), {16, 16, 4, 4}, off, 4096});
  return slots;
}

// Runs GradiVeQ's warm-up and sampling aggregations until its bases exist, on x
// plus 5% Gaussian noise per step (the samples differ, as gradients do).
void reachCompressedPhase(compress::Compressor& c, const at::Tensor& x, compress::Context& ctx) {
  auto* g = dynamic_cast<compress::GradiVeQ*>(&c);
  GZ_CHECK(g != nullptr, "bench compressors: gradiveq is not a GradiVeQ");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const double scale = 0.05 * x.norm().item<double>() / std::sqrt(static_cast<double>(x.numel()));
  for (int i = 0; g->phase() != compress::GradiVeQ::Phase::Compressed; ++i) {
    GZ_CHECK(i < 100000, "bench compressors: gradiveq never reached its compressed phase");
    ctx.step = i;
    c.aggregate(x + at::randn({x.numel()}, gen, at::kFloat).to(x.device()) * scale, ctx);
  }
}

// The reference entry `fwht:{block_log2: L}` (the butterflies alone).
// Times fwhtInPlace forward and inverse over a copy of x, like a codec's
// encode+decode (Payload-free); vNMSE of H·H·x/B against x.
class FwhtReference {
 public:
  FwhtReference(const at::Tensor& x, int blockLog2)
      : x_(x), block_(int64_t{1} << blockLog2), padded_((x.numel() + block_ - 1) / block_ * block_),
        buf_(static_cast<size_t>(padded_), 0.0f) {}
  void restore() { std::memcpy(buf_.data(), x_.data_ptr<float>(), sizeof(float) * x_.numel()); }
  // The two transforms on a fresh copy of x (the copy is not timed).
  double timed() {
    restore();
    auto a = Clock::now();
    compress::fwhtInPlace(buf_.data(), padded_, block_);  // forward
    compress::fwhtInPlace(buf_.data(), padded_, block_);  // inverse (H is its own inverse up to B)
    auto b = Clock::now();
    return seconds(a, b);
  }
  double vnmse() {
    timed();
    at::Tensor y = at::from_blob(buf_.data(), {x_.numel()}, at::kFloat).div(static_cast<double>(block_));
    return (x_ - y).square().sum().item<double>() / x_.square().sum().item<double>();
  }

 private:
  at::Tensor x_;
  int64_t block_, padded_;
  std::vector<float> buf_;
};

}  // namespace

int benchCompressors(const BenchCompressorsArgs& args) {
  GZ_CHECK(args.minLog2 >= 1 && args.maxLog2 >= args.minLog2 && args.maxLog2 <= 30,
           "bench compressors: need 1 <= min-log2 <= max-log2 <= 30, got {}..{}", args.minLog2, args.maxLog2);
  GZ_CHECK(args.repeats >= 1, "bench compressors: repeats must be >= 1, got {}", args.repeats);
  if (!args.simd.empty()) compress::simd::capLevel(compress::simd::parseLevel(args.simd));
  const at::Device device = benchDevice(args.device, "bench compressors");
  const bool gpu = device.is_cuda();
  // The CPU's results file holds single-core rows; GPU rows there would be read as CPU ones.
  GZ_CHECK(!gpu || std::filesystem::path(args.out).stem() != "compressors",
           "bench compressors: --device cuda writes GPU rows; give --out a file of its own (e.g. "
           "experiments/results/gpu_compressors.jsonl), not '{}'",
           args.out);
  std::vector<CompressorSpec> specs;
  for (const auto& c : args.compressors.empty() ? compress::compressorNames() : args.compressors)
    specs.push_back(parseCompressorSpec(c));
  for (const auto& spec : specs)
    GZ_CHECK(!gpu || !isFwht(spec), "bench compressors: the fwht reference runs on the CPU only; leave it out of "
                                    "--compressors with --device cuda");
  const std::string loadBefore = readFirstLine("/proc/loadavg");
  const std::string started = fmt::format("{:%Y-%m-%d %H:%M:%S %z}", fmt::localtime(std::time(nullptr)));
  std::vector<CompressorRow> rows;
  at::set_num_threads(1);  // single core: kernels are compared with one memcpy stream
  // Keep freed blocks in the heap: otherwise glibc returns every buffer above
  // 128 KiB to the OS and each encode/decode times page faults on fresh memory,
  // not the codec (experiments/results/compressors_log.md, "Measurements behind
  // the kernels' and the bench's choices"). A training process wants the same
  // setting (util/Allocator.h); PyTorch's CPU allocator does not cache.
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
  if (gpu) fmt::print("device: {} (codecs on their device-generic path; yardstick: device-to-device copy)\n", device.str());
  fmt::print("{:<10} {:>10} {:>10} {:>10} {:>7} {:>11} {:>9} {:>9}\n", "compressor", "d", "GB/s", gpu ? "copy" : "memcpy",
             "ratio", "vNMSE", "bits", "payload");
  int failed = 0;
  for (int k = args.minLog2; k <= args.maxLog2; ++k) {
    const int64_t d = int64_t{1} << k;
    const at::Tensor x = syntheticGradient(d).to(device);
    const double bytes = 4.0 * static_cast<double>(d);
    std::optional<MemcpyProbe> memcpyProbe;
    std::optional<DeviceCopyProbe> copyProbe;
    if (gpu)
      copyProbe.emplace(static_cast<int64_t>(bytes), device);
    else
      memcpyProbe.emplace(static_cast<int64_t>(bytes));
    for (const auto& spec : specs) try {
      // The row's first run gives vNMSE and the payload size, and warms up;
      // `timed` is one timed encode+decode (or the fwht reference's two
      // transforms), its set-up left out of the time.
      double vnmse = 0, bits = 32.0, payloadBits = NAN;
      std::function<double()> timed;
      std::optional<FwhtReference> fwht;
      std::unique_ptr<compress::Compressor> comp;
      compress::Context ctx{local, nullptr, "engine", {}, /*seed=*/1, /*bucket=*/0, /*step=*/0, nullptr};
      if (isFwht(spec)) {
        fwht.emplace(x, fwhtBlockLog2(spec));
        vnmse = fwht->vnmse();
        timed = [&] { return fwht->timed(); };
      } else {
        const bool gradiveq = spec.name == "gradiveq";
        comp = compress::makeCompressor(spec.name, benchOptions(spec));
        if (gradiveq) {
          ctx.layout = convLayout(d);
          reachCompressedPhase(*comp, x, ctx);
        }
        compress::Payload p = comp->encode(x, ctx);
        const at::Tensor y = comp->decode(p, d, ctx);
        vnmse = (x - y).square().sum().item<double>() / x.square().sum().item<double>();
        payloadBits = 8.0 * static_cast<double>(p.bytes()) / static_cast<double>(d);
        bits = comp->bitsPerCoordinate(d, 1);
        const int64_t first = ctx.step;
        int64_t calls = 0;
        timed = [&, first] {
          ctx.step = first + ++calls;  // fresh randomness each call
          syncDevice(device);          // nothing queued before enters the time
          auto a = Clock::now();
          compress::Payload q = comp->encode(x, ctx);
          at::Tensor z = comp->decode(q, d, ctx);
          syncDevice(device);
          auto b = Clock::now();
          return seconds(a, b);
        };
      }
      // memcpy and the row alternate, so both see the same machine load (a
      // shared machine's load changes within seconds); medians of each. Each
      // is timed warm: on its second run back to back (MemcpyProbe).
      std::vector<double> t, m;
      for (int r = 0; r < args.repeats; ++r) {
        m.push_back(gpu ? copyProbe->copy() : memcpyProbe->copy());
        timed();  // re-warms what the copies evicted
        t.push_back(timed());
      }
      const double gbps = bytes / median(t) / 1e9;
      const double memcpyGbps = bytes / median(m) / 1e9;
      fmt::print("{:<10} {:>10} {:>10.3f} {:>10.3f} {:>7.3f} {:>11.4g} {:>9.4f} {:>9}  {}\n", spec.name, d, gbps,
                 memcpyGbps, gbps / memcpyGbps, vnmse, bits,
                 std::isfinite(payloadBits) ? fmt::format("{:.4f}", payloadBits) : "-", spec.options);
      rows.push_back({spec, d, gbps, memcpyGbps, vnmse, bits, ""});
      if (out.is_open()) {
        nlohmann::json j = {{"bench", "compressors"}, {"compressor", spec.name}, {"options", spec.options}, {"d", d},
                            {"gbps", gbps},          {"memcpy_gbps", memcpyGbps}, {"ratio", gbps / memcpyGbps},
                            {"vnmse", vnmse},        {"bits", bits},        {"repeats", args.repeats},
                            {"threads", 1},          {"simd", compress::simd::levelName(compress::simd::level())}};
        if (std::isfinite(payloadBits)) j["payload_bits"] = payloadBits;
        if (gpu) {  // the yardstick is a device copy, not memcpy; the CPU rows keep their format
          j.erase("memcpy_gbps");
          j["copy_gbps"] = memcpyGbps;
          j["device"] = device.str();
        }
        out << j.dump() << "\n";
      }
    } catch (const std::exception& e) {
      // On a GPU one codec's failure (a device-generic path missing, say)
      // should not cost the other rows of a scarce machine's run.
      if (!gpu) throw;
      ++failed;
      fmt::print("{:<10} {:>10} failed on {}: {}\n", spec.name, d, device.str(), e.what());
      rows.push_back({spec, d, NAN, NAN, NAN, NAN, e.what()});
      if (out.is_open())
        out << nlohmann::json{{"bench", "compressors"}, {"compressor", spec.name}, {"options", spec.options},
                              {"d", d}, {"device", device.str()}, {"error", e.what()}}.dump()
            << "\n";
    }
  }
  const std::string suffix = ".jsonl";
  if (args.out.size() > suffix.size() && args.out.compare(args.out.size() - suffix.size(), suffix.size(), suffix) == 0)
    writeCompressorMarkdown(args.out.substr(0, args.out.size() - suffix.size()) + ".md", rows, loadBefore,
                  readFirstLine("/proc/loadavg"), started, args.repeats, device.str());
  return failed > 0 ? 1 : 0;
}

}  // namespace gradzip::experiments
