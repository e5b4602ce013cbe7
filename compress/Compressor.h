// The Compressor interface: how one bucket of gradients shrinks, crosses the
// network and comes back as the mean over ranks. One instance serves one bucket
// for the whole run and owns that bucket's state (residuals, PowerSGD Q,
// GradiVeQ bases, ...). Error feedback is not part of a compressor: wrap one in
// ErrorFeedback (compress/ErrorFeedback.h), which needs only `localApplied`.
//
// Adding a compressor: write compress/<Name>.{h,cpp} with a `<Name>Options`
// struct (defaults, fromYaml, toYaml) and a class implementing this interface;
// register it in compress/Factory.cpp; add tests/compress/<Name>Test.cpp with
// its wire-size, statistics and multi-rank tests; add a row to compress/README.md.
#pragma once

#include "comm/Collective.h"
#include "comm/Communicator.h"
#include "compress/CodecPath.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::compress {

// What a compressor can do; the controller and GradSync check plans against it.
struct Capabilities {
  bool summable = false;        // payloads add in the compressed domain (all-reduce compatible)
  bool needsSharedSeed = false;  // every rank must draw the same randomness (e.g. THC's RHT)
  bool unbiased = false;         // E[decode(encode(x))] = x (the paper's claim)
  // Collective names it accepts: "engine", "ring", "tree", "ps", "allgather".
  std::vector<std::string> collectives;
  // Its algorithm runs on the fused whole-model gradient (AR-TopK, flexible-
  // communication Alg. 1): a static plan of it gets one bucket for the model
  // (sync/GradSync.h bucketBytesFor).
  bool wholeModel = false;
};

// One parameter tensor inside a flat bucket (for shape-aware schemes such as
// PowerSGD and GradiVeQ). An empty layout means "one flat vector".
struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in elements, into the flat bucket
  int64_t numel = 0;
};

class DevicePhaseClock;

// Seconds a call spent in each phase; aggregate() adds to it. Host wall-clock
// time, unless `deviceClock` is set (CUDA buckets: compress/DevicePhaseClock.h).
struct PhaseTimes {
  double encode = 0, communicate = 0, decode = 0;
  int64_t bytesSent = 0;  // payload bytes this rank put on the wire
  DevicePhaseClock* deviceClock = nullptr;
};

// Everything aggregate() may use besides the gradient. Randomness is derived
// from (seed, bucket, step[, rank]) so runs are reproducible and resumable
// without saving generator state: sharedSeed() is identical on every rank,
// privateSeed() differs per rank (THC requires independent SQ noise per worker).
struct Context {
  comm::Communicator& comm;
  comm::Collective* collective = nullptr;  // the plan's collective; null = engine all-reduce
  std::string collectiveName = "engine";
  std::vector<TensorSlot> layout = {};  // "= {}": Context{comm} leaves it empty without a warning
  uint64_t seed = 0;
  int bucket = 0;
  int64_t step = 0;
  PhaseTimes* times = nullptr;  // may be null

  uint64_t sharedSeed() const;
  uint64_t privateSeed() const;
};

// The result of aggregating one bucket.
struct Aggregated {
  at::Tensor mean;  // estimate of (1/n) Σ_i x_i, bit-identical on every rank
  // This rank's own contribution as it entered the aggregate, decoded
  // (e.g. THC: RHT⁻¹(X_i), less what its saturating combines clipped;
  // TopKC: x on the chosen chunks in fp16). Error feedback keeps
  // x - localApplied. For PowerSGD, the decompressed P Qᵀ.
  at::Tensor localApplied;
  int64_t saturated = 0;  // clip events of a saturating aggregation, summed over ranks (THC all-reduce form)
};

// What one rank puts on the wire for x in all rounds, for single-worker use
// (wire-size tests, vNMSE, encode/decode benchmarks).
struct Payload {
  std::vector<at::Tensor> tensors;
  int64_t bytes() const;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string name() const = 0;
  virtual Capabilities capabilities() const = 0;
  // Exact bits per coordinate this rank sends into the collective for a bucket
  // of d coordinates among n ranks, headers included (b in the papers).
  virtual double bitsPerCoordinate(int64_t d, int n) const = 0;
  // Bits per coordinate of the reduced message a parameter-server shard owner
  // sends back to each rank (the downlink; comm/ParameterServer.h,
  // compress/ShardedExchange.h). The uplink's unless the owner widens it:
  // THC's sums of n table values need ceil(log2(n·g + 1)) bits (Alg. 2 line
  // 13), 6 for 2-bit codes at n = 2. The cost model charges a "ps" plan
  // (N−1)/N of uplink plus downlink (controller/PlanCost.h).
  virtual double downlinkBitsPerCoordinate(int64_t d, int n) const { return bitsPerCoordinate(d, n); }

