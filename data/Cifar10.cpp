// Implements data/Cifar10.h: read every record file into one [N,3073] byte
// tensor, then split labels from pixels and reorder planes to [N,H,W,C].
#include "data/Cifar10.h"

#include "util/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gradzip::data {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kClassNames = {"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};

std::string resolveDir(const std::string& dir) {
  if (fs::is_regular_file(fs::path(dir) / "test_batch.bin") ||
      fs::is_regular_file(fs::path(dir) / "data_batch_1.bin"))
    return dir;
  fs::path nested = fs::path(dir) / "cifar-10-batches-bin";
  if (fs::is_directory(nested)) return nested.string();
  return dir;
}

// Appends the records of `path` to `bytes` (already holding `records` records).
void readRecords(const std::string& path, std::vector<uint8_t>& bytes) {
  GZ_CHECK(fs::is_regular_file(path),
           "{}: CIFAR-10 file not found; download the binary version from "
           "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz, extract it and set data.path to the "
           "cifar-10-batches-bin directory",
           path);
  auto size = static_cast<int64_t>(fs::file_size(path));
  GZ_CHECK(size > 0, "{}: empty file (expected {}-byte records)", path, kCifarRecordBytes);
  GZ_CHECK(size % kCifarRecordBytes == 0,
           "{}: truncated at byte {}: record {} is incomplete ({} of {} bytes); the file must hold whole "
           "{}-byte records",
           path, size, size / kCifarRecordBytes, size % kCifarRecordBytes, kCifarRecordBytes, kCifarRecordBytes);
  size_t offset = bytes.size();
  bytes.resize(offset + size_t(size));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  GZ_CHECK(f != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
  size_t got = std::fread(bytes.data() + offset, 1, size_t(size), f);
  std::fclose(f);
  GZ_CHECK(got == size_t(size), "{}: truncated at byte {} while reading {} bytes", path, got, size);
  for (int64_t r = 0; r < size / kCifarRecordBytes; ++r) {
    uint8_t label = bytes[offset + size_t(r * kCifarRecordBytes)];
    GZ_CHECK(label < kClassNames.size(), "{}: record {} (byte {}) has label {}, outside [0, 10)", path, r,
             r * kCifarRecordBytes, int(label));
  }
}

}  // namespace

ImageData loadCifar10(const std::string& dir, bool train) {
  std::string root = resolveDir(dir);
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back((fs::path(root) / fmt::format("data_batch_{}.bin", i)).string());
  } else {
    files.push_back((fs::path(root) / "test_batch.bin").string());
  }
  std::vector<uint8_t> bytes;
  for (const auto& f : files) readRecords(f, bytes);

  int64_t n = int64_t(bytes.size()) / kCifarRecordBytes;
  at::Tensor all = at::from_blob(bytes.data(), {n, kCifarRecordBytes}, at::kByte);
  ImageData out;
  out.source = root;
  out.labels = all.select(1, 0).to(at::kLong);
  // Records store planes [C,H,W]; OpenCV and ImageData want interleaved [H,W,C].
  out.images = all.slice(1, 1).view({n, 3, 32, 32}).permute({0, 2, 3, 1}).contiguous();
  out.classNames = kClassNames;
  return out;
}

}  // namespace gradzip::data
