// Implements data/SyntheticImageDataset.h: SplitMix64 streams keyed by
// (seed, split, index) give each example's label and noise bytes, and one
// stream per class gives its block pattern, built once at construction.
#include "data/SyntheticImageDataset.h"

#include "util/Error.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <initializer_list>

namespace gradzip::data {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
// Stream tags, so the label, the noise and the class patterns never share a stream.
constexpr uint64_t kLabelTag = 1, kPixelTag = 2, kPatternTag = 3;

// The key fold of Rng::derive, without seeding an engine: examples are
// generated per batch, and a counter-based stream costs one mix per 8 bytes.
uint64_t hashKey(std::initializer_list<uint64_t> key) {
  uint64_t h = 0x6a09e667f3bcc908ULL;
  for (uint64_t k : key) h = Rng::mix(h ^ Rng::mix(k + kGolden));
  return h;
}

// Bytes of the SplitMix64 stream with state `key`, eight per mix, lowest first.
class ByteStream {
 public:
  explicit ByteStream(uint64_t key) : key_(key) {}
  uint8_t next() {
    if (left_ == 0) {
      bits_ = Rng::mix(key_ + kGolden * counter_++);
      left_ = 8;
    }
    const auto b = static_cast<uint8_t>(bits_);
    bits_ >>= 8;
    --left_;
    return b;
  }

 private:
  uint64_t key_, bits_ = 0, counter_ = 0;
  int left_ = 0;
};

}  // namespace

SyntheticImageDataset::SyntheticImageDataset(std::string name, SyntheticImageSpec spec, TransformOptions transform,
                                             bool augment)
    : name_(std::move(name)), spec_(spec), transform_(std::move(transform), spec.channels), augment_(augment) {
  GZ_CHECK(spec_.size >= 1, "{}: size must be >= 1, got {}", name_, spec_.size);
  GZ_CHECK(spec_.height >= 1 && spec_.width >= 1, "{}: image size must be positive, got {}x{}", name_, spec_.height,
           spec_.width);
  GZ_CHECK(spec_.channels == 1 || spec_.channels == 3, "{}: channels must be 1 or 3, got {}", name_, spec_.channels);
  GZ_CHECK(spec_.numClasses >= 2, "{}: num_classes must be >= 2, got {}", name_, spec_.numClasses);
  blocksH_ = (spec_.height + kBlock - 1) / kBlock;
  blocksW_ = (spec_.width + kBlock - 1) / kBlock;
  const int64_t perClass = blocksH_ * blocksW_ * spec_.channels;
  classMeans_.resize(static_cast<size_t>(spec_.numClasses * perClass));
  for (int64_t c = 0; c < spec_.numClasses; ++c) {
    ByteStream s(hashKey({spec_.seed, kPatternTag, static_cast<uint64_t>(c)}));
    std::generate_n(classMeans_.begin() + c * perClass, perClass, [&] { return s.next(); });
  }
}

int64_t SyntheticImageDataset::label(int64_t index) const {
  checkIndices({index});
  return static_cast<int64_t>(hashKey({spec_.seed, spec_.split, static_cast<uint64_t>(index), kLabelTag}) %
                              static_cast<uint64_t>(spec_.numClasses));
}

void SyntheticImageDataset::fill(int64_t index, uint8_t* out) const {
  // The noise stream first, eight bytes per mix, straight into `out` (on a
  // little-endian machine the bytes ByteStream would give, in its order); then
  // one pass adds the class pattern. Both loops are branch-free per byte.
  static_assert(std::endian::native == std::endian::little, "noise bytes are copied from words in memory order");
  const int64_t C = spec_.channels, bytes = spec_.height * spec_.width * C;
  const uint64_t key = hashKey({spec_.seed, spec_.split, static_cast<uint64_t>(index), kPixelTag});
  for (int64_t k = 0; 8 * k < bytes; ++k) {
    const uint64_t r = Rng::mix(key + kGolden * static_cast<uint64_t>(k));
    std::memcpy(out + 8 * k, &r, static_cast<size_t>(std::min<int64_t>(8, bytes - 8 * k)));
  }
  const uint8_t* means = classMeans_.data() + label(index) * blocksH_ * blocksW_ * C;
  for (int64_t y = 0; y < spec_.height; ++y) {
    const uint8_t* row = means + (y / kBlock) * blocksW_ * C;
    for (int64_t x = 0; x < spec_.width; ++x) {
      const uint8_t* m = row + (x / kBlock) * C;
      for (int64_t c = 0; c < C; ++c, ++out) {
        // *out >> 1 is uniform on [0, 128), so v is m + U[-64, 64).
        const int v = int(m[c]) + int(*out >> 1) - kNoise;
        *out = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
}

void SyntheticImageDataset::checkIndices(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices)
    GZ_CHECK(i >= 0 && i < size(), "{}: example index {} out of range [0, {})", name_, i, size());
}

at::Tensor SyntheticImageDataset::pixels(const std::vector<int64_t>& indices) const {
  checkIndices(indices);
  at::Tensor images =
      at::empty({int64_t(indices.size()), spec_.height, spec_.width, spec_.channels}, at::kByte);
  const int64_t bytes = spec_.height * spec_.width * spec_.channels;
  uint8_t* p = images.data_ptr<uint8_t>();
  for (size_t b = 0; b < indices.size(); ++b) fill(indices[b], p + int64_t(b) * bytes);
  return images;
}

Batch SyntheticImageDataset::getBatch(const std::vector<int64_t>& indices, Rng& rng) const {
  GZ_CHECK(!indices.empty(), "{}: empty batch requested", name_);
  Batch b;
  b.input = transform_.apply(pixels(indices), rng, augment_);
  std::vector<int64_t> labels;
  labels.reserve(indices.size());
  for (int64_t i : indices) labels.push_back(label(i));
  b.target = at::tensor(labels, at::kLong);
  return b;
}

DatasetInfo SyntheticImageDataset::info() const {
  DatasetInfo i;
  i.kind = "image";
  i.numClasses = spec_.numClasses;
  i.channels = spec_.channels;
  i.height = spec_.height;
  i.width = spec_.width;
  return i;
}

std::string SyntheticImageDataset::describe() const {
  const bool augmenting = augment_ && (transform_.options().cropPadding > 0 || transform_.options().flip);
  return fmt::format("{}: {} images {}x{}x{}, {} classes, generated from data seed {}{}", name_, size(),
                     spec_.channels, spec_.height, spec_.width, spec_.numClasses, spec_.seed,
                     augmenting ? fmt::format(" (augmented: crop padding {}, flip {})",
                                              transform_.options().cropPadding, transform_.options().flip)
                                : "");
}

}  // namespace gradzip::data
