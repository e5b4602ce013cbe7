// Implements compress/CodecPath.h: the codec-path switch and its one-time log.
#include "compress/CodecPath.h"

#include "util/Error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <set>
#include <tuple>

namespace gradzip::compress {
namespace {

std::atomic<CodecPath> processDefault{CodecPath::Auto};

}  // namespace

const std::vector<std::string>& codecPathNames() {
  static const std::vector<std::string> names = {"auto", "generic"};
  return names;
}

std::string toString(CodecPath p) { return p == CodecPath::Generic ? "generic" : "auto"; }

CodecPath parseCodecPath(const std::string& name, const std::string& where) {
  if (name == "auto") return CodecPath::Auto;
  if (name == "generic") return CodecPath::Generic;
  throw UserError(fmt::format("{}: unknown codec path '{}' (valid: {})", where, name, fmt::join(codecPathNames(), ", ")));
}

CodecPath defaultCodecPath() { return processDefault.load(); }

void setDefaultCodecPath(CodecPath p) { processDefault.store(p); }

bool takesFastPath(const std::string& who, CodecPath p, const at::Tensor& x) {
  const bool fast = x.is_cpu() && p == CodecPath::Auto;
  // Called for every bucket at every step: each thread remembers what it has
  // seen, so only a first sighting takes the process-wide lock.
  using Key = std::tuple<std::string, bool, int>;
  Key key{who, fast, static_cast<int>(x.device().type())};
  thread_local std::set<Key> seenHere;
  if (seenHere.count(key)) return fast;
  static std::mutex mutex;
  static std::set<Key> logged;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (logged.insert(key).second)
      spdlog::info("{}: codec on {} tensors runs the {}", who, c10::DeviceTypeName(x.device().type(), true),
                   fast ? "CPU SIMD kernels (fast path)" : "ATen operations (generic path)");
  }
  seenHere.insert(std::move(key));
  return fast;
}

}  // namespace gradzip::compress
