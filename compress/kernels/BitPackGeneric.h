// The sub-byte packing of compress/kernels/BitPack.h written in ATen
// operations, for the device-generic codec paths (compress/CodecPath.h): the
// same byte stream (code k in bits [k·b, (k+1)·b), least significant bit
// first, unused high bits of the last byte zero) on any device, so a CUDA
// run's payload equals what the CPU kernels put on the wire. Results live on
// the input's device.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress::generic {

// compress::packBits on the codes' device: a 1-D integer tensor of codes in
// [0, 2^bits) becomes packedBytes(n, bits) uint8 bytes; 1 <= bits <= 32.
// Codes out of range are a UserError (one reduction and one scalar read
// back); `checked` = false skips that check for callers that guarantee it.
at::Tensor packBits(const at::Tensor& codes, int bits, bool checked = true);

// compress::unpackBits on the bytes' device: the first n codes of `packed`
// (1-D uint8, at least packedBytes(n, bits) bytes) as a 1-D tensor of dtype
// `out` (uint8, int16, int32 or int64; it must hold 2^bits − 1).
at::Tensor unpackBits(const at::Tensor& packed, int bits, int64_t n, at::ScalarType out = at::kInt);

}  // namespace gradzip::compress::generic
