// Fuzz target for the CIFAR-10 binary reader (data/Cifar10.h): the input is the
// whole test_batch.bin of a CIFAR-10 directory (3073-byte records: a label byte,
// then 32x32 red, green and blue planes). A bad file must give a UserError
// naming it; a file that reads must give ImageData that passes checkImageData
// with one image per record.
#include "data/Cifar10.h"
#include "tests/fuzz/FuzzSupport.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradzip;
  const std::string dir = fuzz::scratchDir() + "/cifar-10-batches-bin";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/test_batch.bin";
  fuzz::writeFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::expectOnlyUserErrors(path, [&] {
    data::ImageData d = data::loadCifar10(dir, /*train=*/false);
    data::checkImageData(d);
    if (d.size() * data::kCifarRecordBytes != int64_t(size) || d.height() != 32 || d.width() != 32 ||
        d.channels() != 3)
      fuzz::fail("loadCifar10 returned the wrong number or shape of images");
  });
  return 0;
}
