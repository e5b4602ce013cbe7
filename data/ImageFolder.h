// Loader of an image-folder dataset (the torchvision ImageFolder layout):
// root/<class name>/<image file>, labels assigned by sorted class name. Every
// image OpenCV can decode (png, jpg, bmp, tiff, webp, ppm, ...) is read into
// memory, decoded with cv::imdecode, converted to RGB (or grayscale) and resized
// to one configured size, so the whole set fits one uint8 [N,H,W,C] tensor.
// Decoding runs on `workers` threads.
#pragma once

#include "data/ImageData.h"

#include <cstdint>
#include <string>
#include <string_view>
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

// The largest decoded image (bytes) decodeImage accepts: 256 MiB, e.g. 9459x9459
// RGB. OpenCV sizes its output from the file's header and allocates it before
// reading any pixel, so without this bound a corrupt 50-byte header could demand
// 3 GiB (OpenCV's own limit is 2^30 pixels).
inline constexpr int64_t kMaxDecodedImageBytes = int64_t(1) << 28;

// File name extensions (lower case) treated as images.
const std::vector<std::string>& imageExtensions();

// Reads root/<class>/<file> for every image extension. Throws UserError naming
// the path for a missing root, a root without class directories or images, an
// unknown class (when classNames is given) and an image OpenCV cannot decode.
ImageData loadImageFolder(const std::string& root, const ImageFolderOptions& options);

// Decodes one encoded image (any format OpenCV reads, recognised by content) into
// `dst`: options.height x options.width x options.channels bytes, RGB or
// grayscale, resized. `name` (the file) is used in messages. Throws UserError
// naming it for empty or undecodable data and for a header that declares an image
// of more than kMaxDecodedImageBytes (checked before anything that size is
// allocated).
void decodeImage(std::string_view bytes, const std::string& name, const ImageFolderOptions& options,
                 uint8_t* dst);

}  // namespace gradzip::data
