// Fuzz target for the image-folder decode path (data::decodeImage of
// data/ImageFolder.h): encoded bytes of any format OpenCV recognises, decoded
// with cv::imdecode, converted and resized into a fixed-size slot of the output
// tensor. The first input byte picks the options: bit 0 RGB (set) or grayscale,
// bits 1-2 the output size (1x1, 3x5, 8x8 or 32x32). A bad image must give a
// UserError naming the file, never a crash, an OpenCV exception or an output
// allocation sized by a corrupt header beyond kMaxDecodedImageBytes. OpenCV's
// codec libraries are not instrumented, so this covers our handling of what they
// return rather than their own parsing.
#include "data/ImageFolder.h"
#include "tests/fuzz/FuzzSupport.h"

#include <opencv2/core/utils/logger.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // imdecode logs every header it cannot read; the fuzzer would print little else.
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradzip;
  if (size == 0) return 0;
  static const int64_t kSizes[4][2] = {{1, 1}, {3, 5}, {8, 8}, {32, 32}};
  data::ImageFolderOptions o;
  o.channels = (data[0] & 1) ? 3 : 1;
  o.height = kSizes[(data[0] >> 1) & 3][0];
  o.width = kSizes[(data[0] >> 1) & 3][1];
  // Exactly the slot size, so ASan sees any write past it.
  std::vector<uint8_t> dst(size_t(o.height * o.width * o.channels));
  const std::string name = "fuzz/class/image.png";
  fuzz::expectOnlyUserErrors(name, [&] {
    data::decodeImage(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), name, o, dst.data());
  });
  return 0;
}
