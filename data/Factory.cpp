// Implements data/Factory.h.
#include "data/Factory.h"

#include "data/Cifar10.h"
#include "data/FashionMnist.h"
#include "data/ImageDataset.h"
#include "data/ImageFolder.h"
#include "data/MlmDataset.h"
#include "data/SyntheticImageDataset.h"
#include "data/TextCorpus.h"
#include "data/Tokenizer.h"
#include "util/Error.h"

#include <spdlog/spdlog.h>

#include <filesystem>

namespace gradzip::data {
namespace {

namespace fs = std::filesystem;

TransformOptions transformOptions(const DataOptions& o) {
  return TransformOptions{o.cropPadding, o.flip, o.mean, o.std};
}

Datasets imageDatasets(const DataOptions& o, ImageData train, std::optional<ImageData> test) {
  Datasets d;
  d.train = std::make_shared<ImageDataset>(o.dataset + " train", std::move(train), transformOptions(o), true);
  if (test) d.test = std::make_shared<ImageDataset>(o.dataset + " test", std::move(*test), transformOptions(o), false);
  return d;
}

Datasets imageFolderDatasets(const DataOptions& o) {
  ImageFolderOptions f{o.imageHeight, o.imageWidth, o.channels, o.workers, {}};
  fs::path root(o.path);
  if (!fs::is_directory(root / "train")) {
    spdlog::warn("{}: no train/ subdirectory, so the whole folder is the training set and there is no test set",
                 o.path);
    return imageDatasets(o, loadImageFolder(o.path, f), std::nullopt);
  }
  ImageData train = loadImageFolder((root / "train").string(), f);
  f.classNames = train.classNames;  // test labels must mean the same classes
  std::optional<ImageData> test;
  for (const char* name : {"val", "test"})
    if (fs::is_directory(root / name)) {
      test = loadImageFolder((root / name).string(), f);
      break;
    }
  return imageDatasets(o, std::move(train), std::move(test));
}

Datasets syntheticDatasets(const DataOptions& o) {
  SyntheticImageSpec spec{o.synthetic.trainSize, o.imageHeight, o.imageWidth, o.channels, o.synthetic.numClasses,
                          o.synthetic.seed, /*split=*/0};
  Datasets d;
  d.train = std::make_shared<SyntheticImageDataset>("synthetic train", spec, transformOptions(o), true);
  if (o.synthetic.testSize > 0) {
    spec.size = o.synthetic.testSize;
    spec.split = 1;
    d.test = std::make_shared<SyntheticImageDataset>("synthetic test", spec, transformOptions(o), false);
  }
  return d;
}

Datasets textDatasets(const DataOptions& o) {
  TextCorpus train = TextCorpus::load(o.text.corpus, TextSplit::kTrain, o.text.extensions);
  TextCorpus valid = TextCorpus::load(o.text.corpus, TextSplit::kValid, o.text.extensions);
  TokenizerOptions t;
  t.vocabSize = o.text.vocabSize;
  t.modelType = o.text.modelType;
  t.sampleBytes = std::max<int64_t>(1, int64_t(o.text.sampleMb * 1e6));
  t.cacheDir = o.text.cacheDir;
  t.threads = o.workers;
  auto tok = Tokenizer::trainOrLoad(train, t);
  MlmVocab vocab;
  vocab.vocabSize = tok->vocabSize();
  vocab.padId = Tokenizer::kPadId;
  vocab.clsId = Tokenizer::kClsId;
  vocab.sepId = Tokenizer::kSepId;
  vocab.maskId = Tokenizer::kMaskId;
  vocab.firstRegularId = Tokenizer::kFirstRegularId;
  MlmOptions m;
  m.seqLen = o.text.seqLen;
  m.maskProb = o.text.maskProb;
  Datasets d;
  d.train = std::make_shared<MlmDataset>("text_mlm train", tok->encodeCorpus(train, o.workers), vocab, m);
  d.test = std::make_shared<MlmDataset>("text_mlm valid", tok->encodeCorpus(valid, o.workers), vocab, m);
  return d;
}

}  // namespace

Datasets makeDatasets(const DataOptions& o) {
  Datasets d;
  if (o.dataset == "fashion_mnist") {
    d = imageDatasets(o, loadFashionMnist(o.path, true), loadFashionMnist(o.path, false));
  } else if (o.dataset == "cifar10") {
    d = imageDatasets(o, loadCifar10(o.path, true), loadCifar10(o.path, false));
  } else if (o.dataset == "image_folder") {
    d = imageFolderDatasets(o);
  } else if (o.dataset == "text_mlm") {
    d = textDatasets(o);
  } else if (o.dataset == "synthetic") {
    d = syntheticDatasets(o);
  } else {
    GZ_CHECK(false, "unknown dataset '{}' (known: {})", o.dataset, fmt::join(DataOptions::datasetNames(), ", "));
  }
  spdlog::info("data: {}", d.train->describe());
  if (d.test) spdlog::info("data: {}", d.test->describe());
  return d;
}

LoaderOptions trainLoaderOptions(const DataOptions& o, uint64_t seed) {
  return LoaderOptions{o.batchSize, o.shuffle, o.dropLast, o.prefetch, o.workers, seed};
}

LoaderOptions evalLoaderOptions(const DataOptions& o, uint64_t seed) {
  return LoaderOptions{o.evalBatchSize, false, false, o.prefetch, o.workers, seed};
}

}  // namespace gradzip::data
