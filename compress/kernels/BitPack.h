// Sub-byte packing of b-bit codes, so a payload's bytes equal its declared bits:
// code k of a vector occupies bits [k·b, (k+1)·b) of the byte stream, least
// significant bit first (4-bit codes: two per byte, code 2j in the low nibble).
// Shared by every quantizer (THC, QSGD, natural dithering, ...).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress {

// Bytes that n codes of `bits` bits occupy: ceil(n·bits / 8).
int64_t packedBytes(int64_t n, int bits);

// Packs a 1-D integer tensor (any integer dtype) of codes in [0, 2^bits) into a
// uint8 tensor of packedBytes(n, bits) bytes; 1 <= bits <= 32. Codes out of range
// are a UserError (they would corrupt their neighbours).
at::Tensor packBits(const at::Tensor& codes, int bits);

// Inverse of packBits: the first n codes of `packed` (uint8, at least
// packedBytes(n, bits) bytes) as a 1-D tensor of dtype `out` (uint8, int16,
// int32 or int64; it must hold 2^bits - 1).
at::Tensor unpackBits(const at::Tensor& packed, int bits, int64_t n, at::ScalarType out = at::kInt);

// The same layout on raw memory, for kernels that pack a tile at a time:
// codes[0, n) (each below 2^bits, not checked; 1 <= bits <= 8 for uint8
// codes, <= 32 for int32) into dst[0, packedBytes(n, bits)), every byte
// written.
void packCodes(const uint8_t* codes, int64_t n, int bits, uint8_t* dst);
void packCodes(const int32_t* codes, int64_t n, int bits, uint8_t* dst);
// The first n codes of `in` (1 <= bits <= 31).
void unpackCodes(const uint8_t* in, int bits, int64_t n, uint8_t* out);
void unpackCodes(const uint8_t* in, int bits, int64_t n, int32_t* out);

}  // namespace gradzip::compress
