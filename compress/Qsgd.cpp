// Implements compress/Qsgd.h: the level set and options of standard dithering.
#include "compress/Qsgd.h"

#include "util/Error.h"

namespace gradzip::compress {

QsgdOptions QsgdOptions::fromYaml(YamlReader& r) {
  QsgdOptions o;
  o.levels = static_cast<int>(r.getInt("levels", o.levels, 1, 1 << 20));
  o.norm = r.getString("norm", o.norm);
  parseNormOrder(o.norm, "qsgd");
  o.deployment = r.getEnum("deployment", o.deployment, {"allgather", "ps", "ring"});
  o.bucket = r.getInt("bucket", o.bucket, 0, int64_t{1} << 40);
  r.finish();
  return o;
}

void QsgdOptions::toYaml(YAML::Node& node) const {
  node["levels"] = levels;
  node["norm"] = norm;
  node["deployment"] = deployment;
  node["bucket"] = bucket;
}

std::vector<float> Qsgd::uniformLevels(int s) {
  GZ_CHECK(s >= 1, "qsgd: levels s must be >= 1, got {}", s);
  std::vector<float> lv(s + 1);
  for (int j = 0; j <= s; ++j) lv[j] = static_cast<float>(static_cast<double>(j) / s);  // l = j/s
  return lv;
}

Qsgd::Qsgd(const QsgdOptions& options)
    : Dithering("qsgd", uniformLevels(options.levels), parseNormOrder(options.norm, "qsgd"),
                options.deployment, options.bucket) {}

}  // namespace gradzip::compress
