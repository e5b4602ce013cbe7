// Which implementation a compressor's codec runs. Every scheme has a
// device-generic implementation written in ATen operations: the reference
// path, and the only one for CUDA tensors. Schemes with CPU SIMD kernels
// (compress/kernels/) run those on CPU tensors instead: the fast path.
// `generic` forces the reference path on CPU too, so the tests run every
// compressor through both paths and a CPU run can reproduce what a GPU run
// computes. The YAML key `codec: auto|generic` of any compressor sets it
// (compress/Factory.cpp); an application may set the process default once at
// start-up, before it builds compressors (cli/main.cpp and the test main read
// GRADZIP_CODEC_PATH).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace gradzip::compress {

enum class CodecPath { Auto, Generic };

// "auto" or "generic".
const std::vector<std::string>& codecPathNames();
std::string toString(CodecPath p);
// Throws UserError naming `where`, the value and the valid names.
CodecPath parseCodecPath(const std::string& name, const std::string& where);

// The path new compressors start with (Auto unless an application changed it).
CodecPath defaultCodecPath();
void setDefaultCodecPath(CodecPath p);

// True when `who` should run its CPU SIMD kernels on x: x is on the CPU and
// the path is not forced generic. Logs, once per process for each (who,
// path, device type), which path ran, so a run's log says where its codecs
// computed.
bool takesFastPath(const std::string& who, CodecPath p, const at::Tensor& x);

}  // namespace gradzip::compress
