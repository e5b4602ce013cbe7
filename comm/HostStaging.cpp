// Implements comm/HostStaging.h: host copies and the copy-back Work.
#include "comm/HostStaging.h"

#include <mutex>

namespace gradzip::comm {
namespace {

class CopyBackWork final : public Work::Impl {
 public:
  CopyBackWork(Work inner, std::vector<std::pair<at::Tensor, at::Tensor>> pairs)
      : inner_(std::move(inner)), pairs_(std::move(pairs)) {}

  void wait() override {
    inner_.wait();
    copyBackOnce();
  }

  bool isCompleted() override {
    if (!inner_.isCompleted()) return false;
    // A completed operation may still have failed: wait() rethrows that.
    wait();
    return true;
  }

 private:
  void copyBackOnce() {
    std::call_once(copied_, [this] {
      for (auto& [device, host] : pairs_) device.copy_(host);
    });
  }

  Work inner_;
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs_;
  std::once_flag copied_;
};

}  // namespace

at::Tensor hostCopy(const at::Tensor& t) { return t.is_cpu() ? t : t.to(at::kCPU).contiguous(); }

Work withCopyBack(Work inner, std::vector<std::pair<at::Tensor, at::Tensor>> deviceFromHost) {
  return Work(std::make_shared<CopyBackWork>(std::move(inner), std::move(deviceFromHost)));
}

}  // namespace gradzip::comm
