// Implements compress/kernels/BitPack.h with a 64-bit bit buffer; 8- and 4-bit codes,
// the common cases, take byte-wise fast paths.
#include "compress/kernels/BitPack.h"

#include "util/Error.h"

#include <ATen/Dispatch.h>

#include <cstring>

namespace gradzip::compress {
namespace {

template <typename T>
void unpackInto(const uint8_t* in, int bits, int64_t n, T* out) {
  if (bits == 8) {
    for (int64_t k = 0; k < n; ++k) out[k] = static_cast<T>(in[k]);
    return;
  }
  if (bits == 4) {
    for (int64_t k = 0; k + 1 < n; k += 2) {
      out[k] = static_cast<T>(in[k / 2] & 0xF);
      out[k + 1] = static_cast<T>(in[k / 2] >> 4);
    }
    if (n % 2) out[n - 1] = static_cast<T>(in[n / 2] & 0xF);
    return;
  }
  const uint64_t mask = bits == 64 ? ~0ULL : ((1ULL << bits) - 1);
  uint64_t buf = 0;
  int have = 0;
  int64_t byte = 0;
  for (int64_t k = 0; k < n; ++k) {
    while (have < bits) {
      buf |= static_cast<uint64_t>(in[byte++]) << have;
      have += 8;
    }
    out[k] = static_cast<T>(buf & mask);
    buf >>= bits;
    have -= bits;
  }
}

// Packs src[0, n) into dst (zeroed, packedBytes(n, bits) bytes) in the codes'
// own type (no widening copy); returns whether a code lies outside [0, 2^bits).
template <typename T>
bool packFrom(const T* src, int64_t n, int bits, uint8_t* dst) {
  const int64_t limit = int64_t{1} << bits;
  bool bad = false;
  if (bits == 8) {
    for (int64_t k = 0; k < n; ++k) {
      bad |= static_cast<int64_t>(src[k]) < 0 || static_cast<int64_t>(src[k]) >= limit;
      dst[k] = static_cast<uint8_t>(src[k]);
    }
  } else if (bits == 4) {
    for (int64_t k = 0; k + 1 < n; k += 2) {
      bad |= static_cast<int64_t>(src[k]) < 0 || static_cast<int64_t>(src[k]) >= limit ||
             static_cast<int64_t>(src[k + 1]) < 0 || static_cast<int64_t>(src[k + 1]) >= limit;
      dst[k / 2] = static_cast<uint8_t>((src[k] & 0xF) | ((src[k + 1] & 0xF) << 4));
    }
    if (n % 2) {
      bad |= static_cast<int64_t>(src[n - 1]) < 0 || static_cast<int64_t>(src[n - 1]) >= limit;
      dst[n / 2] = static_cast<uint8_t>(src[n - 1] & 0xF);
    }
  } else {
    uint64_t buf = 0;
    int have = 0;
    int64_t byte = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t v = static_cast<int64_t>(src[k]);
      bad |= v < 0 || v >= limit;
      buf |= static_cast<uint64_t>(v & (limit - 1)) << have;
      have += bits;
      while (have >= 8) {
        dst[byte++] = static_cast<uint8_t>(buf & 0xFF);
        buf >>= 8;
        have -= 8;
      }
    }
    if (have > 0) dst[byte] = static_cast<uint8_t>(buf & 0xFF);
  }
  return bad;
}

// 4- and 2-bit codes held in bytes, two or four to a byte, without packFrom's
// range checks (packCodes' callers guarantee the range), so the loops
// vectorise: compiled for AVX-512, AVX2 and baseline x86-64.
#if defined(__x86_64__) && defined(__GNUC__)
#define GZ_BITPACK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GZ_BITPACK_CLONES
#endif

GZ_BITPACK_CLONES void packNibbles(const uint8_t* __restrict codes, int64_t pairs, uint8_t* __restrict dst) {
  for (int64_t w = 0; w < pairs; ++w)
    dst[w] = static_cast<uint8_t>((codes[2 * w] & 0xF) | (codes[2 * w + 1] << 4));
}

GZ_BITPACK_CLONES void packCrumbs(const uint8_t* __restrict codes, int64_t quads, uint8_t* __restrict dst) {
  for (int64_t w = 0; w < quads; ++w)
    dst[w] = static_cast<uint8_t>((codes[4 * w] & 3) | ((codes[4 * w + 1] & 3) << 2) | ((codes[4 * w + 2] & 3) << 4) |
                                  (codes[4 * w + 3] << 6));
}

GZ_BITPACK_CLONES void unpackCrumbs(const uint8_t* __restrict in, int64_t quads, uint8_t* __restrict out) {
  for (int64_t w = 0; w < quads; ++w)
    for (int j = 0; j < 4; ++j) out[4 * w + j] = static_cast<uint8_t>((in[w] >> (2 * j)) & 3);
}

GZ_BITPACK_CLONES void unpackNibbles(const uint8_t* __restrict in, int64_t pairs, uint8_t* __restrict out) {
  for (int64_t w = 0; w < pairs; ++w) {
    out[2 * w] = static_cast<uint8_t>(in[w] & 0xF);
    out[2 * w + 1] = static_cast<uint8_t>(in[w] >> 4);
  }
}

// Widths up to 8 bits, eight codes at a time: 8·bits bits are `bits` whole
// bytes, assembled in a 64-bit word (little-endian, as the byte stream's
// LSB-first order needs). A group stores all 8 bytes of the word where the
// stream has room for them (the next groups overwrite the bytes past its
// own), its own `bits` bytes at the end; reads likewise.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "BitPack's 8-code groups assume little-endian words");

template <typename T>
void packGroups(const T* __restrict codes, int64_t groups, int bits, uint8_t* __restrict dst) {
  for (int64_t g = 0; g < groups; ++g) {
    uint64_t word = 0;
    for (int j = 0; j < 8; ++j) word |= static_cast<uint64_t>(codes[8 * g + j]) << (j * bits);
    std::memcpy(dst + g * bits, &word, g * bits + 8 <= groups * bits ? 8 : static_cast<size_t>(bits));
  }
}

template <typename T>
void unpackGroups(const uint8_t* __restrict in, int64_t groups, int bits, T* __restrict out) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  for (int64_t g = 0; g < groups; ++g) {
    uint64_t word = 0;
    std::memcpy(&word, in + g * bits, g * bits + 8 <= groups * bits ? 8 : static_cast<size_t>(bits));
    for (int j = 0; j < 8; ++j) out[8 * g + j] = static_cast<T>((word >> (j * bits)) & mask);
  }
}

}  // namespace

