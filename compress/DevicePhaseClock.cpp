// Implements compress/DevicePhaseClock.h.
#include "compress/DevicePhaseClock.h"

#include "compress/Compressor.h"
#include "util/Error.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace gradzip::compress {
namespace {

std::unique_ptr<c10::Event> recordedNow(const c10::Device& device) {
  // BACKEND_DEFAULT: events that keep time (PyTorch's own default disables it).
  auto e = std::make_unique<c10::Event>(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  e->record(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
  return e;
}

}  // namespace

void DevicePhaseClock::begin(double PhaseTimes::*field) {
  open_.push_back(phases_.size());
  phases_.push_back({field, recordedNow(device_), nullptr});
}

void DevicePhaseClock::end() {
  GZ_ASSERT(!open_.empty(), "DevicePhaseClock: end() without begin()");
  phases_[open_.back()].stop = recordedNow(device_);
  open_.pop_back();
}

void DevicePhaseClock::addTo(PhaseTimes& times) {
  for (auto& p : phases_) {
    if (!p.stop) continue;
    p.stop->synchronize();
    times.*p.field += p.start->elapsedTime(*p.stop) / 1000.0;  // events count milliseconds
  }
  phases_.clear();
  open_.clear();
}

}  // namespace gradzip::compress
