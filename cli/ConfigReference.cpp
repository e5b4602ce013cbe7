// Implements cli/ConfigReference.h: drives the config parsers with a recording
// YamlReader and prints what they asked for as Markdown tables.
#include "cli/ConfigReference.h"

#include "compress/Factory.h"
#include "controller/ControllerOptions.h"
#include "data/DataOptions.h"
#include "models/Registry.h"
#include "trainer/TrainConfig.h"
#include "util/Yaml.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

namespace gradzip::trainer {
namespace {

using Log = std::vector<YamlKeyRecord>;

// One line of prose per key, where a reader needs more than type, default and
// range. Keyed by path ("auto " + path for `compress: auto`); a description
// whose key no parser reads is a bug (configReference throws), so a renamed key
// cannot leave a stale line behind.
const std::map<std::string, std::string>& descriptions() {
  static const std::map<std::string, std::string> d = {
      {"run.name", "the run directory is out_dir/name; no '/'"},
      {"run.out_dir", "parent of the run directory"},
      {"run.seed", "seed of initialisation, data order and stochastic compressors"},
      {"run.threads", "intra-op threads per rank; 0 = cores / local ranks"},
      {"run.deterministic", "one thread and deterministic kernels, so that resume continues bit for bit"},
      {"run.device", "where the model, batches, buckets and compressor state live; cuda: GPU LOCAL_RANK (docs/gpu.md)"},
      {"model.name", "required; the family decides which of the keys below apply"},
      {"data.path", "dataset location (for text_mlm: the corpus, or use data.text.corpus)"},
      {"data.eval_batch_size", "default: data.batch_size"},
      {"data.prefetch", "batches prepared ahead of the step"},
      {"data.workers", "threads that prepare batches"},
      {"data.image_size", "[height, width] every image is resized to (synthetic: generated at)"},
      {"data.synthetic.seed", "the data's own seed, apart from run.seed"},
      {"data.synthetic.train_size", "training images, generated from (seed, index) on demand"},
      {"data.synthetic.test_size", "test images; 0 = no test split"},
      {"data.text.corpus", "files or folders; default: data.path, else Debian's linux-doc"},
      {"optim.lr", "learning rate (before scale_lr_with_world)"},
      {"optim.scale_lr_with_world", "scale lr with the number of ranks"},
      {"schedule.warmup_steps", "linear warm-up steps"},
      {"train.epochs", "fractional epochs allowed; epochs or max_steps must be > 0"},
      {"train.max_steps", "caps the run at this many steps; 0 = no cap (epochs decide); with both set the smaller wins"},
      {"train.eval_every", "steps between evaluations; 0 = once per epoch"},
      {"train.eval_batches", "> 0: evaluate on that many batches per rank only"},
      {"train.clip_grad_norm", "> 0 clips the global gradient norm"},
      {"train.patience", "stop after this many evaluations without improvement; 0 = off"},
      {"train.targets", "accuracy targets whose times the TTA summary reports"},
      {"train.checkpoint_every", "steps between checkpoints; 0 = at every evaluation"},
      {"train.nan_policy", "what a non-finite gradient does on all ranks: stop the run or skip the step"},
      {"train.nan_skip_max_run", "skip: stop when more than this many steps in a row were skipped"},
      {"train.nan_skip_max_share",
       "skip: stop when more than nan_skip_max_run steps in all were skipped and they exceed this share of the steps"},
      {"train.checksum_every", "steps between cross-rank parameter checksums; 0 = off"},
      {"train.loss_spike_factor", "log a loss above this multiple of the running mean as a spike; 0 = off, else > 1"},
      {"comm.timeout_s", "bounds every collective and every step of joining (GRADZIP_COMM_TIMEOUT_S overrides)"},
      {"comm.bucket_mb", "gradient bucket size in MB"},
      {"comm.latency_us",
       "emulated latency: every message round waits this long, point-to-point sends and engine collectives "
       "alike (rounds as comm/CostModel.h counts them)"},
      {"comm.overlap", "communicate buckets during backward"},
      {"comm.cuda_backend",
       "how CUDA tensors travel: NCCL, or Gloo through host memory (ranks sharing a GPU); auto: NCCL where available"},
      {"network.ranks", "not in a train config: the rank count comes from `launch -n` or the suite"},
      {"network.subnet", "first three octets of the emulated ranks' addresses"},
      {"network.burst_ms", "token-bucket burst in ms at line rate"},
      {"network.queue_ms", "queue length in ms at line rate"},
      {"network.schedule[].at", "start of this rate in seconds (give at or epoch; one kind per schedule)"},
      {"network.schedule[].epoch", "start of this rate in epochs"},
      {"network.schedule[].mbit", "rate in Mbit/s, or `unshaped`"},
      {"network.mbit", "a constant rate in Mbit/s (or `unshaped`); instead of schedule"},
      {"compress.name", "the compressor; `compress: auto` chooses plans at run time (section compress: auto)"},
      {"compress.collective", "how coded gradients are aggregated; the compressor must support it"},
      {"compress.thc.bits", "b: bits per coordinate sent"},
      {"auto compress.name", "`compress: auto` alone takes every default below"},
      {"auto compress.families", "compressor families the controller considers"},
      {"auto compress.collectives", "collectives it considers; empty = every one a compressor supports"},
      {"auto compress.time_weight", "knee preference: weight on step time (1: fastest)"},
      {"auto compress.stat", "statistical cost; the default follows optim.name"},
      {"auto compress.warmup_steps", "steps on `initial` before the first decision"},
      {"auto compress.explore", "candidates from the predicted front explored per decision"},
      {"auto compress.sound_every", "steps between bandwidth soundings; 0 = never"},
      {"auto compress.noise_every", "steps between gradient-noise-scale measurements; 0 = never"},
      {"auto compress.small_bucket_kb", "buckets below this stay on small_plan"},
      {"auto compress.initial", "the baseline until the first decision"},
      {"auto compress.pin", "pinned mode: run this plan, measure and log what auto would pick"},
  };
  return d;
}

// A set of drives that differ in one value (each model name, dataset, ...).
struct Drive {
  std::string family;  // e.g. "model.name"; "" for a drive that is no variant
  std::string value;
  bool automatic;
};

struct Entry {
  YamlKeyRecord rec;
  bool automatic = false;
  size_t order = 0;
  std::vector<std::pair<size_t, std::string>> defaults;  // (drive, default) per drive that read the key
};

std::string cell(std::string s) {
  for (size_t at = s.find('|'); at != std::string::npos; at = s.find('|', at + 2)) s.replace(at, 1, "\\|");
  return s;
}

std::string code(const std::string& v) { return v == "required" ? v : "`" + v + "`"; }

class Collector {
 public:
  void train(const std::string& yaml, Drive d) {
    auto root = YamlReader::loadString(yaml, "<config reference>");
    auto log = std::make_shared<Log>();
    root.recordInto(log);
    try {
      TrainConfig::fromYaml(root);
    } catch (const std::exception& e) {
      throw std::logic_error(fmt::format("config reference: the parsers reject {}: {}", yaml, e.what()));
    }
    add(d.automatic ? collapsePlans(*log) : *log, std::move(d));
  }

