// Tests data/SyntheticImageDataset.h and its `data: {dataset: synthetic}`
// options: an example is a function of (seed, split, index) alone, so two
// instances give the same bytes; batches have the documented shapes, types
// and label range; examples and splits differ; a nearest-class-pattern rule
// beats chance (the labels are learnable); bad options name their key.
#include "data/Factory.h"
#include "data/SyntheticImageDataset.h"

#include "util/Error.h"
#include "tests/data/ParseDataOptions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace gradzip::data {
namespace {

using ::testing::HasSubstr;
using testing::errorOf;
using testing::parse;

SyntheticImageDataset make(uint64_t seed = 0, uint64_t split = 0, int64_t classes = 10) {
  return SyntheticImageDataset("synthetic test", {100, 20, 12, 3, classes, seed, split}, {0, false, {0.5}, {0.3}},
                               false);
}

TEST(SyntheticImageDataset, SameIndexGivesSameBytesAcrossInstances) {
  SyntheticImageDataset a = make(), b = make();
  const std::vector<int64_t> idx = {0, 7, 99, 7};
  EXPECT_TRUE(at::equal(a.pixels(idx), b.pixels(idx)));
  Rng ra(1), rb(2);  // no augmentation: the batch does not depend on the Rng
  Batch x = a.getBatch(idx, ra), y = b.getBatch(idx, rb);
  EXPECT_TRUE(at::equal(x.input, y.input));
  EXPECT_TRUE(at::equal(x.target, y.target));
  // The order of a batch does not change an example.
  EXPECT_TRUE(at::equal(a.pixels({99}), a.pixels({3, 99}).select(0, 1).unsqueeze(0)));
}

TEST(SyntheticImageDataset, BatchHasDocumentedShapesTypesAndLabelRange) {
  SyntheticImageDataset d = make(0, 0, 7);
  EXPECT_EQ(d.size(), 100);
  DatasetInfo info = d.info();
  EXPECT_EQ(info.kind, "image");
  EXPECT_EQ(info.numClasses, 7);
  EXPECT_EQ(info.channels, 3);
  EXPECT_EQ(info.height, 20);
  EXPECT_EQ(info.width, 12);
  EXPECT_EQ(d.pixels({1, 2}).sizes(), (std::vector<int64_t>{2, 20, 12, 3}));
  EXPECT_EQ(d.pixels({1}).scalar_type(), at::kByte);
  std::vector<int64_t> all(100);
  for (int64_t i = 0; i < 100; ++i) all[size_t(i)] = i;
  Rng rng(0);
  Batch b = d.getBatch(all, rng);
  EXPECT_EQ(b.input.sizes(), (std::vector<int64_t>{100, 3, 20, 12}));
  EXPECT_EQ(b.input.scalar_type(), at::kFloat);
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{100}));
  EXPECT_EQ(b.target.scalar_type(), at::kLong);
  EXPECT_GE(b.target.min().item<int64_t>(), 0);
  EXPECT_LT(b.target.max().item<int64_t>(), 7);
  EXPECT_EQ(b.target[5].item<int64_t>(), d.label(5));
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 100; ++i) seen.insert(d.label(i));
  EXPECT_EQ(seen.size(), 7u);  // 100 draws miss one of 7 classes with probability < 7 (6/7)^100 ~ 1e-6
  // (pixel/255 - 0.5) / 0.3 of uint8 pixels.
  EXPECT_TRUE(at::allclose(b.input, (d.pixels(all).permute({0, 3, 1, 2}).to(at::kFloat) / 255 - 0.5) / 0.3, 1e-5, 1e-5));
}

TEST(SyntheticImageDataset, IndicesSplitsAndSeedsDiffer) {
  SyntheticImageDataset train = make(0, 0), test = make(0, 1), other = make(1, 0);
  EXPECT_FALSE(at::equal(train.pixels({0}), train.pixels({1})));
  EXPECT_FALSE(at::equal(train.pixels({0}), test.pixels({0})));
  EXPECT_FALSE(at::equal(train.pixels({0}), other.pixels({0})));
  EXPECT_THROW(train.pixels({100}), UserError);
  EXPECT_THROW(train.label(-1), UserError);
}

