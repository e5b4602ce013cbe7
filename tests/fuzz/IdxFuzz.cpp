// Fuzz target for the IDX reader (data/Idx.h over data/GzReader.h), the
// container of Fashion-MNIST. The first input byte picks the encoding: bit 0 set
// writes the rest gzip-compressed (so mutations reach the IDX header behind a
// valid gzip stream), clear writes it as is (plain IDX, or a mutated gzip
// stream that zlib must refuse). A bad file must give a UserError naming it —
// never a crash or an allocation sized by a corrupt header — and a file that
// reads must give a uint8 tensor of exactly its declared dimensions.
#include "data/Idx.h"
#include "tests/fuzz/FuzzSupport.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradzip;
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string path = fuzz::scratchDir() + "/images-idx3-ubyte.gz";
  if (data[0] & 1)
    fuzz::writeGz(path, bytes);
  else
    fuzz::writeFile(path, bytes);
  fuzz::expectOnlyUserErrors(path, [&] {
    data::IdxArray a = data::readIdx(path);
    int64_t n = 1;
    for (int64_t d : a.dims) n *= d;
    if (a.data.scalar_type() != at::kByte || a.data.sizes().vec() != a.dims || a.data.numel() != n)
      fuzz::fail("readIdx returned a tensor that does not match its dimensions");
  });
  return 0;
}
