// THC lookup tables (THC §4.2, §5.3, App. B): a monotone map T from the 2^b
// indices a worker may send to values in ⟨g+1⟩, T(0) = 0, T(2^b−1) = g, chosen
// to minimise the stochastic-quantisation variance of A ~ N(0,1) truncated to
// [−t_p, t_p] on the grid (2t_p/g)·i − t_p. Solved exactly by dynamic
// programming over adjacent table values (our choice; the paper enumerates
// stars-and-bars): O(2^b·g²) with closed-form interval costs.
#pragma once

#include <cstdint>
#include <vector>

namespace gradzip::compress {

struct ThcTable {
  int bits = 0;
  int granularity = 0;   // g
  double p = 0;          // support bound: expected fraction of coordinates clamped
  bool symmetric = true; // T(2^b−1−z) = g − T(z) (the paper's tables)
  double tp = 0;         // t_p = Φ⁻¹(1 − p/2)
  std::vector<int> values;  // T(0..2^b−1), strictly increasing, 0 .. g
  // E[(SQ(A) − A)²] for A ~ N(0,1) | A ∈ [−t_p, t_p]: the integral of App. B
  // divided by the truncated mass 1 − p (0.013496 for (4, 30, 1/32)).
  double normalizedVariance = 0;
};

// Φ⁻¹(q) for q in (0, 1): Acklam's rational approximation refined by two Halley steps
// on erfc; accurate to ~1e-15.
double inverseNormalCdf(double q);
// THC §5.2: t_p = Φ⁻¹(1 − p/2) (1/32 -> 2.1539).
double thcTruncation(double p);

// The optimal table for (bits, g, p); symmetric restricts to reflected tables.
// Requires 1 <= bits <= 8, g >= 2^bits − 1, 0 < p < 1 (UserError otherwise).
ThcTable solveThcTable(int bits, int granularity, double p, bool symmetric = true);

// The SQ variance of a given table (same normalisation as normalizedVariance).
double thcTableVariance(const std::vector<int>& values, int granularity, double p);

// The uniform table T(z) = z with g = 2^bits − 1 (THC Alg. 1 as a special case of Alg. 2).
ThcTable uniformThcTable(int bits, double p);

// solveThcTable memoised (thread-safe); tables are small and reused every step.
const ThcTable& cachedThcTable(int bits, int granularity, double p, bool symmetric);

}  // namespace gradzip::compress
