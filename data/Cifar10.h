// Loader of CIFAR-10 (Krizhevsky 2009) in its binary version: data_batch_1.bin
// .. data_batch_5.bin (50,000 training images) and test_batch.bin (10,000), each
// a sequence of 3073-byte records: one label byte in [0, 10), then the 32x32 red,
// green and blue planes, row-major. Users download it themselves; it is not in
// Debian.
#pragma once

#include "data/ImageData.h"

#include <string>

namespace gradzip::data {

inline constexpr int64_t kCifarRecordBytes = 1 + 3 * 32 * 32;

// Reads the training or test split from `dir`, which is either the extracted
// `cifar-10-batches-bin` directory or its parent. Throws UserError naming the
// file for a missing file (with where to get CIFAR-10), a size that is not a
// whole number of records ("truncated at byte N") or a label >= 10.
ImageData loadCifar10(const std::string& dir, bool train);

}  // namespace gradzip::data
