// Implements data/ImageFolder.h: list files in a deterministic order, then decode
// and resize them in parallel straight into the output tensor; bound what a
// corrupt image header can make OpenCV allocate.
#include "data/ImageFolder.h"

#include "util/Error.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

namespace gradzip::data {
namespace {

namespace fs = std::filesystem;

struct Item {
  std::string path;
  int64_t label;
};

bool isImage(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto& exts = imageExtensions();
  return std::find(exts.begin(), exts.end(), ext) != exts.end();
}

// The decoded-size bound of decodeImage. OpenCV allocates its output through the
// allocator of the cv::Mat passed to cv::imdecode, but Mat::create falls back to
// the default allocator when a custom one throws, so a bound that holds has to be
// the default allocator. This one is installed once, at static initialisation
// (before any thread runs), and only forwards to OpenCV's standard allocator,
// except on a thread inside decodeImage, where a single allocation above the
// bound throws ImageTooLarge instead.
struct ImageTooLarge {
  double bytes;
};

thread_local size_t tDecodeLimit = 0;  // 0: no bound on this thread

class BoundedMatAllocator final : public cv::MatAllocator {
 public:
  cv::UMatData* allocate(int dims, const int* sizes, int type, void* data, size_t* step, cv::AccessFlag flags,
                         cv::UMatUsageFlags usage) const override {
    if (tDecodeLimit != 0 && data == nullptr) {
      // In double: exact far past the limit, and it cannot overflow.
      double bytes = CV_ELEM_SIZE(type);
      for (int i = 0; i < dims; ++i) bytes *= std::max(sizes[i], 0);
      if (bytes > double(tDecodeLimit)) throw ImageTooLarge{bytes};
    }
    return std_->allocate(dims, sizes, type, data, step, flags, usage);
  }
  bool allocate(cv::UMatData* data, cv::AccessFlag flags, cv::UMatUsageFlags usage) const override {
    return std_->allocate(data, flags, usage);
  }
  // Not reached for data allocated above (the standard allocator owns it), kept for completeness.
  void deallocate(cv::UMatData* data) const override { std_->deallocate(data); }

 private:
  cv::MatAllocator* std_ = cv::Mat::getStdAllocator();
};

// Never destroyed: cv::Mat may allocate through it until the process ends.
const bool kBoundedAllocatorInstalled = [] {
  cv::Mat::setDefaultAllocator(new BoundedMatAllocator);
  return true;
}();

class DecodeLimit {
 public:
  explicit DecodeLimit(size_t bytes) { tDecodeLimit = bytes; }
  ~DecodeLimit() { tDecodeLimit = 0; }
  DecodeLimit(const DecodeLimit&) = delete;
  DecodeLimit& operator=(const DecodeLimit&) = delete;
};

std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GZ_CHECK(in.good(), "{}: cannot open image: {}", path, std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  GZ_CHECK(!in.bad(), "{}: cannot read image: {}", path, std::strerror(errno));
  return bytes;
}

}  // namespace

void decodeImage(std::string_view bytes, const std::string& name, const ImageFolderOptions& o, uint8_t* dst) {
  GZ_CHECK(!bytes.empty(), "{}: cannot decode image: the file is empty", name);
  GZ_CHECK(bytes.size() <= size_t(INT_MAX), "{}: cannot decode image: {} bytes, more than the 2 GiB OpenCV decodes",
           name, bytes.size());
  cv::Mat img;
  {
    GZ_ASSERT(kBoundedAllocatorInstalled);
    DecodeLimit limit{size_t(kMaxDecodedImageBytes)};
    // A header over the caller's bytes (imdecode only reads them).
    const cv::Mat buf(1, int(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    try {
      img = cv::imdecode(buf, o.channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
    } catch (const ImageTooLarge& e) {
      GZ_CHECK(false, "{}: cannot decode image: its header declares {:.0f} MiB of pixels, more than the {} MiB "
               "limit for one image (corrupt header, or an image far larger than a dataset needs)",
               name, e.bytes / double(1 << 20), kMaxDecodedImageBytes >> 20);
    } catch (const cv::Exception& e) {
      // OpenCV's own header checks (e.g. width over 2^20) throw past imdecode.
      GZ_CHECK(false, "{}: cannot decode image: {}", name, e.err);
    }
  }
  GZ_CHECK(!img.empty(), "{}: cannot decode image (corrupt, truncated or not a format OpenCV reads)", name);
  if (o.channels == 3) cv::cvtColor(img, img, cv::COLOR_BGR2RGB);
  cv::Mat out(int(o.height), int(o.width), o.channels == 1 ? CV_8UC1 : CV_8UC3, dst);
  // INTER_AREA averages when shrinking (no aliasing); INTER_LINEAR when enlarging.
  bool shrink = img.rows > o.height || img.cols > o.width;
  cv::resize(img, out, out.size(), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  GZ_ASSERT(out.data == dst, "cv::resize reallocated the destination");
}

const std::vector<std::string>& imageExtensions() {
  static const std::vector<std::string> exts = {".png", ".jpg", ".jpeg", ".bmp", ".tif",
                                                ".tiff", ".webp", ".ppm", ".pgm", ".pbm"};
  return exts;
}

ImageData loadImageFolder(const std::string& root, const ImageFolderOptions& o) {
  GZ_CHECK(fs::is_directory(root), "{}: image folder not found (expected root/<class name>/<image files>)", root);
  GZ_CHECK(o.channels == 1 || o.channels == 3, "image folder: channels must be 1 or 3, got {}", o.channels);
  GZ_CHECK(o.height > 0 && o.width > 0, "image folder: image size must be positive, got {}x{}", o.height, o.width);

  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) dirs.push_back(e.path().filename().string());
  std::sort(dirs.begin(), dirs.end());
  GZ_CHECK(!dirs.empty(), "{}: no class directories (expected root/<class name>/<image files>)", root);
  std::vector<std::string> classes = o.classNames.empty() ? dirs : o.classNames;

  std::vector<Item> items;
  for (const auto& d : dirs) {
    auto it = std::find(classes.begin(), classes.end(), d);
    GZ_CHECK(it != classes.end(), "{}: class directory '{}' is not one of the {} training classes", root, d,
             classes.size());
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(root) / d))
      if (e.is_regular_file() && isImage(e.path())) files.push_back(e.path().string());
    if (files.empty()) spdlog::warn("{}: class directory '{}' holds no images", root, d);
    std::sort(files.begin(), files.end());
    for (auto& f : files) items.push_back({std::move(f), int64_t(it - classes.begin())});
  }
  GZ_CHECK(!items.empty(), "{}: no images found (extensions: {})", root, fmt::join(imageExtensions(), " "));

  auto n = int64_t(items.size());
  ImageData out;
  out.source = root;
  out.classNames = classes;
  out.images = at::empty({n, o.height, o.width, o.channels}, at::kByte);
  out.labels = at::empty({n}, at::kLong);
  uint8_t* pixels = out.images.data_ptr<uint8_t>();
  int64_t* labels = out.labels.data_ptr<int64_t>();
  const int64_t imageBytes = o.height * o.width * o.channels;

  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::exception_ptr firstError;
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      try {
        const Item& item = items[size_t(i)];
        decodeImage(readBytes(item.path), item.path, o, pixels + i * imageBytes);
        labels[i] = items[size_t(i)].label;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!firstError) firstError = std::current_exception();
        next = n;  // stop the other workers early
      }
    }
  };
  int threads = std::clamp<int>(o.workers, 1, int(std::max<int64_t>(1, n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (firstError) std::rethrow_exception(firstError);
  return out;
}

}  // namespace gradzip::data
