// Raw labelled images as every image reader returns them: uint8 pixels in
// OpenCV's interleaved layout [N,H,W,C] (so one image is a cv::Mat header over
// the tensor's memory, without a copy) and int64 class labels. ImageDataset turns
// these into augmented, normalised float batches.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace gradzip::data {

struct ImageData {
  at::Tensor images;                    // uint8 [N,H,W,C], contiguous; C is 1 or 3 (RGB order)
  at::Tensor labels;                    // int64 [N], each in [0, classNames.size())
  std::vector<std::string> classNames;  // label -> name
  std::string source;                   // where it was read from, for messages

  int64_t size() const { return images.defined() ? images.size(0) : 0; }
  int64_t height() const { return images.size(1); }
  int64_t width() const { return images.size(2); }
  int64_t channels() const { return images.size(3); }
};

// Checks the invariants above; a violation is a bug in a reader (GZ_ASSERT).
void checkImageData(const ImageData& d);

}  // namespace gradzip::data
