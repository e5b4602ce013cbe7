// Implements compress/kernels/AesNoise.h: the AES round in portable table form (the
// S-box built at compile time from its definition, FIPS-197 §5.1.1: the
// inverse in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1, then the affine map), the
// scalar noise block with AES-NI when the CPU has it, and the CPU checks.
#include "compress/kernels/AesNoise.h"

namespace gradzip::compress::aesnoise {
namespace {

constexpr uint8_t xtime(uint8_t a) { return static_cast<uint8_t>((a << 1) ^ ((a >> 7) * 0x1B)); }

constexpr uint8_t gfMul(uint8_t a, uint8_t b) {
  uint8_t p = 0;
  for (int i = 0; i < 8; ++i, a = xtime(a), b >>= 1)
    if (b & 1) p ^= a;
  return p;
}

constexpr uint8_t rotl8(uint8_t x, int s) { return static_cast<uint8_t>((x << s) | (x >> (8 - s))); }

constexpr std::array<uint8_t, 256> makeSbox() {
  std::array<uint8_t, 256> s{};
  for (int x = 0; x < 256; ++x) {
    uint8_t inv = 0;  // x^254 = x^-1 (0 for 0)
    for (int y = 1; y < 256 && x != 0; ++y)
      if (gfMul(static_cast<uint8_t>(x), static_cast<uint8_t>(y)) == 1) inv = static_cast<uint8_t>(y);
    s[x] = static_cast<uint8_t>(inv ^ rotl8(inv, 1) ^ rotl8(inv, 2) ^ rotl8(inv, 3) ^ rotl8(inv, 4) ^ 0x63);
  }
  return s;
}

constexpr std::array<uint8_t, 256> kSbox = makeSbox();
static_assert(kSbox[0x00] == 0x63 && kSbox[0x01] == 0x7C && kSbox[0x53] == 0xED, "FIPS-197 Figure 7");

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("aes,sse4.1"))) Block twoRoundsAesNi(Block state) {
  const __m128i p = _mm_set_epi64x(static_cast<long long>(state.hi), static_cast<long long>(state.lo));
  const __m128i k1 = _mm_set_epi64x(static_cast<long long>(kKey1Hi), static_cast<long long>(kKey1Lo));
  const __m128i k2 = _mm_set_epi64x(static_cast<long long>(kKey2Hi), static_cast<long long>(kKey2Lo));
  const __m128i r = _mm_aesenc_si128(_mm_aesenc_si128(p, k1), k2);
  return {static_cast<uint64_t>(_mm_cvtsi128_si64(r)), static_cast<uint64_t>(_mm_extract_epi64(r, 1))};
}
#endif

}  // namespace

Block aesencTable(Block state, Block key) {
  uint8_t s[16], t[16];
  for (int j = 0; j < 8; ++j) {
    s[j] = static_cast<uint8_t>(state.lo >> (8 * j));
    s[8 + j] = static_cast<uint8_t>(state.hi >> (8 * j));
  }
  // Byte r + 4c is row r of column c; ShiftRows moves row r left by r, then SubBytes.
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 4; ++r) t[4 * c + r] = kSbox[s[4 * ((c + r) % 4) + r]];
  Block out{0, 0};
  for (int c = 0; c < 4; ++c) {  // MixColumns (FIPS-197 §5.1.3), then the round key
    const uint8_t a0 = t[4 * c], a1 = t[4 * c + 1], a2 = t[4 * c + 2], a3 = t[4 * c + 3];
    const uint8_t col[4] = {
        static_cast<uint8_t>(xtime(a0) ^ xtime(a1) ^ a1 ^ a2 ^ a3),
        static_cast<uint8_t>(a0 ^ xtime(a1) ^ xtime(a2) ^ a2 ^ a3),
        static_cast<uint8_t>(a0 ^ a1 ^ xtime(a2) ^ xtime(a3) ^ a3),
        static_cast<uint8_t>(xtime(a0) ^ a0 ^ a1 ^ a2 ^ xtime(a3)),
    };
    for (int r = 0; r < 4; ++r) {
      const int j = 4 * c + r;
      uint64_t& half = j < 8 ? out.lo : out.hi;
      half |= static_cast<uint64_t>(col[r]) << (8 * (j % 8));
    }
  }
  return {out.lo ^ key.lo, out.hi ^ key.hi};
}

Block block(uint64_t seed, uint64_t b) {
  const Block p{seed + (2 * b + 1) * kSplitmixGamma, seed + (2 * b + 2) * kSplitmixGamma};  // words 2b, 2b + 1
#if defined(__x86_64__) && defined(__GNUC__)
  if (haveAesNi()) return twoRoundsAesNi(p);
#endif
  return aesencTable(aesencTable(p, {kKey1Lo, kKey1Hi}), {kKey2Lo, kKey2Hi});
}

bool haveAesNi() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool v = __builtin_cpu_supports("aes");
  return v;
#else
  return false;
#endif
}

bool haveVaes512() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool v = __builtin_cpu_supports("vaes") && __builtin_cpu_supports("avx512f");
  return v;
#else
  return false;
#endif
}

}  // namespace gradzip::compress::aesnoise
