// Implements compress/kernels/SaturatingPackedSum.h: field-by-field unpack, add in int32
// (so nothing wraps), clip, repack; optionally record what each clip removed.
#include "compress/kernels/SaturatingPackedSum.h"

#include "util/Error.h"

#include <fmt/format.h>

namespace gradzip::compress {
namespace {

// Returns the clip events; with `losses`, appends (code index, s − Sat(s)) per clip.
template <typename W>
int64_t combineWords(W* acc, const W* other, int64_t words, int bits,
                     std::vector<std::pair<int64_t, int32_t>>* losses) {
  using U = std::make_unsigned_t<W>;
  const int per = SaturatingPackedSum::codesPerWord(bits);
  const int32_t L = (1 << (bits - 1)) - 1;
  const U mask = static_cast<U>((1u << bits) - 1);
  int64_t clipped = 0;
  for (int64_t w = 0; w < words; ++w) {
    U a = static_cast<U>(acc[w]);
    const U o = static_cast<U>(other[w]);
    U out = 0;
    for (int k = 0; k < per; ++k) {
      const int shift = k * bits;
      int32_t s = static_cast<int32_t>((a >> shift) & mask) - L + static_cast<int32_t>((o >> shift) & mask) - L;
      if (s > L || s < -L) {
        const int32_t sat = s > L ? L : -L;
        if (losses) losses->emplace_back(w * per + k, s - sat);
        s = sat;
        ++clipped;
      }
      out |= static_cast<U>(static_cast<U>(s + L) << shift);
    }
    acc[w] = static_cast<W>(out);
  }
  return clipped;
}

}  // namespace

SaturatingPackedSum::SaturatingPackedSum(int bits, bool recordLosses) : bits_(bits), recordLosses_(recordLosses) {
  GZ_CHECK(bits >= 2 && bits <= 16, "saturating packed sum: bits must be in [2, 16], got {}", bits);
}

at::ScalarType SaturatingPackedSum::wordType(int bits) { return 8 % bits == 0 ? at::kByte : at::kInt; }
int SaturatingPackedSum::codesPerWord(int bits) { return 8 % bits == 0 ? 8 / bits : 32 / bits; }
int64_t SaturatingPackedSum::numWords(int64_t n, int bits) {
  const int per = codesPerWord(bits);
  return (n + per - 1) / per;
}

at::Tensor SaturatingPackedSum::pack(const at::Tensor& codes, int bits) {
  GZ_ASSERT(codes.scalar_type() == at::kInt && codes.is_contiguous(), "pack: expected contiguous int32 codes");
  const int64_t n = codes.numel();
  const int per = codesPerWord(bits);
  const int32_t L = (1 << (bits - 1)) - 1;
  const int32_t* c = codes.data_ptr<int32_t>();
  const int64_t words = numWords(n, bits);
  auto out = at::zeros({words}, wordType(bits));
  auto put = [&](auto* w) {
    using U = std::make_unsigned_t<std::remove_pointer_t<decltype(w)>>;
    // Unused trailing fields of the last word hold code 0 (stored L), so they
    // never clip and never count as saturated.
    for (int64_t k = n; k < words * per; ++k)
      w[k / per] = static_cast<std::remove_pointer_t<decltype(w)>>(
          static_cast<U>(w[k / per]) | static_cast<U>(static_cast<U>(L) << ((k % per) * bits)));
    for (int64_t k = 0; k < n; ++k) {
      GZ_ASSERT(c[k] >= -L && c[k] <= L, "pack: code {} outside [-{}, {}]", c[k], L, L);
      w[k / per] = static_cast<std::remove_pointer_t<decltype(w)>>(
          static_cast<U>(w[k / per]) | static_cast<U>(static_cast<U>(c[k] + L) << ((k % per) * bits)));
    }
  };
  if (wordType(bits) == at::kByte)
    put(out.data_ptr<uint8_t>());
  else
    put(out.data_ptr<int32_t>());
  return out;
}

at::Tensor SaturatingPackedSum::unpack(const at::Tensor& words, int bits, int64_t n) {
  const int per = codesPerWord(bits);
  const int32_t L = (1 << (bits - 1)) - 1;
  auto wc = words.contiguous();
  GZ_ASSERT(wc.numel() >= numWords(n, bits), "unpack: too few words");
  auto out = at::empty({n}, at::kInt);
  int32_t* c = out.data_ptr<int32_t>();
  auto get = [&](const auto* w) {
    using U = std::make_unsigned_t<std::remove_const_t<std::remove_pointer_t<decltype(w)>>>;
    const U mask = static_cast<U>((1u << bits) - 1);
    for (int64_t k = 0; k < n; ++k)
      c[k] = static_cast<int32_t>((static_cast<U>(w[k / per]) >> ((k % per) * bits)) & mask) - L;
  };
  if (wordType(bits) == at::kByte)
    get(wc.data_ptr<uint8_t>());
  else
    get(wc.data_ptr<int32_t>());
  return out;
}

std::string SaturatingPackedSum::name() const { return fmt::format("saturatingPackedSum({})", bits_); }

at::ScalarType SaturatingPackedSum::accType(at::ScalarType in) const {
  GZ_CHECK(in == wordType(bits_), "{}: expects {} words, got {}", name(), c10::toString(wordType(bits_)),
           c10::toString(in));
  return in;
}

at::Tensor SaturatingPackedSum::lift(const at::Tensor& raw) const {
  accType(raw.scalar_type());
  return raw.contiguous().clone();
}

void SaturatingPackedSum::combine(at::Tensor& acc, const at::Tensor& other) const {
  GZ_CHECK(acc.scalar_type() == other.scalar_type() && acc.numel() == other.numel(),
           "{}: mismatched accumulators", name());
  if (!acc.is_cpu()) {
    // Device words (a CUDA gradient's THC all-reduce) are combined in a host
    // copy: the saturating word arithmetic is CPU code. The clips are recorded
    // at acc's own address, the only thing losses() reads of it.
    at::Tensor host = acc.cpu().contiguous();
    combineAt(host, other.cpu().contiguous(), acc.data_ptr());
    acc.copy_(host);
    return;
  }
  combineAt(acc, other.contiguous(), acc.data_ptr());
}

void SaturatingPackedSum::combineAt(at::Tensor& acc, const at::Tensor& o, const void* position) const {
  Clips mine;
  mine.acc = position;
  auto* losses = recordLosses_ ? &mine.at : nullptr;
  int64_t c;
  if (acc.scalar_type() == at::kByte)
    c = combineWords(acc.data_ptr<uint8_t>(), o.data_ptr<uint8_t>(), acc.numel(), bits_, losses);
  else
    c = combineWords(acc.data_ptr<int32_t>(), o.data_ptr<int32_t>(), acc.numel(), bits_, losses);
  clipped_ += c;
  if (recordLosses_ && !mine.at.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    clips_.push_back(std::move(mine));
  }
}

at::Tensor SaturatingPackedSum::losses(const at::Tensor& result, int64_t n) const {
  GZ_ASSERT(recordLosses_, "{}: losses() needs recordLosses", name());
  GZ_ASSERT(result.scalar_type() == wordType(bits_) && result.is_contiguous() && result.numel() >= numWords(n, bits_),
            "{}: losses() needs the collective's word tensor", name());
  auto out = at::zeros({n}, at::kInt);
  int32_t* l = out.data_ptr<int32_t>();
  const auto* base = static_cast<const char*>(result.data_ptr());
  const int64_t wordBytes = result.element_size(), per = codesPerWord(bits_);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Clips& c : clips_) {
    // The result was allocated before any combine and outlives them all, so a
    // combine's acc lies inside it exactly when it was a slice of it.
    const int64_t bytes = static_cast<const char*>(c.acc) - base;
    GZ_ASSERT(bytes >= 0 && bytes % wordBytes == 0 && bytes / wordBytes < result.numel(),
              "{}: a combine folded into a buffer outside the collective's result; its clip losses have no "
              "coordinates", name());
    const int64_t first = bytes / wordBytes * per;
    for (const auto& [k, loss] : c.at) {
      GZ_ASSERT(first + k < n, "{}: clip at code {} beyond the {} coordinates", name(), first + k, n);
      l[first + k] += loss;
    }
  }
  return out;
}

}  // namespace gradzip::compress