int64_t packedBytes(int64_t n, int bits) { return (n * bits + 7) / 8; }

at::Tensor packBits(const at::Tensor& codes, int bits) {
  GZ_CHECK(bits >= 1 && bits <= 32, "packBits: bits must be in [1, 32], got {}", bits);
  GZ_CHECK(codes.dim() == 1 && !at::isFloatingType(codes.scalar_type()),
           "packBits: expected a 1-D integer tensor of codes");
  auto c = codes.cpu().contiguous();
  if (c.scalar_type() == at::kBool) c = c.to(at::kByte);
  auto out = at::zeros({packedBytes(c.numel(), bits)}, at::kByte);
  bool bad = false;
  AT_DISPATCH_INTEGRAL_TYPES(c.scalar_type(), "packBits", [&] {
    bad = packFrom(c.data_ptr<scalar_t>(), c.numel(), bits, out.data_ptr<uint8_t>());
  });
  GZ_CHECK(!bad, "packBits: a code lies outside [0, 2^{})", bits);
  return out;
}

at::Tensor unpackBits(const at::Tensor& packed, int bits, int64_t n, at::ScalarType out) {
  GZ_CHECK(bits >= 1 && bits <= 32, "unpackBits: bits must be in [1, 32], got {}", bits);
  GZ_CHECK(packed.scalar_type() == at::kByte && packed.dim() == 1, "unpackBits: expected a 1-D uint8 tensor");
  GZ_CHECK(packed.numel() >= packedBytes(n, bits), "unpackBits: {} bytes cannot hold {} codes of {} bits",
           packed.numel(), n, bits);
  auto p = packed.cpu().contiguous();
  auto res = at::empty({n}, at::TensorOptions().dtype(out));
  const uint8_t* in = p.data_ptr<uint8_t>();
  switch (out) {
    case at::kByte:
      GZ_CHECK(bits <= 8, "unpackBits: uint8 cannot hold {}-bit codes", bits);
      unpackInto(in, bits, n, res.data_ptr<uint8_t>());
      break;
    case at::kShort:
      GZ_CHECK(bits <= 15, "unpackBits: int16 cannot hold {}-bit codes", bits);
      unpackInto(in, bits, n, res.data_ptr<int16_t>());
      break;
    case at::kInt:
      GZ_CHECK(bits <= 31, "unpackBits: int32 cannot hold {}-bit codes", bits);
      unpackInto(in, bits, n, res.data_ptr<int32_t>());
      break;
    case at::kLong:
      unpackInto(in, bits, n, res.data_ptr<int64_t>());
      break;
    default:
      GZ_CHECK(false, "unpackBits: unsupported output dtype {}", c10::toString(out));
  }
  return res;
}

void packCodes(const uint8_t* codes, int64_t n, int bits, uint8_t* dst) {
  if (bits == 8) {
    std::memcpy(dst, codes, static_cast<size_t>(n));
  } else if (bits == 4 && n % 2 == 0) {
    packNibbles(codes, n / 2, dst);
  } else if (bits == 2 && n % 4 == 0) {
    packCrumbs(codes, n / 4, dst);
  } else if (n % 8 == 0) {
    packGroups(codes, n / 8, bits, dst);
  } else {
    packFrom(codes, n, bits, dst);
  }
}

void packCodes(const int32_t* codes, int64_t n, int bits, uint8_t* dst) {
  if (bits <= 8 && n % 8 == 0)
    packGroups(codes, n / 8, bits, dst);
  else
    packFrom(codes, n, bits, dst);
}

void unpackCodes(const uint8_t* in, int bits, int64_t n, uint8_t* out) {
  if (bits == 8) {
    std::memcpy(out, in, static_cast<size_t>(n));
  } else if (bits == 4 && n % 2 == 0) {
    unpackNibbles(in, n / 2, out);
  } else if (bits == 2 && n % 4 == 0) {
    unpackCrumbs(in, n / 4, out);
  } else if (n % 8 == 0) {
    unpackGroups(in, n / 8, bits, out);
  } else {
    unpackInto(in, bits, n, out);
  }
}

void unpackCodes(const uint8_t* in, int bits, int64_t n, int32_t* out) {
  if (bits <= 8 && n % 8 == 0)
    unpackGroups(in, n / 8, bits, out);
  else
    unpackInto(in, bits, n, out);
}

}  // namespace gradzip::compress
