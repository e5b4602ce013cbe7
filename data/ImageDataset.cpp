// Implements data/ImageDataset.h.
#include "data/ImageDataset.h"

#include "util/Error.h"

namespace gradzip::data {

ImageDataset::ImageDataset(std::string name, ImageData data, TransformOptions transform, bool augment)
    : name_(std::move(name)), data_(std::move(data)), transform_(std::move(transform), data_.channels()),
      augment_(augment) {
  checkImageData(data_);
}

Batch ImageDataset::getBatch(const std::vector<int64_t>& indices, Rng& rng) const {
  GZ_CHECK(!indices.empty(), "{}: empty batch requested", name_);
  for (int64_t i : indices)
    GZ_CHECK(i >= 0 && i < size(), "{}: example index {} out of range [0, {})", name_, i, size());
  at::Tensor idx = at::tensor(indices, at::kLong);
  Batch b;
  b.input = transform_.apply(data_.images.index_select(0, idx), rng, augment_);
  b.target = data_.labels.index_select(0, idx);
  return b;
}

bool ImageDataset::augmenting() const {
  return augment_ && (transform_.options().cropPadding > 0 || transform_.options().flip);
}

DatasetInfo ImageDataset::info() const {
  DatasetInfo i;
  i.kind = "image";
  i.numClasses = int64_t(data_.classNames.size());
  i.channels = data_.channels();
  i.height = data_.height();
  i.width = data_.width();
  return i;
}

std::string ImageDataset::describe() const {
  return fmt::format("{}: {} images {}x{}x{}, {} classes, from {}{}", name_, size(), data_.channels(),
                     data_.height(), data_.width(), data_.classNames.size(), data_.source,
                     augmenting() ? fmt::format(" (augmented: crop padding {}, flip {})", transform_.options().cropPadding,
                                                transform_.options().flip)
                                  : "");
}

}  // namespace gradzip::data
