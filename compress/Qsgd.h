// QSGD (Alistarh et al., 2017): standard random dithering D_sta^{p,s} with the
// s + 1 uniform levels 0, 1/s, ..., 1 on |x_i|/||x||_p (natural-compression
// paper, Definition 3 with the linear partition). Unbiased. 4-bit QSGD (the
// GradiVeQ baseline) is s = 7: a sign bit and a 3-bit level index. The norm is
// per bucket of 512 coordinates by default, as QSGD's experiments quantise
// (compress/Dithering.h, "Buckets").
#pragma once

#include "compress/Dithering.h"
#include "util/Yaml.h"

namespace gradzip::compress {

struct QsgdOptions {
  int levels = 7;           // s
  std::string norm = "2";  // p of the p-norm: a number >= 1 or "inf"
  std::string deployment = "allgather";  // "allgather" | "ps" | "ring" (when the context names none)
  int64_t bucket = 512;    // coordinates per norm (Alistarh et al. 2017, bucketing); 0 = one norm for all

  static QsgdOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

class Qsgd : public Dithering {
 public:
  explicit Qsgd(const QsgdOptions& options);
  static std::vector<float> uniformLevels(int s);
};

}  // namespace gradzip::compress
