// Phase times of a compressor on a GPU. The host clock around an encode on
// CUDA tensors measures how long the kernels took to launch, not to run, so
// for CUDA buckets ScopedPhase records a pair of device events on the current
// stream instead, and the caller adds the device's elapsed times to the
// PhaseTimes once the bucket's work is done (sync/BucketSync.cpp). The
// controller's cost model then fits what the device spent in each phase. It
// uses c10's device-generic events, so compress/ needs no CUDA libraries.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <memory>
#include <vector>

namespace gradzip::compress {

struct PhaseTimes;

class DevicePhaseClock {
 public:
  explicit DevicePhaseClock(c10::Device device) : device_(device) {}

  // Marks the start and the end of one phase on the calling thread's current
  // stream of the device (ScopedPhase calls them); end() closes the phase
  // begun last that is still open, so scopes may nest, as on the host clock.
  void begin(double PhaseTimes::*field);
  void end();

  // Waits for every recorded phase to finish on the device and adds its
  // elapsed time, in seconds, to its field of `times`; forgets them.
  void addTo(PhaseTimes& times);

 private:
  struct Phase {
    double PhaseTimes::*field;
    std::unique_ptr<c10::Event> start, stop;
  };
  c10::Device device_;
  std::vector<Phase> phases_;
  std::vector<size_t> open_;  // indices into phases_, innermost last
};

}  // namespace gradzip::compress
