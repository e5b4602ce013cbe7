// The float wire types an option may name ("fp32", "fp16", "bf16") for the
// values a sparsifier sends, with their YAML parsing; shared by TopK, TopKC.
#pragma once

#include "util/Yaml.h"

#include <ATen/ATen.h>

#include <string>

namespace gradzip::compress {

// Reads `key` as one of fp32|fp16|bf16 (ConfigError listing them otherwise).
at::ScalarType readFloatWire(YamlReader& r, const std::string& key, at::ScalarType def);
// "fp32", "fp16" or "bf16"; GZ_ASSERT on any other type.
std::string floatWireName(at::ScalarType t);
// Bits of one value of the wire type.
inline int floatWireBits(at::ScalarType t) { return 8 * static_cast<int>(c10::elementSize(t)); }

// Throws UserError unless x has at least one element (the compressors need d >= 1).
void checkNonEmpty(const at::Tensor& x, const std::string& who);

}  // namespace gradzip::compress
