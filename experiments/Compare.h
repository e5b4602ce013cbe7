// `gradzip compare SUITE.yaml`: runs arms (one compressor plan each) of the same
// training setup one after another on N local ranks, with FP16 and FP32
// baselines always included, then writes and prints a time-to-accuracy summary
// (end-to-end-utility paper: TTA is the metric, utility = speedup over FP16,
// FP32 always shown, targets never reached are reported). A rerun skips arms
// that already finished.
//
// Suite file:
//   suite: {name: quickstart, world_size: 2, targets: [0.7, 0.8], out_dir: runs}
//   base:  {a train config without `compress`: run, model, data, optim, ...}
//   arms:  [{name: fp16, compress: {name: fp16}}, {name: thc4, compress: {...}},
//           {name: ddp_fp16, ddp: {hook: fp16}},               # PyTorch DDP peer arms:
//           {name: ddp_psgd4, ddp: {hook: powersgd, powersgd_rank: 4}}]  # none | fp16 | powersgd
#pragma once

#include <string>
#include <vector>

namespace gradzip::experiments {

struct CompareArgs {
  std::string suite;
  std::vector<std::string> only;  // run only these arms (by name)
  bool rerun = false;             // rerun finished arms too
};
int compareCommand(const CompareArgs& args, const std::string& selfExe);

}  // namespace gradzip::experiments
