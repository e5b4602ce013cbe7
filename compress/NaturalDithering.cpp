// Implements compress/NaturalDithering.h: the level set, options and Theorem 4.
#include "compress/NaturalDithering.h"

#include "util/Error.h"

#include <cmath>

namespace gradzip::compress {

NaturalDitheringOptions NaturalDitheringOptions::fromYaml(YamlReader& r) {
  NaturalDitheringOptions o;
  o.levels = static_cast<int>(r.getInt("levels", o.levels, 1, 126));
  o.norm = r.getString("norm", o.norm);
  parseNormOrder(o.norm, "dnat");
  o.deployment = r.getEnum("deployment", o.deployment, {"allgather", "ps", "ring"});
  o.bucket = r.getInt("bucket", o.bucket, 0, int64_t{1} << 40);
  r.finish();
  return o;
}

void NaturalDitheringOptions::toYaml(YAML::Node& node) const {
  node["levels"] = levels;
  node["norm"] = norm;
  node["deployment"] = deployment;
  node["bucket"] = bucket;
}

std::vector<float> NaturalDithering::naturalLevels(int s) {
  GZ_CHECK(s >= 1 && s <= 126, "dnat: levels s must be in [1, 126], got {}", s);
  std::vector<float> lv(s + 1);
  lv[0] = 0.0f;
  for (int j = 1; j <= s; ++j) lv[j] = std::ldexp(1.0f, j - s);  // 2^(1−s), ..., 1/2, 1
  return lv;
}

double NaturalDithering::theorem4Omega(int64_t d, int s, double p) {
  const double r = std::min(p, 2.0);
  const double a = std::pow(static_cast<double>(d), 1.0 / r) * std::ldexp(1.0, 1 - s);
  return 1.0 / 8 + a * std::min(1.0, a);
}

NaturalDithering::NaturalDithering(const NaturalDitheringOptions& options)
    : Dithering("dnat", naturalLevels(options.levels), parseNormOrder(options.norm, "dnat"),
                options.deployment, options.bucket) {}

}  // namespace gradzip::compress
