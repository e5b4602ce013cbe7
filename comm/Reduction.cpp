// Implements comm/Reduction.h: the four element-wise reductions of gradzip's own
// collectives. Combines run inside the collectives' pipelines, once per received
// segment, so on CPU they are single-threaded loops over raw pointers that g++
// vectorises at -O3 (ATen's kernels would fan out to the intra-op thread pool
// and compete with Gloo's I/O thread); half/bfloat16 and non-CPU tensors use
// ATen ops.
#include "comm/Reduction.h"

#include "util/Error.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace gradzip::comm {
namespace {

const char* dtypeName(at::ScalarType t) { return c10::toString(t); }

bool isIntegral(at::ScalarType t) {
  return t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt || t == at::kLong;
}

// Shared precondition of every combine: same dtype and numel, contiguous.
void checkCombine(const std::string& name, const at::Tensor& acc, const at::Tensor& other) {
  GZ_CHECK(acc.scalar_type() == other.scalar_type(), "{}: combine of {} with {}: dtypes differ", name,
           dtypeName(acc.scalar_type()), dtypeName(other.scalar_type()));
  GZ_CHECK(acc.numel() == other.numel(), "{}: combine of {} with {} elements", name, acc.numel(), other.numel());
  GZ_CHECK(acc.is_contiguous() && other.is_contiguous(), "{}: combine needs contiguous tensors", name);
}

// Shared precondition of every liftInto: `out` is an accumulator for `raw`.
void checkLiftInto(const Reduction& r, const at::Tensor& raw, const at::Tensor& out) {
  const at::ScalarType acc = r.accType(raw.scalar_type());
  GZ_CHECK(out.scalar_type() == acc && out.numel() == raw.numel() && out.is_contiguous(),
           "{}: liftInto needs a contiguous {} tensor of {} elements, got {} of {}", r.name(), dtypeName(acc),
           raw.numel(), dtypeName(out.scalar_type()), out.numel());
}

// A fresh accumulator for `raw`, filled by r.liftInto.
at::Tensor liftFresh(const Reduction& r, const at::Tensor& raw) {
  at::Tensor out = at::empty({raw.numel()}, raw.options().dtype(r.accType(raw.scalar_type())));
  r.liftInto(raw, out);
  return out.view(raw.sizes());
}

// a[i] += b[i]; a plain loop that -O3 vectorises.
template <typename T>
void addInto(T* __restrict a, const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

// acc += other for float or integer accumulators.
void addTensor(at::Tensor& acc, const at::Tensor& other) {
  if (!acc.is_cpu()) {
    acc.add_(other);
    return;
  }
  const int64_t n = acc.numel();
  switch (acc.scalar_type()) {
    case at::kFloat: addInto(acc.data_ptr<float>(), other.const_data_ptr<float>(), n); break;
    case at::kDouble: addInto(acc.data_ptr<double>(), other.const_data_ptr<double>(), n); break;
    case at::kInt: addInto(acc.data_ptr<int32_t>(), other.const_data_ptr<int32_t>(), n); break;
    case at::kLong: addInto(acc.data_ptr<int64_t>(), other.const_data_ptr<int64_t>(), n); break;
    // half/bf16: ATen converts through float with vector instructions; each
    // addition rounds once to the narrow type, like a scalar a + b would.
    default: acc.add_(other); break;
  }
}

class FloatSum final : public Reduction {
 public:
  std::string name() const override { return "floatSum"; }
  at::ScalarType accType(at::ScalarType in) const override {
    GZ_CHECK(in == at::kFloat || in == at::kDouble || in == at::kHalf || in == at::kBFloat16,
             "floatSum cannot reduce dtype {} (supported: float, double, half, bfloat16)", dtypeName(in));
    return in;
  }
  at::Tensor lift(const at::Tensor& raw) const override { return liftFresh(*this, raw); }
  void liftInto(const at::Tensor& raw, at::Tensor& out) const override {
    checkLiftInto(*this, raw, out);
    out.view(raw.sizes()).copy_(raw);
  }
  void combine(at::Tensor& acc, const at::Tensor& other) const override {
    checkCombine(name(), acc, other);
    addTensor(acc, other);
  }
  bool isPlainSum() const override { return true; }
};

class WideIntSum final : public Reduction {
 public:
  explicit WideIntSum(at::ScalarType wide) : wide_(wide) {
    GZ_CHECK(wide == at::kInt || wide == at::kLong, "wideIntSum: accumulator dtype must be int32 or int64, got {}",
             dtypeName(wide));
  }
  std::string name() const override { return fmt::format("wideIntSum({})", dtypeName(wide_)); }
  at::ScalarType accType(at::ScalarType in) const override {
    GZ_CHECK(isIntegral(in), "{} cannot reduce dtype {} (supported: uint8, int8, int16, int32, int64)", name(),
             dtypeName(in));
    GZ_CHECK(!(in == at::kLong && wide_ == at::kInt), "{} cannot reduce dtype {}: it would narrow to int32", name(),
             dtypeName(in));
    return wide_;
  }
  at::Tensor lift(const at::Tensor& raw) const override { return liftFresh(*this, raw); }
  void liftInto(const at::Tensor& raw, at::Tensor& out) const override {
    checkLiftInto(*this, raw, out);
    out.view(raw.sizes()).copy_(raw);  // widening conversion
  }
  void combine(at::Tensor& acc, const at::Tensor& other) const override {
    checkCombine(name(), acc, other);
    GZ_CHECK(acc.scalar_type() == wide_, "{}: accumulator has dtype {}", name(), dtypeName(acc.scalar_type()));
    addTensor(acc, other);
  }
  bool isPlainSum() const override { return true; }

 private:
  at::ScalarType wide_;
};

// Sat on codes of type T: the sum is formed in int32, so it cannot wrap, then
// clamped to [-lim, lim]; a branch-free loop that -O3 vectorises.
template <typename T>
void saturatingAddInto(T* __restrict a, const T* __restrict b, int64_t n, int32_t lim) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t s = static_cast<int32_t>(a[i]) + static_cast<int32_t>(b[i]);
    s = s > lim ? lim : s;
    s = s < -lim ? -lim : s;
    a[i] = static_cast<T>(s);
  }
}

