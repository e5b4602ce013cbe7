// Implements compress/FloatWire.h.
#include "compress/FloatWire.h"

#include "util/Error.h"

namespace gradzip::compress {

at::ScalarType readFloatWire(YamlReader& r, const std::string& key, at::ScalarType def) {
  const std::string s = r.getEnum(key, floatWireName(def), {"fp32", "fp16", "bf16"});
  if (s == "fp16") return at::kHalf;
  if (s == "bf16") return at::kBFloat16;
  return at::kFloat;
}

std::string floatWireName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "fp32";
    case at::kHalf: return "fp16";
    case at::kBFloat16: return "bf16";
    default: GZ_ASSERT(false, "not a float wire type: {}", c10::toString(t));
  }
  return {};
}

void checkNonEmpty(const at::Tensor& x, const std::string& who) {
  GZ_CHECK(x.numel() > 0, "{}: empty gradient (a bucket needs at least one coordinate)", who);
}

}  // namespace gradzip::compress
