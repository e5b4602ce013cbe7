// Implements data/FashionMnist.h on top of the IDX reader.
#include "data/FashionMnist.h"

#include "data/Idx.h"
#include "util/Error.h"

#include <fmt/ranges.h>

#include <filesystem>

namespace gradzip::data {
namespace {

const std::vector<std::string> kClassNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                              "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

std::string findFile(const std::string& dir, const std::string& stem) {
  namespace fs = std::filesystem;
  for (const std::string& name : {stem + ".gz", stem}) {
    fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p)) return p.string();
  }
  GZ_CHECK(false,
           "{}: Fashion-MNIST file {}.gz not found (install Debian's dataset-fashion-mnist, or set "
           "data.path to a directory holding the four IDX files)",
           dir, stem);
  return {};
}

}  // namespace

ImageData loadFashionMnist(const std::string& dir, bool train) {
  std::string prefix = train ? "train" : "t10k";
  std::string imagesPath = findFile(dir, prefix + "-images-idx3-ubyte");
  std::string labelsPath = findFile(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = readIdx(imagesPath);
  IdxArray labels = readIdx(labelsPath);
  GZ_CHECK(images.dims.size() == 3, "{}: wrong dimensions {}: expected 3 ([images, rows, columns])", imagesPath,
           images.dims);
  GZ_CHECK(labels.dims.size() == 1, "{}: wrong dimensions {}: expected 1 ([labels])", labelsPath, labels.dims);
  GZ_CHECK(images.dims[0] == labels.dims[0], "wrong dimensions: {} holds {} images but {} holds {} labels",
           imagesPath, images.dims[0], labelsPath, labels.dims[0]);
  GZ_CHECK(images.dims[0] > 0, "{}: holds no images", imagesPath);

  ImageData out;
  out.source = imagesPath;
  out.images = images.data.unsqueeze(3).contiguous();  // [N,H,W] -> [N,H,W,1], no copy
  out.labels = labels.data.to(at::kLong);
  out.classNames = kClassNames;
  int64_t maxLabel = out.labels.max().item<int64_t>();
  if (maxLabel >= int64_t(kClassNames.size())) {
    int64_t at = (out.labels >= int64_t(kClassNames.size())).nonzero()[0][0].item<int64_t>();
    GZ_CHECK(false, "{}: label {} at index {} is outside [0, {})", labelsPath, out.labels[at].item<int64_t>(), at,
             kClassNames.size());
  }
  return out;
}

}  // namespace gradzip::data