template <typename T>
void clampInto(T* __restrict a, int64_t n, int32_t lim) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t s = a[i];
    s = s > lim ? lim : s;
    s = s < -lim ? -lim : s;
    a[i] = static_cast<T>(s);
  }
}

class SaturatingAdd final : public Reduction {
 public:
  explicit SaturatingAdd(int bits) : bits_(bits), lim_((1 << (bits - 1)) - 1) {}
  std::string name() const override { return fmt::format("saturatingAdd({})", bits_); }
  at::ScalarType accType(at::ScalarType in) const override {
    const bool ok = in == at::kShort || (in == at::kChar && bits_ <= 8);
    GZ_CHECK(ok, "{} cannot reduce dtype {} (codes of {} bits must be {})", name(), dtypeName(in), bits_,
             bits_ <= 8 ? "int8 or int16" : "int16");
    return in;
  }
  at::Tensor lift(const at::Tensor& raw) const override { return liftFresh(*this, raw); }
  void liftInto(const at::Tensor& raw, at::Tensor& out) const override {
    checkLiftInto(*this, raw, out);
    out.view(raw.sizes()).copy_(raw);
    if (!out.is_cpu()) {
      out.clamp_(-lim_, lim_);
    } else if (out.scalar_type() == at::kChar) {
      clampInto(out.data_ptr<int8_t>(), out.numel(), lim_);
    } else {
      clampInto(out.data_ptr<int16_t>(), out.numel(), lim_);
    }
  }
  void combine(at::Tensor& acc, const at::Tensor& other) const override {
    checkCombine(name(), acc, other);
    accType(acc.scalar_type());
    if (!acc.is_cpu()) {
      acc.copy_((acc.to(at::kInt) + other.to(at::kInt)).clamp_(-lim_, lim_));
      return;
    }
    const int64_t n = acc.numel();
    if (acc.scalar_type() == at::kChar) saturatingAddInto(acc.data_ptr<int8_t>(), other.const_data_ptr<int8_t>(), n, lim_);
    else saturatingAddInto(acc.data_ptr<int16_t>(), other.const_data_ptr<int16_t>(), n, lim_);
  }

