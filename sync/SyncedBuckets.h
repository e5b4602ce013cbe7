// SyncedBuckets: what the controller (controller/Controller.h) sees of a
// gradient synchronisation. Gradients travel in buckets, each under its own
// Plan (codec + collective); between steps the view reports each bucket's
// size, layout, last gradient, time split and compression statistics, and
// takes the few commands that steer the next steps: a plan per bucket, whether
// to measure compression, and the geometry to measure it in. Nothing here
// runs a step or touches checkpoints: that stays with whoever drives the
// training loop (GradSync and the trainer; a PyTorch DDP communication hook).
//
// Implementing it: report after each synchronised step, with every accessor
// valid between steps (a bucket index in [0, numBuckets())); apply setPlan
// from the next step on, and keep an error-feedback residual with its bucket
// across plan switches (sync/GradSync.h setPlan says how). The controller
// calls it from the training thread only, never during a step.
#pragma once

#include "compress/Compressor.h"
#include "sync/CompressionStats.h"
#include "sync/Plan.h"
#include "sync/SyncBreakdown.h"

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace gradzip::trainer {

class SyncedBuckets {
 public:
  virtual ~SyncedBuckets() = default;

  // --- Read-only, between steps.
  virtual int numBuckets() const = 0;
  virtual int64_t bucketNumel(int bucket) const = 0;
  // The bucket's parameter tensors within its flat gradient (shape-aware
  // codecs size their payload from it).
  virtual const std::vector<compress::TensorSlot>& bucketLayout(int bucket) const = 0;
  // The bucket's averaged gradient of the last step (float32, flat).
  virtual const torch::Tensor& bucketGradient(int bucket) const = 0;
  // With measuring on: this rank's own gradient of the bucket in the last
  // step, before compression and error feedback (undefined before the first
  // step).
  virtual const torch::Tensor& lastInput(int bucket) const = 0;
  // The bucket's share of the last step: encode, communicate and decode
  // seconds, its handover and the comm thread's busy seconds.
  virtual const SyncBreakdown& lastBreakdown(int bucket) const = 0;
  // With measuring on: the bucket's CompressionStats of the last step in the
  // geometry of setStatScale (the gradient's without one).
  virtual const CompressionStats& lastWeightedStats(int bucket) const = 0;
  // The bucket's s² per slot of its layout (measureCompression's weights), or
  // empty.
  virtual const std::vector<double>& statWeights(int bucket) const = 0;
  // Whether a bucket's sync can run while backward does; otherwise every sync
  // starts after backward and forward+backward does not depend on the plan.
  virtual bool overlapsBackward() const = 0;
  // Seconds from the last step's start to backward's end, on the clock of
  // the buckets' handover times.
  virtual double lastBackwardEnd() const = 0;
  virtual const Plan& plan(int bucket) const = 0;

  // --- Commands, between steps; each applies from the next step on.
  virtual void setPlan(int bucket, const Plan& plan) = 0;
  virtual void setPlan(const Plan& plan) = 0;  // every bucket
  // Measure every bucket's CompressionStats each step (lastWeightedStats,
  // lastInput); costs a few reductions over each bucket.
  virtual void setMeasureCompression(bool on) = 0;
  // The weighted geometry: scaleOf(param) is a tensor's update factor s, or
  // none for 1. A bucket none of whose tensors has one measures in the
  // gradient's geometry.
  virtual void setStatScale(const std::function<std::optional<double>(const torch::Tensor& param)>& scaleOf) = 0;
};

}  // namespace gradzip::trainer
