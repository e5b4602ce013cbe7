// Implements sync/CommStream.h over c10's virtual device guard.
#include "sync/CommStream.h"

#include <c10/core/impl/VirtualGuardImpl.h>

namespace gradzip::trainer {
namespace {

c10::impl::VirtualGuardImpl guardFor(const c10::Device& device) { return c10::impl::VirtualGuardImpl(device.type()); }

}  // namespace

CommStream::CommStream(const c10::Device& device) {
  if (device.is_cuda()) stream_ = guardFor(device).getStreamFromGlobalPool(device, /*isHighPriority=*/false);
}

CommStream::Handover::Handover(const c10::Device& device) {
  if (device.is_cuda()) event_ = std::make_unique<c10::Event>(device.type());
}

void CommStream::Handover::produced(const c10::Device& device) {
  if (event_) event_->record(guardFor(device).getStream(device));
}

void CommStream::Handover::await(const c10::Device& device) const {
  // An event never recorded blocks nothing: the first step's buckets are
  // always marked before they are awaited.
  if (event_) event_->block(guardFor(device).getStream(device));
}

CommStream::Use::Use(const CommStream& s) {
  if (s.stream_) previous_ = guardFor(s.stream_->device()).exchangeStream(*s.stream_);
}

CommStream::Use::~Use() {
  if (previous_) guardFor(previous_->device()).exchangeStream(*previous_);
}

}  // namespace gradzip::trainer
