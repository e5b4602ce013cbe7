// Tests compress/CodecPath.{h,cpp}: the `codec` key every compressor accepts,
// its error for a bad value, and that a decorator passes the path on. Also
// where this executable takes its process default from: ctest runs the
// compressor tests twice, the second time with GRADZIP_CODEC_PATH=generic
// (tests/compress/CMakeLists.txt), so every compressor test passes through
// both the CPU SIMD kernels and the device-generic ATen path.
#include "compress/CodecPath.h"
#include "compress/Factory.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gradzip::compress {
namespace {

// Runs before main(), so before any test builds a compressor.
const bool kDefaultFromEnvironment = [] {
  if (const char* p = std::getenv("GRADZIP_CODEC_PATH")) setDefaultCodecPath(parseCodecPath(p, "GRADZIP_CODEC_PATH"));
  return true;
}();

TEST(CodecPath, ParsesNamesAndRejectsOthersNamingTheValidOnes) {
  EXPECT_EQ(parseCodecPath("auto", "x"), CodecPath::Auto);
  EXPECT_EQ(parseCodecPath("generic", "x"), CodecPath::Generic);
  try {
    parseCodecPath("simd", "compress.thc.codec");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("compress.thc.codec: unknown codec path 'simd' (valid: auto, generic)"),
                      std::string::npos)
        << e.what();
  }
}

TEST(CodecPath, YamlKeyReachesTheSchemeThroughItsDecorator) {
  // topk is wrapped in ErrorFeedback by default; the path must reach both.
  auto c = makeCompressor("topk", "codec: generic");
  EXPECT_EQ(c->codecPath(), CodecPath::Generic);
  auto unwrapped = makeCompressor("topk", "codec: auto\nerror_feedback: false");
  EXPECT_EQ(unwrapped->codecPath(), CodecPath::Auto);
  EXPECT_THROW(makeCompressor("fp16", "codec: cuda"), UserError);
}

TEST(CodecPath, ProcessDefaultAppliesToNewCompressors) {
  const CodecPath before = defaultCodecPath();
  setDefaultCodecPath(CodecPath::Generic);
  EXPECT_EQ(makeCompressor("fp16")->codecPath(), CodecPath::Generic);
  setDefaultCodecPath(CodecPath::Auto);
  EXPECT_EQ(makeCompressor("fp16")->codecPath(), CodecPath::Auto);
  setDefaultCodecPath(before);
}

}  // namespace
}  // namespace gradzip::compress
