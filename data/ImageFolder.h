// Loader of an image-folder dataset (the torchvision ImageFolder layout):
// root/<class name>/<image file>, labels assigned by sorted class name. Every
// image OpenCV can decode (png, jpg, bmp, tiff, webp, ppm, ...) is read with
// cv::imread, converted to RGB (or grayscale) and resized to one configured size,
// so the whole set fits one uint8 [N,H,W,C] tensor. Decoding runs on `workers`
// threads.
#pragma once

#include "data/ImageData.h"

#include <string>
#include <vector>

namespace gradzip::data {

struct ImageFolderOptions {
  int64_t height = 32;
  int64_t width = 32;
  int64_t channels = 3;  // 3: RGB, 1: grayscale
  int workers = 2;       // decoding threads
  // When non-empty, labels follow this list (e.g. the training split's classes)
  // and a class directory not in it is an error; otherwise the sorted
  // subdirectory names of root.
  std::vector<std::string> classNames;
};

// File name extensions (lower case) treated as images.
const std::vector<std::string>& imageExtensions();

// Reads root/<class>/<file> for every image extension. Throws UserError naming
// the path for a missing root, a root without class directories or images, an
// unknown class (when classNames is given) and an image OpenCV cannot decode.
ImageData loadImageFolder(const std::string& root, const ImageFolderOptions& options);

}  // namespace gradzip::data
