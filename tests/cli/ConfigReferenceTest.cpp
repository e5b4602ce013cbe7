// Tests of `gradzip config --reference` (cli/ConfigReference.h): the binary's
// output is docs/configuration.md byte for byte (STYLE.md §19), and it holds
// the parsers' real defaults and ranges, so it can be neither stale nor empty.
#include "cli/ConfigReference.h"
#include "tests/testing/Process.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The table row of `key` ("| `key` | ..."), or "" when absent.
std::string row(const std::string& reference, const std::string& key) {
  const auto at = reference.find("| `" + key + "` |");
  if (at == std::string::npos) return "";
  return reference.substr(at, reference.find('\n', at) - at);
}

TEST(ConfigReference, DocsConfigurationIsWhatTheBinaryPrints) {
  const std::string binary = gradzip::testing::gradzipBinary();
  ASSERT_FALSE(binary.empty()) << "GRADZIP_BINARY is not set";
  const char* source = std::getenv("GRADZIP_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "GRADZIP_SOURCE_DIR is not set";
  const auto out = gradzip::testing::runCommand(binary + " config --reference 2>/dev/null");
  ASSERT_EQ(out.status, 0) << out.text;
  const std::string docs = readFile(std::string(source) + "/docs/configuration.md");
  EXPECT_TRUE(out.text == docs)
      << "docs/configuration.md differs from `gradzip config --reference`: regenerate it with\n"
         "  build/gradzip config --reference > docs/configuration.md\n"
         "and commit the result (the config parsers changed).";
}

TEST(ConfigReference, HoldsTheParsersDefaultsAndRanges) {
  const std::string ref = gradzip::trainer::configReference();
  EXPECT_EQ(row(ref, "compress.thc.bits"), "| `compress.thc.bits` | integer | `4` | [1, 16] | b: bits per coordinate sent |");
  const std::string maxSteps = row(ref, "train.max_steps");
  EXPECT_NE(maxSteps.find("| integer | `0` | >= 0 |"), std::string::npos) << maxSteps;
  EXPECT_NE(maxSteps.find("0 = no cap"), std::string::npos) << maxSteps;
  EXPECT_NE(row(ref, "train.nan_skip_max_run").find("| integer | `10` | >= 0 |"), std::string::npos);
  EXPECT_NE(row(ref, "train.nan_skip_max_share").find("| number | `0.1` | [0, 1] |"), std::string::npos);
  EXPECT_NE(row(ref, "compress.time_weight").find("| number | `0.85` | [0, 1] |"), std::string::npos);
  EXPECT_NE(row(ref, "comm.timeout_s").find("| integer | `60` | [1, 86400] |"), std::string::npos);
  // A default that depends on a variant names each; a key of one variant says so.
  EXPECT_NE(row(ref, "compress.stat").find("`ef_rate` (optim.name: sgd); `vnmse` (optim.name: adamw)"),
            std::string::npos);
  EXPECT_NE(row(ref, "model.bert.heads").find("Only with model.name: bert."), std::string::npos);
  // Every compressor's options are under its own heading.
  for (const char* heading : {"## compress.thc\n", "## compress.topk\n", "## compress.powersgd\n", "## compress: auto\n",
                              "## network.schedule[]\n", "## train\n", "## run\n"})
    EXPECT_NE(ref.find(heading), std::string::npos) << heading;
}

TEST(ConfigReference, IsDeterministic) { EXPECT_EQ(gradzip::trainer::configReference(), gradzip::trainer::configReference()); }

}  // namespace