  void compressor(const std::string& name) {
    auto root = YamlReader::loadString("{}", "<config reference>");
    auto log = std::make_shared<Log>();
    root.recordInto(log);
    auto r = root.view(YAML::Node(YAML::NodeType::Map), "compress." + name);
    try {
      compress::makeCompressor(name, r);
    } catch (const std::exception& e) {
      throw std::logic_error(fmt::format("config reference: compressor {} rejects its defaults: {}", name, e.what()));
    }
    add(*log, Drive{"", name, false});
  }

  std::string markdown() const;

 private:
  // Under `compress: auto`, a nested plan (initial, pin, ...) is one value:
  // its keys are those of `compress`, listed there.
  static Log collapsePlans(const Log& log) {
    const std::string names = fmt::format("{}", fmt::join(compress::compressorNames(), ", "));
    std::set<std::string> plans;
    for (const auto& r : log)
      if (r.type == "enum" && r.range == names && r.path.size() > 5 && r.path.rfind(".name") == r.path.size() - 5 &&
          r.path != "compress.name")
        plans.insert(r.path.substr(0, r.path.size() - 5));
    const YAML::Node defaults = ControllerOptions{}.toYaml();
    Log out;
    std::set<std::string> done;
    for (const auto& r : log) {
      auto plan = std::find_if(plans.begin(), plans.end(),
                               [&](const std::string& p) { return r.path.rfind(p + ".", 0) == 0; });
      if (plan == plans.end()) {
        if (r.path.rfind("compress.", 0) == 0 || r.path == "compress") out.push_back(r);
        continue;
      }
      if (!done.insert(*plan).second) continue;
      const YAML::Node def = defaults[plan->substr(std::string("compress.").size())];
      std::string text = "none";
      if (def && !def.IsNull()) {
        YAML::Emitter e;
        e << YAML::Flow << def;
        text = e.c_str();
      }
      out.push_back({*plan, "plan", text, "a mapping like `compress` (name, collective, options)"});
    }
    return out;
  }

