// The in-memory dataset interface of data/: a dataset holds its raw examples in
// memory (images as uint8, text as packed token ids) and turns a list of indices
// into one ready-to-train batch, applying any randomness (augmentation, MLM
// masking) from the caller's Rng so batches are reproducible. Implementations:
// ImageDataset (Fashion-MNIST, CIFAR-10, image folders) and MlmDataset (text).
//
// Adding a dataset: write a reader producing ImageData (data/ImageData.h) or a
// new Dataset subclass, then add a case to data/Factory.cpp and data/README.md.
#pragma once

#include "data/Rng.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::data {

// One batch. Images: input float [B,C,H,W] (normalised), target int64 [B] class ids.
// MLM: input int64 [B,T] token ids after masking, target int64 [B,T] with the
// original id at masked positions and kIgnoreIndex elsewhere.
struct Batch {
  at::Tensor input;
  at::Tensor target;
  int64_t size() const { return input.defined() ? input.size(0) : 0; }
};

// Label value the loss must ignore (torch's cross_entropy default ignore_index).
inline constexpr int64_t kIgnoreIndex = -100;

// What a model needs to know about the data to build itself.
struct DatasetInfo {
  std::string kind;         // "image" or "mlm"
  int64_t numClasses = 0;   // image: number of classes
  int64_t channels = 0;     // image: C of the [B,C,H,W] input
  int64_t height = 0;       // image: H
  int64_t width = 0;        // image: W
  int64_t vocabSize = 0;    // mlm: V; ids are in [0, V)
  int64_t seqLen = 0;       // mlm: T
  int64_t maskId = -1;      // mlm: the [MASK] token id
  int64_t padId = -1;       // mlm: the padding id
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Number of examples; indices passed to getBatch lie in [0, size()).
  virtual int64_t size() const = 0;
  // Builds the batch of examples `indices` (in that order). Any random choice is
  // drawn from `rng`, so equal (indices, rng state) give bit-identical batches.
  // Thread-safe: concurrent calls with distinct Rngs are allowed (the Prefetcher
  // runs several). Throws UserError for an index out of range.
  virtual Batch getBatch(const std::vector<int64_t>& indices, Rng& rng) const = 0;
  virtual DatasetInfo info() const = 0;
  // One line for logs, e.g. "fashion_mnist train: 60000 images 1x28x28, 10 classes".
  virtual std::string describe() const = 0;
};

}  // namespace gradzip::data
