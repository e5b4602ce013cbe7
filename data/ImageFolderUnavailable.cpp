// data/ImageFolder.h in a build without OpenCV's imgcodecs
// (GRADZIP_IMAGE_FOLDER=OFF, or AUTO where it was not found; cmake/OpenCV.cmake):
// every entry point refuses with an error that names the build, so a config
// asking for an image folder fails at start-up instead of loading nothing.
#include "data/ImageFolder.h"

#include "util/Error.h"

namespace gradzip::data {
namespace {

[[noreturn]] void unavailable(const std::string& what) {
  throw UserError(fmt::format("{}: image-folder datasets need OpenCV's imgcodecs, which this gradzip was built "
                              "without (configure with GRADZIP_IMAGE_FOLDER=ON where libopencv-dev is installed)",
                              what));
}

}  // namespace

const std::vector<std::string>& imageExtensions() {
  static const std::vector<std::string> none;
  return none;
}

ImageData loadImageFolder(const std::string& root, const ImageFolderOptions&) { unavailable(root); }

void decodeImage(std::string_view, const std::string& name, const ImageFolderOptions&, uint8_t*) { unavailable(name); }

}  // namespace gradzip::data
