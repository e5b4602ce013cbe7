// Natural dithering D_nat^{p,s} (natural-compression paper §3): general
// dithering with the binary geometric levels 0, 2^(1−s), ..., 1/2, 1 on
// |x_i|/||x||_p. Unbiased; Theorem 4: D_nat ∈ B(ω) with
// ω = 1/8 + d^{1/r}·2^{1−s}·min{1, d^{1/r}·2^{1−s}}, r = min(p, 2). One norm
// for the whole vector by default (Definition 3 as written); `bucket` takes
// it per bucket as QSGD does (compress/Dithering.h), and d becomes B in ω.
#pragma once

#include "compress/Dithering.h"
#include "util/Yaml.h"

namespace gradzip::compress {

struct NaturalDitheringOptions {
  int levels = 8;          // s (8 levels + zero: sign + 4-bit index)
  std::string norm = "2";  // p: a number >= 1 or "inf"
  std::string deployment = "allgather";  // "allgather" | "ps" | "ring" (when the context names none)
  int64_t bucket = 0;      // coordinates per norm; 0 = one norm for the whole vector

  static NaturalDitheringOptions fromYaml(YamlReader& r);
  void toYaml(YAML::Node& node) const;
};

class NaturalDithering : public Dithering {
 public:
  explicit NaturalDithering(const NaturalDitheringOptions& options);
  static std::vector<float> naturalLevels(int s);
  // Theorem 4's ω for dimension d.
  static double theorem4Omega(int64_t d, int s, double p);
};

}  // namespace gradzip::compress