  void add(const Log& log, Drive d) {
    const size_t drive = drives_.size();
    drives_.push_back(std::move(d));
    const bool automatic = drives_.back().automatic;
    for (const auto& r : log) {
      if (automatic && r.path.rfind("compress", 0) != 0) continue;  // read by the plan drives too
      auto [it, fresh] = entries_.try_emplace({automatic, r.path});
      Entry& e = it->second;
      if (fresh) e = Entry{r, automatic, order_++, {}};
      if (e.defaults.empty() || e.defaults.back().first != drive) e.defaults.emplace_back(drive, r.def);
    }
  }

  // "model.name: bert" where only some drives of a family read the key.
  std::string condition(const Entry& e) const {
    std::map<std::string, std::vector<size_t>> family;
    for (size_t i = 0; i < drives_.size(); ++i)
      if (!drives_[i].family.empty() && drives_[i].automatic == e.automatic) family[drives_[i].family].push_back(i);
    std::vector<std::string> parts;
    for (const auto& [name, members] : family) {
      std::vector<std::string> hit;
      for (size_t i : members)
        for (const auto& [d, def] : e.defaults)
          if (d == i) hit.push_back(drives_[i].value);
      if (!hit.empty() && hit.size() < members.size()) parts.push_back(fmt::format("{}: {}", name, fmt::join(hit, ", ")));
    }
    return parts.empty() ? "" : fmt::format("Only with {}.", fmt::join(parts, "; "));
  }

  // The default, or where it depends on a variant, each value with the
  // variants of the family that set it (data.path: by data.dataset).
  std::string defaultText(const Entry& e) const {
    std::set<std::string> distinct;
    for (const auto& [d, def] : e.defaults) distinct.insert(def);
    if (distinct.size() == 1) return code(*distinct.begin());
    std::map<std::string, std::set<std::string>> perFamily;
    for (const auto& [d, def] : e.defaults)
      if (!drives_[d].family.empty()) perFamily[drives_[d].family].insert(def);
    std::vector<std::string> parts;
    for (const auto& [family, values] : perFamily) {
      if (values.size() < 2) continue;
      std::vector<std::pair<std::string, std::vector<std::string>>> byValue;  // in drive order
      for (const auto& [d, def] : e.defaults) {
        if (drives_[d].family != family) continue;
        auto it = std::find_if(byValue.begin(), byValue.end(), [&](const auto& p) { return p.first == def; });
        if (it == byValue.end()) it = byValue.insert(byValue.end(), {def, {}});
        it->second.push_back(drives_[d].value);
      }
      for (const auto& [def, who] : byValue)
        parts.push_back(fmt::format("{} ({}: {})", code(def), family, fmt::join(who, ", ")));
    }
    if (parts.empty())
      throw std::logic_error(fmt::format("config reference: {} has defaults that no variant explains", e.rec.path));
    return fmt::format("{}", fmt::join(parts, "; "));
  }

