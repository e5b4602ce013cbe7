// The Dataset of labelled images: raw uint8 pixels from any image reader
// (Fashion-MNIST, CIFAR-10, image folder) kept in memory, converted per batch to
// normalised float tensors with optional augmentation (data/Transforms.h).
#pragma once

#include "data/Dataset.h"
#include "data/ImageData.h"
#include "data/Transforms.h"

#include <string>

namespace gradzip::data {

class ImageDataset : public Dataset {
 public:
  // `name` labels logs ("cifar10 train"). `augment` enables the random crop/flip
  // of `transform` (training split); normalisation always applies.
  ImageDataset(std::string name, ImageData data, TransformOptions transform, bool augment);

  int64_t size() const override { return data_.size(); }
  // input float [B,C,H,W], target int64 [B].
  Batch getBatch(const std::vector<int64_t>& indices, Rng& rng) const override;
  DatasetInfo info() const override;
  std::string describe() const override;

  const ImageData& data() const { return data_; }
  // True when batches are randomly cropped or flipped.
  bool augmenting() const;

 private:
  std::string name_;
  ImageData data_;
  ImageTransform transform_;
  bool augment_;
};

}  // namespace gradzip::data
