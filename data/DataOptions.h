// The typed options of the `data:` section of a run config (STYLE.md §5):
// which dataset, where it lives, batch size, augmentation, normalisation, the
// text/MLM settings, the synthetic dataset's sizes and the prefetching threads. fromYaml fills defaults that
// depend on the dataset (path, augmentation, mean/std), so toYaml writes the
// effective configuration. See data/README.md for every key.
#pragma once

#include "util/Yaml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gradzip::data {

struct TextOptions {
  std::vector<std::string> corpus;  // files/directories; empty = linux-doc (resolved by fromYaml)
  std::vector<std::string> extensions;  // file name suffixes collected from directories
  int64_t vocabSize = 8000;
  std::string modelType = "unigram";  // unigram | bpe
  double sampleMb = 4.0;              // tokenizer training sample bound, in MB
  int64_t seqLen = 128;
  double maskProb = 0.15;
  std::string cacheDir;               // "" = $XDG_CACHE_HOME/gradzip or ~/.cache/gradzip
};

// dataset: synthetic (data/SyntheticImageDataset.h); the image shape comes
// from image_size and channels.
struct SyntheticOptions {
  int64_t trainSize = 50000;
  int64_t testSize = 10000;  // 0 = no test split
  int64_t numClasses = 10;
  uint64_t seed = 0;  // data seed, apart from run.seed: every run sees the same examples
};

struct DataOptions {
  std::string dataset = "fashion_mnist";  // fashion_mnist | cifar10 | image_folder | text_mlm | synthetic
  std::string path;                       // dataset location; default per dataset
  int64_t batchSize = 128;                // per rank
  int64_t evalBatchSize = 128;            // per rank; defaults to batchSize
  bool shuffle = true;
  bool dropLast = true;                   // training split only; evaluation never drops
  int64_t cropPadding = 0;                // augment.crop_padding
  bool flip = false;                      // augment.flip
  std::vector<double> mean, std;          // normalise.{mean,std}, per channel on [0,1] pixels
  int64_t imageHeight = 32, imageWidth = 32;  // image_folder, synthetic: image_size [H, W]
  int64_t channels = 3;                   // image_folder, synthetic: 1 or 3
  TextOptions text;
  SyntheticOptions synthetic;
  int prefetch = 2;                       // batches built ahead of the training loop
  int workers = 1;                        // producer threads (also decoding/encoding threads)

  static const std::vector<std::string>& datasetNames();
  // Reads the `data:` mapping; unknown keys and bad values are ConfigErrors
  // naming file, line and key.
  static DataOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

}  // namespace gradzip::data