// The labels are learnable: assigning each test example the class whose
// training mean image is nearest beats chance by far. Pixels are the class
// pattern plus noise of variance 128²/12 per pixel, so the class means
// separate by many noise standard deviations.
TEST(SyntheticImageDataset, NearestClassMeanBeatsChance) {
  const int64_t classes = 10;
  SyntheticImageDataset train("t", {400, 16, 16, 3, classes, 5, 0}, {}, false);
  SyntheticImageDataset test("v", {100, 16, 16, 3, classes, 5, 1}, {}, false);
  std::vector<int64_t> trainIdx(400), testIdx(100);
  for (int64_t i = 0; i < 400; ++i) trainIdx[size_t(i)] = i;
  for (int64_t i = 0; i < 100; ++i) testIdx[size_t(i)] = i;
  at::Tensor x = train.pixels(trainIdx).flatten(1).to(at::kFloat);
  at::Tensor means = at::zeros({classes, x.size(1)});
  at::Tensor counts = at::zeros({classes});
  for (int64_t i = 0; i < 400; ++i) {
    means[train.label(i)] += x[i];
    counts[train.label(i)] += 1;
  }
  means /= counts.clamp_min(1).unsqueeze(1);
  at::Tensor t = test.pixels(testIdx).flatten(1).to(at::kFloat);
  at::Tensor nearest = at::cdist(t, means).argmin(1);
  int64_t right = 0;
  for (int64_t i = 0; i < 100; ++i) right += nearest[i].item<int64_t>() == test.label(i);
  EXPECT_GE(right, 90);  // chance is 10
}

TEST(SyntheticImageDataset, FactoryBuildsBothSplitsFromOptions) {
  DataOptions o = parse("dataset: synthetic\nimage_size: [8, 6]\nchannels: 1\n"
                        "synthetic: {train_size: 30, test_size: 5, num_classes: 4, seed: 3}\n");
  Datasets d = makeDatasets(o);
  ASSERT_TRUE(d.test);
  EXPECT_EQ(d.train->size(), 30);
  EXPECT_EQ(d.test->size(), 5);
  EXPECT_EQ(d.train->info().numClasses, 4);
  Rng rng(0);
  EXPECT_EQ(d.test->getBatch({0, 4}, rng).input.sizes(), (std::vector<int64_t>{2, 1, 8, 6}));
  EXPECT_FALSE(makeDatasets(parse("dataset: synthetic\nsynthetic: {test_size: 0}\n")).test);
}

TEST(SyntheticImageDataset, OptionsHaveDefaultsAndRoundTrip) {
  DataOptions o = parse("dataset: synthetic\n");
  EXPECT_EQ(o.imageHeight, 32);
  EXPECT_EQ(o.channels, 3);
  EXPECT_EQ(o.synthetic.trainSize, 50000);
  EXPECT_EQ(o.synthetic.testSize, 10000);
  EXPECT_EQ(o.synthetic.numClasses, 10);
  EXPECT_EQ(o.cropPadding, 0);
  EXPECT_FALSE(o.flip);
  YAML::Node n, m;
  parse("dataset: synthetic\nimage_size: [224, 224]\nsynthetic: {num_classes: 1000, seed: 9}\n"
        "augment: {flip: true}\n")
      .toYaml(n);
  parse(YAML::Dump(n)).toYaml(m);
  EXPECT_EQ(YAML::Dump(n), YAML::Dump(m));
  EXPECT_EQ(parse(YAML::Dump(n)).synthetic.numClasses, 1000);
}

TEST(SyntheticImageDataset, ConfigErrorsNameTheKey) {
  EXPECT_THAT(errorOf("dataset: synthetic\nsynthetic: {train_size: 0}\n"), HasSubstr("synthetic.train_size"));
  EXPECT_THAT(errorOf("dataset: synthetic\nsynthetic: {num_classes: 1}\n"), HasSubstr("synthetic.num_classes"));
  EXPECT_THAT(errorOf("dataset: synthetic\nsynthetic: {test_size: -1}\n"), HasSubstr("synthetic.test_size"));
  EXPECT_THAT(errorOf("dataset: synthetic\nsynthetic: {classes: 3}\n"), HasSubstr("synthetic.classes"));
  EXPECT_THAT(errorOf("dataset: synthetic\npath: /x\n"), HasSubstr("path: synthetic data is generated"));
  EXPECT_THAT(errorOf("dataset: synthetic\nimage_size: [0, 4]\n"), HasSubstr("image_size"));
  EXPECT_THAT(errorOf("dataset: synthetic\nchannels: 2\n"), HasSubstr("channels"));
  EXPECT_THAT(errorOf("dataset: cifar10\npath: /c\nsynthetic: {train_size: 3}\n"), HasSubstr("synthetic"));
}

}  // namespace
}  // namespace gradzip::data
