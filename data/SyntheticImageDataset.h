// A labelled image dataset with no files (`data: {dataset: synthetic}`): each
// example's uint8 pixels and label are a pure function of (seed, split,
// index), generated when a batch asks for them, so every rank and every run
// see the same data without storing it, and a GPU benchmark needs no data set
// on the machine. Pixels are a per-class pattern, constant over 8x8 blocks,
// plus uniform per-pixel noise, so a model can learn the labels; the point is
// throughput, not a hard task. Batches go through ImageTransform like every
// other image dataset's (normalisation, optional crop and flip).
#pragma once

#include "data/Dataset.h"
#include "data/Transforms.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::data {

struct SyntheticImageSpec {
  int64_t size = 0;  // examples in this split
  int64_t height = 32, width = 32, channels = 3;
  int64_t numClasses = 10;
  uint64_t seed = 0;   // the data seed; not the run seed, so runs differing in it see the same data
  uint64_t split = 0;  // 0 = train, 1 = test: different examples of the same classes
};

class SyntheticImageDataset : public Dataset {
 public:
  // Side of the square blocks over which a class pattern is constant.
  static constexpr int64_t kBlock = 8;
  // Pixel noise is uniform on [-kNoise, kNoise) before clamping to [0, 255].
  static constexpr int kNoise = 64;

  // `name` labels logs ("synthetic train"). `augment` enables the random
  // crop/flip of `transform`; normalisation always applies. UserError for a
  // size, shape or class count out of range.
  SyntheticImageDataset(std::string name, SyntheticImageSpec spec, TransformOptions transform, bool augment);

  int64_t size() const override { return spec_.size; }
  // input float [B,C,H,W], target int64 [B].
  Batch getBatch(const std::vector<int64_t>& indices, Rng& rng) const override;
  DatasetInfo info() const override;
  std::string describe() const override;

  // The raw examples before the transform: uint8 [B,H,W,C] (the ImageData
  // layout) and their labels in [0, numClasses). UserError for an index out of
  // range.
  at::Tensor pixels(const std::vector<int64_t>& indices) const;
  int64_t label(int64_t index) const;

 private:
  void checkIndices(const std::vector<int64_t>& indices) const;
  // Writes example `index` (H*W*C bytes, [H,W,C]) to `out`.
  void fill(int64_t index, uint8_t* out) const;

  std::string name_;
  SyntheticImageSpec spec_;
  ImageTransform transform_;
  bool augment_;
  int64_t blocksH_, blocksW_;
  std::vector<uint8_t> classMeans_;  // [numClasses, blocksH_, blocksW_, C]
};

}  // namespace gradzip::data
