// Implements compress/kernels/TopKSelect.h. Keys are the float bits with the sign
// cleared (|x| orders like them as unsigned integers, NaN above Inf). Pass 1:
// four interleaved 2048-bin histograms of key >> 20 (so consecutive equal bins
// do not serialise on one counter). Pass 2: the keys of the bin that holds the
// K-th largest. Pass 3: the indices above the threshold, and the first `ties`
// equal to it. Passes 2 and 3 are branch-free appends in the portable loop; on
// the AVX-512 tier each step compresses 16 lanes in a register and stores all
// 16 (the output has kSpare slots past its end), since a compress straight to
// memory is microcoded on AMD Zen 4 (experiments/results/compressors_log.md,
// "Kernel measurements"); on the AVX2 tier a table of 256 permutations
// left-packs 8 lanes.
#include "compress/kernels/TopKSelect.h"

#include "compress/kernels/SimdKernels.h"
#include "util/Error.h"

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GZ_TOPK_X86 1
#endif

namespace gradzip::compress {
namespace {

constexpr int kShift = 20;                // the histogram's bins: the top 11 of the key's 31 bits
constexpr int kBins = 1 << (31 - kShift);
constexpr int64_t kSpare = 16;            // slots past an output's end for whole-register stores

inline uint32_t keyOf(float v) { return std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu; }

// Pass 2, portable: the keys of x whose bin is `bin`, in index order.
int64_t gatherBin(const float* x, int64_t d, uint32_t bin, uint32_t* out) {
  int64_t m = 0;
  for (int64_t i = 0; i < d; ++i) {
    const uint32_t key = keyOf(x[i]);
    out[m] = key;  // out has spare slots for the write past the last kept key
    m += (key >> kShift) == bin;
  }
  return m;
}

// Pass 3, portable: indices with key > t, and the first `ties` with key == t.
int64_t writeIndices(const float* x, int64_t d, uint32_t t, int64_t ties, int32_t* out) {
  int64_t n = 0;
  for (int64_t i = 0; i < d; ++i) {
    const uint32_t key = keyOf(x[i]);
    const int64_t tie = key == t && ties > 0;
    ties -= tie;
    out[n] = static_cast<int32_t>(i);  // out has spare slots
    n += (key > t) | tie;
  }
  return n;
}

#ifdef GZ_TOPK_X86
__attribute__((target("avx512f"))) inline __m512i keys16(const float* x, __mmask16 lanes) {
  return _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, x)), _mm512_set1_epi32(0x7FFFFFFF));
}

inline __mmask16 lanesLeft(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

__attribute__((target("avx512f"))) int64_t gatherBin512(const float* x, int64_t d, uint32_t bin, uint32_t* out) {
  int64_t m = 0;
  // key >> kShift == bin  <=>  key - (bin << kShift) < 2^kShift, unsigned.
  const __m512i lo = _mm512_set1_epi32(static_cast<int>(bin << kShift)), width = _mm512_set1_epi32(1 << kShift);
  for (int64_t i = 0; i < d; i += 16) {
    const __mmask16 lanes = lanesLeft(d - i);
    const __m512i key = keys16(x + i, lanes);
    const __mmask16 hit = _mm512_mask_cmplt_epu32_mask(lanes, _mm512_sub_epi32(key, lo), width);
    _mm512_storeu_si512(out + m, _mm512_maskz_compress_epi32(hit, key));
    m += __builtin_popcount(hit);
  }
  return m;
}

__attribute__((target("avx512f"))) int64_t writeIndices512(const float* x, int64_t d, uint32_t t, int64_t ties,
                                                           int32_t* out) {
  int64_t n = 0;
  const __m512i tv = _mm512_set1_epi32(static_cast<int>(t));
  const __m512i step = _mm512_set1_epi32(16);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t i = 0; i < d; i += 16, idx = _mm512_add_epi32(idx, step)) {
    const __mmask16 lanes = lanesLeft(d - i);
    const __m512i key = keys16(x + i, lanes);
    __mmask16 take = _mm512_mask_cmpgt_epu32_mask(lanes, key, tv);
    if (ties > 0) {
      // The first `ties` lanes equal to t, in lane (index) order.
      uint32_t eq = _mm512_mask_cmpeq_epi32_mask(lanes, key, tv);
      while (eq != 0 && ties > 0) {
        take |= static_cast<__mmask16>(eq & -eq);
        eq &= eq - 1;
        --ties;
      }
    }
    _mm512_storeu_si512(out + n, _mm512_maskz_compress_epi32(take, idx));
    n += __builtin_popcount(take);
  }
  return n;
}

// AVX2 has no compress: a table gives, for each 8-bit lane mask, the
// permutation that moves the selected lanes to the front (8 KB).
struct LeftPack {
  alignas(32) int32_t lanes[256][8];
  constexpr LeftPack() : lanes{} {
    for (int m = 0; m < 256; ++m) {
      int n = 0;
      for (int l = 0; l < 8; ++l)
        if (m >> l & 1) lanes[m][n++] = l;
      for (; n < 8; ++n) lanes[m][n] = 0;
    }
  }
};
constexpr LeftPack kLeftPack;

__attribute__((target("avx2"))) inline __m256i pack8(__m256i v, uint32_t mask) {
  return _mm256_permutevar8x32_epi32(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kLeftPack.lanes[mask])));
}

