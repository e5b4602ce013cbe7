// Implements experiments/CompressorBenchReport.h: the spec helpers and the
// markdown report of `gradzip bench compressors`, with the machine facts read
// from /proc.
#include "experiments/CompressorBenchReport.h"

#include "compress/kernels/SimdKernels.h"
#include "util/Error.h"
#include "util/Yaml.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <thread>

namespace gradzip::experiments::detail {
namespace {

// A THC spec's rotation_block_log2 (-1 when it has none).
int thcBlockLog2(const CompressorSpec& s) {
  if (s.name != "thc" || s.options.empty()) return -1;
  const YAML::Node n = YAML::Load(s.options);
  return n["rotation_block_log2"] ? n["rotation_block_log2"].as<int>() : -1;
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

// The GPU report: the same table against a device-to-device copy, with
// gpuTargetRatio's targets and the failed rows' errors; no fwht section (the
// reference runs on the CPU only).
void writeGpuCompressorMarkdown(std::ofstream& md, const std::vector<CompressorRow>& rows,
                                const std::string& loadBefore, const std::string& loadAfter,
                                const std::string& started, int repeats, const std::string& device) {
  md << "# Compressor throughput (GPU)\n\n";
  md << fmt::format("- date: {}\n- device: {} (first visible CUDA device); host: {} ({} online CPUs)\n", started, device,
                    cpuModel(), std::thread::hardware_concurrency());
  md << "- codecs: each compressor's device-generic ATen path (compress/CodecPath.h), the only one for CUDA tensors\n";
  md << fmt::format("- host load average (/proc/loadavg): before `{}`, after `{}`\n", loadBefore, loadAfter);
  md << fmt::format("- command: `{}`\n", commandLine());
  md << fmt::format(
      "- GB/s: fp32 input bytes (4d) / median wall time of encode+decode over {} repeats, the device synchronised "
      "before and after each (torch::cuda::synchronize), each the second of two back-to-back runs; copy GB/s: "
      "median time of a device-to-device copy of the same 4d bytes into a preallocated tensor, timed the same way "
      "and alternately with that row's repeats; ratio = GB/s / copy GB/s. vNMSE = ||x - decode(encode(x))||² / "
      "||x||² on the fixed synthetic gradient (log-normal magnitudes, random signs); bits/coord as declared. "
      "Error feedback off.\n\n",
      repeats);
  md << "| compressor | options | d | GB/s | copy GB/s | ratio | target | met? | vNMSE | bits/coord |\n";
  md << "|---|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const auto& r : rows) {
    const std::string options = r.spec.options.empty() ? std::string("defaults") : "`" + r.spec.options + "`";
    const int log2d = static_cast<int>(std::lround(std::log2(static_cast<double>(r.d))));
    const double target = gpuTargetRatio(r.spec);
    const std::string targetText = target > 0 ? fmt::format(">= {}", target) : std::string("—");
    if (!r.error.empty()) {
      std::string why = r.error;
      for (char& c : why)
        if (c == '|' || c == '\n') c = ' ';
      md << fmt::format("| {} | {} | 2^{} | failed: {} | | | {} | **no** | | |\n", r.spec.name, options, log2d, why,
                        targetText);
      continue;
    }
    const double ratio = r.gbps / r.memcpyGbps;
    md << fmt::format("| {} | {} | 2^{} | {:.3f} | {:.3f} | {:.3f} | {} | {} | {:.4g} | {:.4f} |\n", r.spec.name,
                      options, log2d, r.gbps, r.memcpyGbps, ratio, targetText,
                      target > 0 ? (ratio >= target ? "yes" : "**no**") : "—", r.vnmse, r.bits);
  }
}

}  // namespace

CompressorSpec parseCompressorSpec(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {text, ""};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

bool isFwht(const CompressorSpec& s) { return s.name == "fwht"; }

int fwhtBlockLog2(const CompressorSpec& s) {
  auto r = YamlReader::loadString(s.options.empty() ? "{}" : s.options, "<fwht options>");
  const int b = static_cast<int>(r.getInt("block_log2", 10, 3, 24));
  r.finish();
  return b;
}

double targetRatio(const CompressorSpec& s) {
  if (s.name == "fp16" || s.name == "bf16" || s.name == "cnat") return 0.5;
  if (s.name == "topkc") return 0.3;
  if (s.name == "thc" && s.options.find("allreduce") != std::string::npos &&
      s.options.find("rotation_block_log2") != std::string::npos)
    return 0.2;
  return 0.0;
}

double gpuTargetRatio(const CompressorSpec& s) { return s.name == "topkc" ? 0.0 : targetRatio(s); }

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void writeCompressorMarkdown(const std::string& path, const std::vector<CompressorRow>& rows,
                             const std::string& loadBefore, const std::string& loadAfter, const std::string& started,
                             int repeats, const std::string& device) {
  std::ofstream md(path, std::ios::trunc);
  GZ_CHECK(md.good(), "bench compressors: cannot write '{}'", path);
  if (device != "cpu") {
    writeGpuCompressorMarkdown(md, rows, loadBefore, loadAfter, started, repeats, device);
    return;
  }
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
      "payload). Error feedback off. gradiveq: the gradient laid out as [16, 16, 4, 4] conv weights, timed in its "
      "compressed phase after `warmup` (0) and `samples` (8) aggregations of it plus 5% noise per step; its "
      "vNMSE is of a gradient its bases were sampled around, so it measures the codec's cost, not its loss.\n\n",
      repeats);
  md << "| compressor | options | d | GB/s | memcpy GB/s | ratio | target | met? | vNMSE | bits/coord |\n";
  md << "|---|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const auto& r : rows) {
    const double ratio = r.gbps / r.memcpyGbps, target = targetRatio(r.spec);
    md << fmt::format("| {} | {} | 2^{} | {:.3f} | {:.3f} | {:.3f} | {} | {} | {:.4g} | {:.4f} |\n", r.spec.name,
                      r.spec.options.empty() ? std::string("defaults") : "`" + r.spec.options + "`",
                      static_cast<int>(std::lround(std::log2(static_cast<double>(r.d)))), r.gbps, r.memcpyGbps,
                      ratio, target > 0 ? fmt::format(">= {}", target) : isFwht(r.spec) ? "bound" : std::string("—"),
                      target > 0 ? (ratio >= target ? "yes" : "**no**") : "—", r.vnmse, r.bits);
  }
  // Where both were measured and the THC row misses its target: the share of
  // the time its 0.2x target allows (4d bytes at 0.2 x memcpy) that the
  // butterflies alone take.
  bool header = false;
  for (const auto& f : rows) {
    if (!isFwht(f.spec)) continue;
    for (const auto& t : rows) {
      if (t.d != f.d || targetRatio(t.spec) != 0.2 || thcBlockLog2(t.spec) != fwhtBlockLog2(f.spec) ||
          t.gbps >= 0.2 * t.memcpyGbps)
        continue;
      if (!header) {
        md << "\n## The butterflies' share of THC's 0.2x budget\n\n"
              "The `fwht` rows time the Walsh–Hadamard butterflies alone, forward and inverse, at the THC row's "
              "block: work every THC all-reduce codec does besides its random signs, norms, noise, quantisation, "
              "packing and unpacking. Where the vectors stay in the caches that bounds THC's throughput from "
              "above (out of them fwhtInPlace's separate passes over memory are slower than THC's fused "
              "blocks). For each size where the THC row misses its target: share = (time of the butterflies) / "
              "(time the 0.2x target allows) = 0.2 x memcpy GB/s (the THC row's) / fwht GB/s; the rest of the "
              "codec has to fit in what is left.\n\n"
              "| d | block | fwht GB/s | THC GB/s | 0.2x memcpy GB/s | butterflies' share of the budget | left for the rest |\n"
              "|---:|---:|---:|---:|---:|---:|---:|\n";
        header = true;
      }
      const double budget = 0.2 * t.memcpyGbps, share = budget / f.gbps;
      md << fmt::format("| 2^{} | 2^{} | {:.3f} | {:.3f} | {:.3f} | {:.0f}% | {:.0f}% |\n",
                        static_cast<int>(std::lround(std::log2(static_cast<double>(f.d)))), fwhtBlockLog2(f.spec),
                        f.gbps, t.gbps, budget, 100 * share, 100 * (1 - share));
    }
  }
}

}  // namespace gradzip::experiments::detail
