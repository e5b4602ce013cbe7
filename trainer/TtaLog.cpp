// Implements trainer/TtaLog.h with nlohmann-json for the JSONL rows.
#include "trainer/TtaLog.h"

#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace gradzip::trainer {
namespace {
const char* kMetricColumns[] = {"accuracy", "top5", "eval_loss", "mlm_accuracy", "perplexity"};
}

TtaLog::TtaLog(const std::string& dir, bool append) {
  std::filesystem::create_directories(dir);
  const auto mode = append ? std::ios::app : std::ios::trunc;
  const std::string csvPath = dir + "/tta.csv";
  headerWritten_ = append && std::filesystem::exists(csvPath) && std::filesystem::file_size(csvPath) > 0;
  jsonl_.open(dir + "/tta.jsonl", std::ios::out | mode);
  csv_.open(csvPath, std::ios::out | mode);
  GZ_CHECK(jsonl_ && csv_, "cannot write the TTA log in {}", dir);
}

void TtaLog::write(const TtaRow& r) {
  const auto& b = r.breakdown;
  nlohmann::json j = {{"train_seconds", r.trainSeconds},
                      {"step", r.step},
                      {"epoch", r.epoch},
                      {"samples", r.samples},
                      {"loss", r.loss},
                      {"metrics", r.metrics},
                      {"lr", r.lr},
                      {"plan", r.plan},
                      {"bytes", r.bytes},
                      {"saturated", r.saturated},
                      {"breakdown",
                       {{"data_wait", b.dataWait},
                        {"compute", b.compute},
                        {"encode", b.encode},
                        {"communicate", b.communicate},
                        {"decode", b.decode},
                        {"exposed", b.exposed},
                        {"optimizer", b.optimizer},
                        {"step", b.step}}}};
  jsonl_ << j.dump() << '\n';
  jsonl_.flush();
  if (!headerWritten_) {
    csv_ << "train_seconds,step,epoch,samples,loss";
    for (auto* m : kMetricColumns) csv_ << ',' << m;
    csv_ << ",lr,plan,bytes,saturated,data_wait,compute,encode,communicate,decode,exposed,optimizer,step_time\n";
    headerWritten_ = true;
  }
  csv_ << r.trainSeconds << ',' << r.step << ',' << r.epoch << ',' << r.samples << ',' << r.loss;
  for (auto* m : kMetricColumns) {
    auto it = r.metrics.find(m);
    csv_ << ',';
    if (it != r.metrics.end()) csv_ << it->second;
  }
  csv_ << ',' << r.lr << ",\"" << r.plan << "\"," << r.bytes << ',' << r.saturated << ',' << b.dataWait << ','
       << b.compute << ',' << b.encode << ',' << b.communicate << ',' << b.decode << ',' << b.exposed << ','
       << b.optimizer << ',' << b.step << '\n';
  csv_.flush();
}

}  // namespace gradzip::trainer
