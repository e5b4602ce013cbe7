// Implements data/DataOptions.h: per-dataset defaults, then strict reading.
#include "data/DataOptions.h"

#include "data/FashionMnist.h"
#include "data/TextCorpus.h"

namespace gradzip::data {
namespace {

struct Defaults {
  std::string path;
  int64_t cropPadding;
  bool flip;
  std::vector<double> mean, std;
};

Defaults defaultsFor(const std::string& dataset) {
  if (dataset == "fashion_mnist")  // mean/std of the 60k training pixels
    return {kFashionMnistDefaultPath, 0, false, {0.2860}, {0.3530}};
  if (dataset == "cifar10")  // He et al. 2016 §4.2: 4-pixel padding, random crop, flip
    return {"cifar-10-batches-bin", 4, true, {0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}};
  if (dataset == "image_folder")  // ImageNet statistics, the usual choice for natural images
    return {"", 0, true, {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
  if (dataset == "synthetic")  // near the pixels' own statistics (class patterns uniform on [0, 255], plus noise)
    return {"", 0, false, {0.5}, {0.3}};
  return {"", 0, false, {}, {}};  // text_mlm
}

}  // namespace

const std::vector<std::string>& DataOptions::datasetNames() {
  static const std::vector<std::string> names = {"fashion_mnist", "cifar10", "image_folder", "text_mlm",
                                                     "synthetic"};
  return names;
}

DataOptions DataOptions::fromYaml(YamlReader& r) {
  DataOptions o;
  o.dataset = r.getEnum("dataset", o.dataset, datasetNames());
  Defaults d = defaultsFor(o.dataset);
  o.path = r.getString("path", d.path);
  o.batchSize = r.getInt("batch_size", o.batchSize, 1, 1 << 20);
  o.evalBatchSize = r.getInt("eval_batch_size", o.batchSize, 1, 1 << 20);
  o.shuffle = r.getBool("shuffle", o.shuffle);
  o.dropLast = r.getBool("drop_last", o.dropLast);
  o.prefetch = int(r.getInt("prefetch", o.prefetch, 0, 1024));
  o.workers = int(r.getInt("workers", o.workers, 1, 256));

  const bool images = o.dataset != "text_mlm";
  if (o.dataset == "image_folder" || o.dataset == "synthetic") {
    std::vector<int64_t> size = r.getIntList("image_size", {o.imageHeight, o.imageWidth});
    if (size.size() != 2 || size[0] < 1 || size[1] < 1)
      r.fail("image_size", "expected [height, width] with positive sizes");
    o.imageHeight = size[0];
    o.imageWidth = size[1];
    o.channels = r.getInt("channels", o.channels, 1, 3);
    if (o.channels == 2) r.fail("channels", "expected 1 (grayscale) or 3 (RGB), got 2");
    if (o.dataset == "synthetic") {
      if (!o.path.empty()) r.fail("path", "synthetic data is generated, not read: remove path");
      YamlReader s = r.child("synthetic");
      o.synthetic.trainSize = s.getInt("train_size", o.synthetic.trainSize, 1);
      o.synthetic.testSize = s.getInt("test_size", o.synthetic.testSize, 0);
      o.synthetic.numClasses = s.getInt("num_classes", o.synthetic.numClasses, 2, 1 << 16);
      o.synthetic.seed = uint64_t(s.getInt("seed", int64_t(o.synthetic.seed), 0));
      s.finish();
    } else if (o.path.empty()) {
      r.fail("path", "image_folder needs path: a directory of <class>/<image> (or train/ and val/)");
    }
  } else {
    o.channels = o.dataset == "fashion_mnist" ? 1 : 3;
  }
  if (images) {
    YamlReader aug = r.child("augment");
    o.cropPadding = aug.getInt("crop_padding", d.cropPadding, 0, 1024);
    o.flip = aug.getBool("flip", d.flip);
    aug.finish();
    YamlReader norm = r.child("normalise");
    o.mean = norm.getDoubleList("mean", d.mean);
    o.std = norm.getDoubleList("std", d.std);
    for (const char* key : {"mean", "std"}) {
      const auto& v = std::string(key) == "mean" ? o.mean : o.std;
      if (v.size() != 1 && int64_t(v.size()) != o.channels)
        norm.fail(key, fmt::format("expected 1 or {} values (one per channel), got {}", o.channels, v.size()));
    }
    for (double s : o.std)
      if (!(s > 0)) norm.fail("std", fmt::format("every value must be positive, got {}", s));
    norm.finish();
  } else {
    YamlReader t = r.child("text");
    o.text.corpus = t.getStringList("corpus", {});
    if (!o.text.corpus.empty() && !o.path.empty())
      t.fail("corpus", "give the corpus either as data.path or as data.text.corpus, not both");
    if (o.text.corpus.empty() && !o.path.empty()) o.text.corpus = {o.path};
    if (o.text.corpus.empty()) {
      std::string doc = defaultTextCorpusPath();
      if (doc.empty())
        t.fail("corpus", "no corpus given and the default, Debian's linux-doc (/usr/share/doc/linux-doc-*/"
                         "Documentation), is not installed: install linux-doc or set data.text.corpus");
      o.text.corpus = {doc};
    }
    o.path.clear();
    o.text.extensions = t.getStringList("extensions", defaultTextExtensions());
    o.text.vocabSize = t.getInt("vocab_size", o.text.vocabSize, 32, 1 << 20);
    o.text.modelType = t.getEnum("model_type", o.text.modelType, {"unigram", "bpe"});
    o.text.sampleMb = t.getDouble("sample_mb", o.text.sampleMb, 0.001, 1e5);
    o.text.seqLen = t.getInt("seq_len", o.text.seqLen, 2, 1 << 16);
    o.text.maskProb = t.getDouble("mask_prob", o.text.maskProb, 1e-6, 1 - 1e-6);
    o.text.cacheDir = t.getString("cache_dir", o.text.cacheDir);
    t.finish();
  }
  r.finish();
  return o;
}

void DataOptions::toYaml(YAML::Node& n) const {
  n["dataset"] = dataset;
  if (!path.empty()) n["path"] = path;
  n["batch_size"] = batchSize;
  n["eval_batch_size"] = evalBatchSize;
  n["shuffle"] = shuffle;
  n["drop_last"] = dropLast;
  n["prefetch"] = prefetch;
  n["workers"] = workers;
  if (dataset == "text_mlm") {
    YAML::Node t;
    t["corpus"] = text.corpus;
    t["extensions"] = text.extensions;
    t["vocab_size"] = text.vocabSize;
    t["model_type"] = text.modelType;
    t["sample_mb"] = text.sampleMb;
    t["seq_len"] = text.seqLen;
    t["mask_prob"] = text.maskProb;
    t["cache_dir"] = text.cacheDir;
    n["text"] = t;
    return;
  }
  if (dataset == "image_folder" || dataset == "synthetic") {
    n["image_size"] = std::vector<int64_t>{imageHeight, imageWidth};
    n["channels"] = channels;
  }
  if (dataset == "synthetic") {
    n["synthetic"]["train_size"] = synthetic.trainSize;
    n["synthetic"]["test_size"] = synthetic.testSize;
    n["synthetic"]["num_classes"] = synthetic.numClasses;
    n["synthetic"]["seed"] = synthetic.seed;
  }
  n["augment"]["crop_padding"] = cropPadding;
  n["augment"]["flip"] = flip;
  n["normalise"]["mean"] = mean;
  n["normalise"]["std"] = std;
}

}  // namespace gradzip::data