__attribute__((target("avx2"))) inline __m256i keys8(const float* x) {
  return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), _mm256_set1_epi32(0x7FFFFFFF));
}

__attribute__((target("avx2"))) inline uint32_t laneMask8(__m256i m) { return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(m))); }

// Keys are below 2^31, so signed 32-bit compares order them.
__attribute__((target("avx2"))) int64_t gatherBin256(const float* x, int64_t d, uint32_t bin, uint32_t* out) {
  int64_t m = 0, i = 0;
  const __m256i want = _mm256_set1_epi32(static_cast<int>(bin));
  for (; i + 8 <= d; i += 8) {
    const __m256i key = keys8(x + i);
    const uint32_t hit = laneMask8(_mm256_cmpeq_epi32(_mm256_srli_epi32(key, kShift), want));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + m), pack8(key, hit));
    m += __builtin_popcount(hit);
  }
  return m + gatherBin(x + i, d - i, bin, out + m);
}

__attribute__((target("avx2"))) int64_t writeIndices256(const float* x, int64_t d, uint32_t t, int64_t ties,
                                                        int32_t* out) {
  int64_t n = 0, i = 0;
  const __m256i tv = _mm256_set1_epi32(static_cast<int>(t));
  const __m256i step = _mm256_set1_epi32(8);
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (; i + 8 <= d; i += 8, idx = _mm256_add_epi32(idx, step)) {
    const __m256i key = keys8(x + i);
    uint32_t take = laneMask8(_mm256_cmpgt_epi32(key, tv));
    if (ties > 0) {
      uint32_t eq = laneMask8(_mm256_cmpeq_epi32(key, tv));
      while (eq != 0 && ties > 0) {
        take |= eq & -eq;
        eq &= eq - 1;
        --ties;
      }
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + n), pack8(idx, take));
    n += __builtin_popcount(take);
  }
  // The tail: the portable loop with its indices offset by i.
  const int64_t tail = writeIndices(x + i, d - i, t, ties, out + n);
  for (int64_t j = n; j < n + tail; ++j) out[j] += static_cast<int32_t>(i);
  return n + tail;
}
#endif

}  // namespace

at::Tensor largestMagnitudes(const at::Tensor& x, int64_t k) {
  GZ_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "largestMagnitudes: needs a contiguous float tensor");
  const int64_t d = x.numel();
  GZ_CHECK(d < (int64_t{1} << 31), "largestMagnitudes: {} elements exceed int32 indices", d);
  k = std::clamp<int64_t>(k, 0, d);
  const auto options = at::TensorOptions().dtype(at::kInt);
  if (k == d) return at::arange(d, options);
  if (k == 0) return at::empty({0}, options);
  const float* p = x.data_ptr<float>();

  // Pass 1.
  std::vector<std::array<uint32_t, 4>> hist(kBins, std::array<uint32_t, 4>{});
  int64_t i = 0;
  for (; i + 4 <= d; i += 4)
    for (int j = 0; j < 4; ++j) ++hist[keyOf(p[i + j]) >> kShift][j];
  for (; i < d; ++i) ++hist[keyOf(p[i]) >> kShift][0];
  // The bin of the k-th largest key, counting from the top.
  int64_t above = 0;
  uint32_t bin = kBins - 1;
  int64_t inBin = 0;
  for (;; --bin) {
    const auto& h = hist[bin];
    inBin = int64_t(h[0]) + h[1] + h[2] + h[3];
    if (above + inBin >= k) break;
    above += inBin;
  }
  const int64_t want = k - above;  // 1 .. inBin of that bin's keys

  // Pass 2 and the exact threshold t, the want-th largest key of the bin.
  std::vector<uint32_t> keys(size_t(inBin + kSpare));
#ifdef GZ_TOPK_X86
  const bool w512 = simd::haveAvx512(), w256 = simd::haveAvx2();
  const int64_t got = w512   ? gatherBin512(p, d, bin, keys.data())
                      : w256 ? gatherBin256(p, d, bin, keys.data())
                             : gatherBin(p, d, bin, keys.data());
#else
  const int64_t got = gatherBin(p, d, bin, keys.data());
#endif
  GZ_ASSERT(got == inBin, "largestMagnitudes: the bin's count changed between passes");
  std::nth_element(keys.begin(), keys.begin() + (want - 1), keys.begin() + inBin, std::greater<>());
  const uint32_t t = keys[size_t(want - 1)];
  const int64_t greater = std::count_if(keys.begin(), keys.begin() + inBin, [t](uint32_t v) { return v > t; });

  // Pass 3.
  at::Tensor out = at::empty({k + kSpare}, options);
  int32_t* o = out.data_ptr<int32_t>();
#ifdef GZ_TOPK_X86
  const int64_t ties = want - greater;
  const int64_t n = w512   ? writeIndices512(p, d, t, ties, o)
                    : w256 ? writeIndices256(p, d, t, ties, o)
                           : writeIndices(p, d, t, ties, o);
#else
  const int64_t n = writeIndices(p, d, t, want - greater, o);
#endif
  GZ_ASSERT(n == k, "largestMagnitudes: selected {} of {}", n, k);
  return out.resize_({k});
}

}  // namespace gradzip::compress
