// Tests data/DataOptions.h: per-dataset defaults, strict errors naming the key,
// and a toYaml -> fromYaml round trip.
#include "data/DataOptions.h"

#include "util/Error.h"
#include "tests/data/ParseDataOptions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gradzip::data {
namespace {

using ::testing::HasSubstr;
using testing::errorOf;
using testing::parse;

TEST(DataOptions, DefaultsDependOnTheDataset) {
  DataOptions f = parse("{}");
  EXPECT_EQ(f.dataset, "fashion_mnist");
  EXPECT_EQ(f.path, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(f.cropPadding, 0);
  EXPECT_EQ(f.mean.size(), 1u);
  DataOptions c = parse("dataset: cifar10\npath: /data/cifar\n");
  EXPECT_EQ(c.cropPadding, 4);
  EXPECT_TRUE(c.flip);
  EXPECT_EQ(c.std.size(), 3u);
  EXPECT_EQ(c.evalBatchSize, c.batchSize);
  DataOptions i = parse("dataset: image_folder\npath: /imgs\nimage_size: [48, 64]\nchannels: 1\n"
                        "normalise: {mean: [0.5], std: [0.5]}\n");
  EXPECT_EQ(i.imageHeight, 48);
  EXPECT_EQ(i.imageWidth, 64);
  EXPECT_EQ(i.channels, 1);
  DataOptions t = parse("dataset: text_mlm\ntext: {corpus: [/a, /b], vocab_size: 500, seq_len: 64}\n");
  EXPECT_EQ(t.text.corpus, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(t.text.vocabSize, 500);
  EXPECT_DOUBLE_EQ(t.text.maskProb, 0.15);
  EXPECT_EQ(parse("dataset: text_mlm\npath: /w103\n").text.corpus, (std::vector<std::string>{"/w103"}));
}

TEST(DataOptions, ErrorsNameTheKey) {
  EXPECT_THAT(errorOf("dataset: mnist\n"), HasSubstr("dataset"));
  EXPECT_THAT(errorOf("batch_sise: 3\n"), HasSubstr("batch_sise"));
  EXPECT_THAT(errorOf("augment: {crop: 4}\n"), HasSubstr("augment.crop"));
  EXPECT_THAT(errorOf("dataset: cifar10\nnormalise: {mean: [0.1, 0.2]}\n"),
              HasSubstr("normalise.mean: expected 1 or 3 values"));
  EXPECT_THAT(errorOf("normalise: {std: [0]}\n"), HasSubstr("normalise.std"));
  EXPECT_THAT(errorOf("dataset: image_folder\n"), HasSubstr("path: image_folder needs path"));
  EXPECT_THAT(errorOf("dataset: text_mlm\npath: /a\ntext: {corpus: [/b]}\n"), HasSubstr("not both"));
  EXPECT_THAT(errorOf("dataset: text_mlm\ntext: {corpus: [/a], mask_prob: 1.5}\n"), HasSubstr("text.mask_prob"));
  EXPECT_THAT(errorOf("dataset: text_mlm\ntext: {corpus: [/a]}\naugment: {flip: true}\n"), HasSubstr("augment"));
}

TEST(DataOptions, RoundTripsThroughYaml) {
  for (const char* yaml : {"dataset: cifar10\npath: /c\nbatch_size: 64\naugment: {flip: false}\nworkers: 2\n",
                           "dataset: text_mlm\ntext: {corpus: [/a], vocab_size: 300, cache_dir: /tmp/x}\n",
                           "dataset: image_folder\npath: /i\nimage_size: [20, 30]\nprefetch: 0\n"}) {
    DataOptions a = parse(yaml);
    YAML::Node n;
    a.toYaml(n);
    DataOptions b = parse(YAML::Dump(n));
    YAML::Node m;
    b.toYaml(m);
    EXPECT_EQ(YAML::Dump(n), YAML::Dump(m)) << yaml;
  }
}

}  // namespace
}  // namespace gradzip::data
