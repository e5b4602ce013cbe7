// `gradzip compare SUITE.yaml`: runs arms (one compressor plan each) of the same
// training setup one after another on N local ranks, with FP16 and FP32
// baselines always included, then writes and prints a time-to-accuracy summary
// (end-to-end-utility paper: TTA is the metric, utility = speedup over FP16,
// FP32 always shown, targets never reached are reported; experiments/
// CompareSummary.h has the columns). A rerun skips runs that already finished,
// and a run another suite under out_dir already trained with the same config
// and executable is copied from there (experiments/RunReuse.h).
//
// Suite file:
//   suite: {name: quickstart, world_size: 2, targets: [0.7, 0.8], out_dir: runs,
//           repeats: 2,                     # each arm twice, seeds run.seed + 0, + 1
//           networks: [{name: 10M, mbit: 10}, {name: host}]}  # optional sweep
//   base:  {a train config without `compress`: run, model, data, optim, ...}
//   arms:  [{name: fp16, compress: {name: fp16}}, {name: thc4, compress: {...}},
//           {name: ddp_fp16, ddp: {hook: fp16}},               # PyTorch DDP peer arms:
//           {name: ddp_psgd4, ddp: {hook: powersgd, powersgd_rank: 4}}]  # none | fp16 | powersgd
// `networks` runs every arm on each network (a `network:` block plus a name;
// only a name = the host network, no emulation) into out_dir/name/<network>/,
// each with its own summary and FP16 baseline; the base must then have no
// `network`. Run directories: <group>/<arm> for the first repeat,
// <group>/<arm>.r<k> for repeat k >= 1.
#pragma once

#include <string>
#include <vector>

namespace gradzip::experiments {

struct CompareArgs {
  std::string suite;
  std::vector<std::string> only;  // run only these arms (by name)
  bool rerun = false;             // rerun finished arms too
  // Copy a finished run of the same config, world size and executable from
  // another suite under out_dir instead of training it again (RunReuse.h).
  bool reuse = true;
  // Parse the suite and every run's effective config, print the plan (one line
  // per run: network, arm, repeat, seed, plan, budget, state) and train nothing.
  bool dryRun = false;
};
// Returns 0, or throws UserError/ConfigError naming the suite file, line and
// key for a bad suite. A failed run (nonzero exit of any rank: a diverging
// compressor under nan_policy: error, a dead peer, ...) does not stop the
// suite: it leaves RUN_DIR/failed ("exit status N"), the other arms run, the
// summary shows its rows so far and marks it failed, and then compare throws
// a UserError naming every failed run. A rerun retries them.
int compareCommand(const CompareArgs& args, const std::string& selfExe);

}  // namespace gradzip::experiments