  // Collective aggregation of x (1-D, float32, contiguous, same numel on every
  // rank). Throws UserError on bad input; non-finite x is rejected (NaN never
  // spreads silently).
  virtual Aggregated aggregate(const at::Tensor& x, Context& ctx) = 0;

  // Single-worker codec: decode(encode(x)) is what aggregate() would return
  // with n = 1. payload.bytes() * 8 / d equals bitsPerCoordinate(d, 1).
  virtual Payload encode(const at::Tensor& x, Context& ctx) = 0;
  virtual at::Tensor decode(const Payload& p, int64_t d, Context& ctx) = 0;

  // Checkpointed state; compressors without state keep the defaults.
  virtual void save(torch::serialize::OutputArchive& ar) const {}
  virtual void load(torch::serialize::InputArchive& ar) {}

  // Error feedback's memory e (compress/ErrorFeedback.h overrides these), so
  // that callers never need to know which compressor wraps which. Without
  // one: residual() is undefined, takeResidual() returns an undefined tensor
  // and addResidual() returns false (the caller adds e to the gradient).
  virtual const at::Tensor& residual() const;
  virtual at::Tensor takeResidual() { return {}; }
  virtual bool addResidual(const at::Tensor& e) { return false; }
  // ||e||₂, 0 without memory.
  virtual double residualNorm() const { return 0.0; }

  // Which codec path this instance runs (compress/CodecPath.h); a decorator
  // forwards it to what it wraps.
  virtual void setCodecPath(CodecPath p) { codecPath_ = p; }
  CodecPath codecPath() const { return codecPath_; }

 protected:
  // True when aggregate()/encode()/decode() should run the CPU SIMD kernels
  // on x; false means the device-generic ATen implementation.
  bool fastPath(const at::Tensor& x) const { return takesFastPath(name(), codecPath_, x); }

 private:
  CodecPath codecPath_ = defaultCodecPath();
};

// Common argument checks for aggregate()/encode(): 1-D, float32, contiguous,
// CPU or CUDA, all finite. Throws UserError naming the compressor and the cause.
void checkGradient(const at::Tensor& x, const std::string& who);
// checkGradient without the finiteness scan, for kernels that fuse that scan
// into their own pass over x (compress/kernels/SimdKernels.h); they must then call
// requireFinite with its result before anything derived from x leaves them.
void checkGradientLayout(const at::Tensor& x, const std::string& who);
// Throws checkGradient's UserError for non-finite input unless `finite`.
void requireFinite(bool finite, const std::string& who);

// Throws UserError on every rank, naming each rank's size, unless all ranks
// hold d coordinates. One all-gather of an int64; compressors call it on their
// first aggregate() (and whenever d changes) because Gloo aborts the process,
// rather than throwing, when a collective's sizes differ across ranks.
void checkSameNumelAcrossRanks(int64_t d, Context& ctx, const std::string& who);
// checkSameNumelAcrossRanks once per bucket size: runs it only when d differs
// from *agreed (a compressor member, initially -1), then records d there.
void confirmNumelOnce(int64_t* agreed, int64_t d, Context& ctx, const std::string& who);

// The plan's floating-point sum over ranks: ctx.collective with a float sum
// reduction when set, else the engine's all-reduce (ctx.comm). `t` is 1-D and
// contiguous (float, double, half or bfloat16); it is not modified. Returns the
// sum in t's dtype, bit-identical on every rank. Adds the wall time to
// ctx.times->communicate and t's bytes to ctx.times->bytesSent.
at::Tensor allReduceSum(const at::Tensor& t, Context& ctx);

// Adds the wall time of its scope to one PhaseTimes field (no-op if times is
// null), e.g. `ScopedPhase s(ctx.times, &PhaseTimes::encode);`; with a
// device clock, marks the scope on the device instead.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes* times, double PhaseTimes::*field);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimes* times_;
  double PhaseTimes::*field_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace gradzip::compress
