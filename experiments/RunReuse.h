// Reuse of finished runs across suites. Suites that share a setup (the three
// BERT-mini suites share their FP32/FP16 baselines and the controller arm)
// would otherwise train the same run once per suite. A gradzip run is the
// same run when its arm config is the same apart from run.name and
// run.out_dir (compared as canonical text, so YAML styles do not matter), on
// the same world size, trained by the same executable (FNV-1a of its bytes,
// recorded as environment.json's executable_fingerprint; a git revision
// would not see uncommitted changes). PyTorch DDP arms are never reused: their
// code is a Python script the fingerprint does not cover.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>

namespace gradzip::experiments {

// Maps with sorted keys, sequences in order, scalars as written.
std::string canonicalYaml(const YAML::Node& node);

// The finished run (a directory with `done`, arm.yaml and environment.json)
// below outDir, other than `self`, that trained `armCfg` on worldSize ranks
// with the executable whose fingerprint is `executableFingerprint` (empty:
// none). Looks at most three levels deep (suite / network group / arm).
std::optional<std::string> findReusableRun(const std::string& outDir, const std::string& self,
                                           const YAML::Node& armCfg, int worldSize,
                                           const std::string& executableFingerprint);

// Whether the finished run in `dir` trained `armCfg` (its arm.yaml has the
// same canonical config apart from run.name and run.out_dir). A run whose
// arm.yaml is missing or unreadable counts as different.
bool sameArmConfig(const std::string& dir, const YAML::Node& armCfg);

// Copies `from` into `to` (which must not hold a finished run), records the
// source in to/reused_from and marks `to` done.
void reuseRun(const std::string& from, const std::string& to);

}  // namespace gradzip::experiments
