// The communication thread's own CUDA stream, and the events that order it
// against the stream backward runs on: a bucket's compression and collectives
// start only after the copies of its gradients into the bucket, and the mean
// is copied back into the gradients only after they finish, while the rest of
// backward keeps running. For CPU buckets every call does nothing. It uses
// c10's device-generic stream and event interface, so sync/ needs no CUDA
// headers or libraries: the implementation is the one libtorch_cuda registers
// when the program loads it.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <memory>
#include <optional>

namespace gradzip::trainer {

class CommStream {
 public:
  // Active for a CUDA device: takes a stream from the device's pool.
  explicit CommStream(const c10::Device& device);
  bool active() const { return stream_.has_value(); }

  // One hand-over of a bucket between the two threads; reused every step.
  class Handover {
   public:
    Handover() = default;  // the CPU's: does nothing
    explicit Handover(const c10::Device& device);
    // On the producing thread, after its copies into the bucket: marks its
    // current stream's position.
    void produced(const c10::Device& device);
    // On the consuming thread, before it reads what the other side wrote:
    // its current stream waits for the last mark.
    void await(const c10::Device& device) const;

   private:
    std::unique_ptr<c10::Event> event_;  // null for the CPU
  };

  // Makes the comm stream current on the calling thread (the comm thread)
  // for its lifetime; no-op when inactive.
  class Use {
   public:
    explicit Use(const CommStream& s);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    std::optional<c10::Stream> previous_;
  };

 private:
  std::optional<c10::Stream> stream_;
};

}  // namespace gradzip::trainer
