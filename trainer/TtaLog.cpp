// Implements trainer/TtaLog.h with nlohmann-json for the JSONL rows.
#include "trainer/TtaLog.h"

#include <cmath>

#include "util/RunLogs.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace gradzip::trainer {
namespace {
const char* kMetricColumns[] = {"accuracy", "top5", "eval_loss", "mlm_accuracy", "perplexity"};

// The step of a CSV row, its second column; -1 for the header and for a row
// torn by the kill, which is dropped with the rows after the checkpoint.
int64_t csvStep(const std::string& line) {
  const auto a = line.find(',');
  if (a == std::string::npos) return -1;
  try {
    size_t used = 0;
    const auto field = line.substr(a + 1, line.find(',', a + 1) - a - 1);
    const int64_t s = std::stoll(field, &used);
    return used == field.size() ? s : -1;
  } catch (const std::exception&) {
    return -1;
  }
}
}  // namespace

TtaLog::TtaLog(const std::string& dir, int64_t resumedStep) {
  std::filesystem::create_directories(dir);
  const std::string jsonlPath = dir + "/tta.jsonl", csvPath = dir + "/tta.csv";
  const bool append = resumedStep >= 0;
  if (append) {
    keepJsonLinesThrough(jsonlPath, resumedStep);
    bool header = true;
    keepLines(csvPath, [&](const std::string& l) {
      const int64_t step = csvStep(l);
      const bool keep = header || (step >= 0 && step <= resumedStep);
      header = false;
      return keep;
    });
  }
  const auto mode = append ? std::ios::app : std::ios::trunc;
  headerWritten_ = append && std::filesystem::exists(csvPath) && std::filesystem::file_size(csvPath) > 0;
  jsonl_.open(jsonlPath, std::ios::out | mode);
  csv_.open(csvPath, std::ios::out | mode);
  GZ_CHECK(jsonl_ && csv_, "cannot write the TTA log in {}", dir);
}

void TtaLog::write(const TtaRow& r) {
  const auto& b = r.breakdown;
  nlohmann::json j = {{"train_seconds", r.trainSeconds},
                      {"step", r.step},
                      {"epoch", r.epoch},
                      {"samples", r.samples},
                      {"loss", std::isfinite(r.loss) ? nlohmann::json(r.loss) : nlohmann::json(nullptr)},
                      {"metrics", r.metrics},
                      {"lr", r.lr},
                      {"plan", r.plan},
                      {"bytes", r.bytes},
                      {"saturated", r.saturated},
                      {"loss_spikes", r.lossSpikes},
                      {"skipped_steps", r.skippedSteps},
                      {"nonfinite_losses", r.nonFiniteLosses},
                      {"residual_norm", r.residualNorm},
                      {"vnmse", std::isfinite(r.vnmse) ? nlohmann::json(r.vnmse) : nlohmann::json(nullptr)},
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
    csv_ << ",lr,plan,bytes,saturated,loss_spikes,residual_norm,vnmse,data_wait,compute,encode,communicate,decode,exposed,optimizer,step_time,skipped_steps,nonfinite_losses\n";
    headerWritten_ = true;
  }
  csv_ << r.trainSeconds << ',' << r.step << ',' << r.epoch << ',' << r.samples << ',' << r.loss;
  for (auto* m : kMetricColumns) {
    auto it = r.metrics.find(m);
    csv_ << ',';
    if (it != r.metrics.end()) csv_ << it->second;
  }
  csv_ << ',' << r.lr << ",\"" << r.plan << "\"," << r.bytes << ',' << r.saturated << ',' << r.lossSpikes << ',' << r.residualNorm << ',';
  if (std::isfinite(r.vnmse)) csv_ << r.vnmse;
  csv_ << ',' << b.dataWait << ','
       << b.compute << ',' << b.encode << ',' << b.communicate << ',' << b.decode << ',' << b.exposed << ','
       << b.optimizer << ',' << b.step << ',' << r.skippedSteps << ',' << r.nonFiniteLosses << '\n';
  csv_.flush();
}

}  // namespace gradzip::trainer
