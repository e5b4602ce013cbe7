// Loader of Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): 70,000 28x28 grayscale
// images of 10 clothing classes in four IDX files, by default from Debian's
// dataset-fashion-mnist package in /usr/share/datasets/fashion-mnist. Works for
// any MNIST-layout directory (same file names, any image size).
#pragma once

#include "data/ImageData.h"

#include <string>

namespace gradzip::data {

// Debian's dataset-fashion-mnist install location.
inline constexpr const char* kFashionMnistDefaultPath = "/usr/share/datasets/fashion-mnist";

// Reads {train,t10k}-images-idx3-ubyte[.gz] and {train,t10k}-labels-idx1-ubyte[.gz]
// from `dir` (the .gz name is preferred). Throws UserError naming the file when a
// file is missing, corrupt, has the wrong dimensions (images must be [N,H,W],
// labels [N] with the same N) or holds a label outside [0, 10).
ImageData loadFashionMnist(const std::string& dir, bool train);

}  // namespace gradzip::data
