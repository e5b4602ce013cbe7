// The one explicit dataset factory of data/ (STYLE.md §4): DataOptions in,
// train and test Datasets out, plus the matching DataLoader options. Unknown
// dataset names fail with the list of known ones.
#pragma once

#include "data/DataLoader.h"
#include "data/DataOptions.h"
#include "data/Dataset.h"

#include <memory>

namespace gradzip::data {

struct Datasets {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> test;  // null when the source has no held-out split
};

// Loads both splits: fashion_mnist (train/t10k), cifar10 (data_batch_*/test_batch),
// image_folder (path/train + path/val or path/test when present, else path alone
// with no test split), text_mlm (tokenizer trained or loaded from the cache,
// corpus train/valid split; see TextCorpus), synthetic (generated, train and
// test splits of the configured sizes; no test split for test_size 0). Throws
// UserError on missing or bad data.
Datasets makeDatasets(const DataOptions& options);

// Loader settings for the training split (shuffled, drop_last as configured) and
// the evaluation split (in order, nothing dropped).
LoaderOptions trainLoaderOptions(const DataOptions& options, uint64_t seed);
LoaderOptions evalLoaderOptions(const DataOptions& options, uint64_t seed);

}  // namespace gradzip::data