  std::vector<Drive> drives_;
  std::map<std::pair<bool, std::string>, Entry> entries_;
  size_t order_ = 0;
};

std::string Collector::markdown() const {
  const std::vector<std::string> sections = {"run",   "model", "data",    "optim",          "schedule",
                                             "train", "comm",  "network", "compress", "compress: auto"};
  struct Group {
    std::string heading;
    size_t section, order;
    std::vector<const Entry*> entries;
  };
  std::map<std::string, Group> groups;
  for (const auto& [key, e] : entries_) {
    const std::string& path = e.rec.path;
    const auto dot = path.rfind('.');
    const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
    std::string heading = parent;
    if (e.automatic) heading = parent == "compress" ? "compress: auto" : parent + " (compress: auto)";
    const std::string top = e.automatic ? "compress: auto" : path.substr(0, path.find('.'));
    const size_t section = std::find(sections.begin(), sections.end(), top) - sections.begin();
    auto [it, fresh] = groups.try_emplace(heading, Group{heading, section, e.order, {}});
    it->second.order = std::min(it->second.order, e.order);
    it->second.entries.push_back(&e);
  }
  std::vector<Group*> ordered;
  for (auto& [h, g] : groups) ordered.push_back(&g);
  std::sort(ordered.begin(), ordered.end(),
            [](const Group* a, const Group* b) { return std::tie(a->section, a->order) < std::tie(b->section, b->order); });

  std::set<std::string> described;
  std::string out =
      "# Configuration reference\n"
      "\n"
      "<!-- Generated by `gradzip config --reference`; do not edit. Regenerate with\n"
      "     build/gradzip config --reference > docs/configuration.md -->\n"
      "\n"
      "Every key a run config (`gradzip train`, `launch`, a suite's `base`) accepts, as the parsers read it:\n"
      "its type, its default, its range (bounds inclusive) or valid values. Unknown keys, wrong types and\n"
      "out-of-range values are errors naming file, line and key. `--set key.path=value` sets any of them\n"
      "from the command line. Keys under a compressor's name (`compress.thc.bits`) apply when\n"
      "`compress.name` is that compressor; `compress: auto` (or `compress: {name: auto, ...}`) takes the\n"
      "keys of the section compress: auto instead. Usage: [usage.md](usage.md); the compressors:\n"
      "[compressors.md](compressors.md); the controller: [controller.md](controller.md).\n";
  for (const Group* g : ordered) {
    out += fmt::format("\n## {}\n\n| Key | Type | Default | Range | Description |\n|---|---|---|---|---|\n", g->heading);
    std::vector<const Entry*> entries = g->entries;
    std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->order < b->order; });
    for (const Entry* e : entries) {
      const std::string key = (e->automatic ? "auto " : "") + e->rec.path;
      std::string text;
      if (auto it = descriptions().find(key); it != descriptions().end()) {
        text = it->second;
        described.insert(key);
      }
      const std::string when = condition(*e);
      if (!when.empty()) text += (text.empty() ? "" : ". ") + when;
      out += fmt::format("| `{}` | {} | {} | {} | {} |\n", e->rec.path, e->rec.type, cell(defaultText(*e)),
                         cell(e->rec.range), cell(text));
    }
  }
  for (const auto& [key, text] : descriptions())
    if (!described.count(key))
      throw std::logic_error(fmt::format("config reference: a description names '{}', which no parser reads", key));
  return out;
}

}  // namespace

std::string configReference() {
  Collector c;
  const auto models = models::modelNames();
  const std::string model = fmt::format("model: {{name: {}}}\n", models.front());
  for (const auto& m : models) c.train(fmt::format("model: {{name: {}}}\n", m), {"model.name", m, false});
  for (const auto& d : data::DataOptions::datasetNames()) {
    // The datasets that need a location get one; nothing is opened.
    const std::string where = d == "image_folder" ? ", path: /nonexistent" : d == "text_mlm" ? ", text: {corpus: [/nonexistent]}" : "";
    c.train(fmt::format("{}data: {{dataset: {}{}}}\n", model, d, where), {"data.dataset", d, false});
  }
  for (const char* o : {"sgd", "adamw"})
    c.train(fmt::format("{}optim: {{name: {}}}\n", model, o), {"optim.name", o, false});
  for (const char* s : {"constant", "step", "cosine"})
    c.train(fmt::format("{}schedule: {{name: {}}}\n", model, s), {"schedule.name", s, false});
  for (const char* n : {"{mbit: 10}", "{schedule: [{at: 0, mbit: 10}]}", "{schedule: [{epoch: 0, mbit: 10}]}"})
    c.train(fmt::format("{}network: {}\n", model, n), {"", n, false});
  for (const auto& name : compress::compressorNames()) c.compressor(name);
  for (const char* o : {"sgd", "adamw"})
    c.train(fmt::format("{}optim: {{name: {}}}\ncompress: {{name: auto, initial: {{}}, pin: {{}}, small_plan: {{}}, "
                        "sparse_start_plan: {{}}, probe: {{}}}}\n",
                        model, o),
            {"optim.name", o, true});
  return c.markdown();
}

}  // namespace gradzip::trainer