 private:
  int bits_;
  int32_t lim_;
};

template <typename W>
void lookupInto(W* __restrict out, const uint8_t* __restrict codes, const W* __restrict table, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = table[codes[i]];
}

class TableLookupSum final : public Reduction {
 public:
  TableLookupSum(at::Tensor table, at::ScalarType wide) : wide_(wide) {
    GZ_CHECK(wide == at::kInt || wide == at::kLong,
             "tableLookupSum: accumulator dtype must be int32 or int64, got {}", dtypeName(wide));
    GZ_CHECK(table.defined() && table.dim() == 1 && table.scalar_type() == at::kLong,
             "tableLookupSum: the table must be a 1-D int64 tensor");
    GZ_CHECK(table.numel() >= 1 && table.numel() <= 256, "tableLookupSum: the table has {} entries (1..256 allowed)",
             table.numel());
    table_ = table.to(at::kCPU).contiguous();
    if (wide == at::kInt) {
      const int64_t lo = table_.min().item<int64_t>(), hi = table_.max().item<int64_t>();
      GZ_CHECK(lo >= std::numeric_limits<int32_t>::min() && hi <= std::numeric_limits<int32_t>::max(),
               "tableLookupSum: table values [{}, {}] do not fit int32", lo, hi);
    }
    wideTable_ = table_.to(wide_);
  }
  std::string name() const override { return fmt::format("tableLookupSum({})", dtypeName(wide_)); }
  at::ScalarType accType(at::ScalarType in) const override {
    GZ_CHECK(in == at::kByte, "{} cannot reduce dtype {} (codes must be uint8)", name(), dtypeName(in));
    return wide_;
  }
  at::Tensor lift(const at::Tensor& raw) const override { return liftFresh(*this, raw); }
  void liftInto(const at::Tensor& raw, at::Tensor& out) const override {
    checkLiftInto(*this, raw, out);
    at::Tensor codes = raw.contiguous();
    const int64_t n = codes.numel();
    if (n == 0) return;
    const int64_t maxCode = codes.max().item<int64_t>();
    GZ_CHECK(maxCode < table_.numel(), "{}: code {} is outside the {}-entry table", name(), maxCode, table_.numel());
    if (!codes.is_cpu()) {
      out.view(codes.sizes()).copy_(wideTable_.to(codes.device()).index({codes.to(at::kLong)}));
    } else if (wide_ == at::kInt) {
      lookupInto(out.data_ptr<int32_t>(), codes.const_data_ptr<uint8_t>(), wideTable_.const_data_ptr<int32_t>(), n);
    } else {
      lookupInto(out.data_ptr<int64_t>(), codes.const_data_ptr<uint8_t>(), wideTable_.const_data_ptr<int64_t>(), n);
    }
  }
  void combine(at::Tensor& acc, const at::Tensor& other) const override {
    checkCombine(name(), acc, other);
    GZ_CHECK(acc.scalar_type() == wide_, "{}: accumulator has dtype {}", name(), dtypeName(acc.scalar_type()));
    addTensor(acc, other);
  }

 private:
  at::ScalarType wide_;
  at::Tensor table_;      // int64, CPU
  at::Tensor wideTable_;  // table_ in the accumulator dtype
};

}  // namespace

std::shared_ptr<Reduction> floatSum() { return std::make_shared<FloatSum>(); }

std::shared_ptr<Reduction> wideIntSum(at::ScalarType wide) { return std::make_shared<WideIntSum>(wide); }

std::shared_ptr<Reduction> saturatingAdd(int bits) {
  GZ_CHECK(bits >= 2 && bits <= 16, "saturatingAdd: bits must be in [2, 16], got {}", bits);
  return std::make_shared<SaturatingAdd>(bits);
}

std::shared_ptr<Reduction> tableLookupSum(at::Tensor table, at::ScalarType wide) {
  return std::make_shared<TableLookupSum>(std::move(table), wide);
}

}  // namespace gradzip::comm
