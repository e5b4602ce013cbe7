// Implements compress/ThcTable.h. The SQ variance of A on the interval [q_i, q_j]
// between adjacent quantisation values is (A − q_i)(q_j − A) (stochastic rounding
// is optimal given the values, THC App. B), so the objective is a sum of
// closed-form integrals ∫(a − q_i)(q_j − a)φ(a)da over consecutive table entries;
// a shortest-path DP over (table index, grid value) finds the exact optimum.
#include "compress/ThcTable.h"

#include "util/Error.h"

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

namespace gradzip::compress {
namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double phi(double x) { return kInvSqrt2Pi * std::exp(-0.5 * x * x); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// ∫_a^b (x − a)(b − x) φ(x) dx from the truncated normal moments
// m0 = Φ(b) − Φ(a), m1 = φ(a) − φ(b), m2 = m0 + aφ(a) − bφ(b).
double intervalCost(double a, double b) {
  const double m0 = Phi(b) - Phi(a);
  const double m1 = phi(a) - phi(b);
  const double m2 = m0 + a * phi(a) - b * phi(b);
  return -m2 + (a + b) * m1 - a * b * m0;
}

struct Grid {
  int g;
  double tp;
  std::vector<std::vector<double>> cost;  // cost[i][j], i < j
  Grid(int g_, double tp_) : g(g_), tp(tp_), cost(g_ + 1, std::vector<double>(g_ + 1, 0.0)) {
    for (int i = 0; i <= g; ++i)
      for (int j = i + 1; j <= g; ++j) cost[i][j] = intervalCost(value(i), value(j));
  }
  double value(int i) const { return 2.0 * tp / g * i - tp; }  // THC §5.3 granularity constraint
};

// best[k][j]: least cost of a strictly increasing path 0 = v_0 < ... < v_k = j.
// parent[k][j]: the v_{k−1} achieving it (lowest on ties, for determinism).
void chainDp(const Grid& grid, int steps, std::vector<std::vector<double>>& best,
             std::vector<std::vector<int>>& parent) {
  const double inf = std::numeric_limits<double>::infinity();
  best.assign(steps + 1, std::vector<double>(grid.g + 1, inf));
  parent.assign(steps + 1, std::vector<int>(grid.g + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= steps; ++k)
    for (int j = k; j <= grid.g; ++j)
      for (int i = k - 1; i < j; ++i) {
        const double v = best[k - 1][i] + grid.cost[i][j];
        if (v < best[k][j]) {
          best[k][j] = v;
          parent[k][j] = i;
        }
      }
}

std::vector<int> backtrack(const std::vector<std::vector<int>>& parent, int steps, int end) {
  std::vector<int> path(steps + 1);
  path[steps] = end;
  for (int k = steps; k > 0; --k) path[k - 1] = parent[k][path[k]];
  return path;
}

}  // namespace

double inverseNormalCdf(double q) {
  GZ_CHECK(q > 0 && q < 1, "inverseNormalCdf: q must lie in (0, 1), got {}", q);
  // Acklam's coefficients.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double lo = 0.02425;
  double x;
  if (q < lo) {
    const double r = std::sqrt(-2 * std::log(q));
    x = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) /
        ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1);
  } else if (q <= 1 - lo) {
    const double r0 = q - 0.5, r = r0 * r0;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * r0 /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double r = std::sqrt(-2 * std::log(1 - q));
    x = -(((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) /
        ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1);
  }
  // Halley steps: e = Φ(x) − q, u = e·sqrt(2π)·exp(x²/2).
  for (int it = 0; it < 2; ++it) {
    const double e = Phi(x) - q;
    const double u = e * std::sqrt(2 * M_PI) * std::exp(0.5 * x * x);
    x = x - u / (1 + 0.5 * x * u);
  }
  return x;
}

double thcTruncation(double p) {
  GZ_CHECK(p > 0 && p < 1, "THC: support bound p must lie in (0, 1), got {}", p);
  return inverseNormalCdf(1 - p / 2);
}

double thcTableVariance(const std::vector<int>& values, int granularity, double p) {
  const double tp = thcTruncation(p);
  const auto v = [&](int i) { return 2.0 * tp / granularity * i - tp; };
  double sum = 0;
  for (size_t z = 0; z + 1 < values.size(); ++z) sum += intervalCost(v(values[z]), v(values[z + 1]));
  return sum / (1 - p);  // conditional on A ∈ [−t_p, t_p], whose mass is 1 − p
}

ThcTable solveThcTable(int bits, int granularity, double p, bool symmetric) {
  GZ_CHECK(bits >= 1 && bits <= 8, "THC table: bits must be in [1, 8], got {}", bits);
  const int levels = 1 << bits;
  GZ_CHECK(granularity >= levels - 1 && granularity <= 4096,
           "THC table: granularity g must be in [2^b - 1 = {}, 4096], got {}", levels - 1, granularity);
  ThcTable t;
  t.bits = bits;
  t.granularity = granularity;
  t.p = p;
  t.symmetric = symmetric && bits > 1;
  t.tp = thcTruncation(p);
  Grid grid(granularity, t.tp);
  std::vector<std::vector<double>> best;
  std::vector<std::vector<int>> parent;
  if (!t.symmetric) {
    chainDp(grid, levels - 1, best, parent);
    t.values = backtrack(parent, levels - 1, granularity);
  } else {
    // Reflection T(2^b−1−z) = g − T(z): choose the lower half 0 = T(0) < ... <
    // T(h−1) = s (h = 2^(b−1)); the upper half mirrors it, and the middle interval
    // [s, g − s] (s < g − s) is self-symmetric. φ is even, so the mirrored half
    // costs the same as the lower one.
    const int h = levels / 2;
    chainDp(grid, h - 1, best, parent);
    double bestCost = std::numeric_limits<double>::infinity();
    int bestS = -1;
    for (int s = h - 1; 2 * s < granularity; ++s) {
      const double c = 2 * best[h - 1][s] + grid.cost[s][granularity - s];
      if (c < bestCost) {
        bestCost = c;
        bestS = s;
      }
    }
    GZ_ASSERT(bestS >= 0, "no symmetric THC table for b={} g={}", bits, granularity);
    auto lower = backtrack(parent, h - 1, bestS);
    t.values = lower;
    for (int z = h - 1; z >= 0; --z) t.values.push_back(granularity - lower[z]);
  }
  t.normalizedVariance = thcTableVariance(t.values, granularity, p);
  return t;
}

ThcTable uniformThcTable(int bits, double p) {
  GZ_CHECK(bits >= 1 && bits <= 8, "THC: bits must be in [1, 8], got {}", bits);
  ThcTable t;
  t.bits = bits;
  t.granularity = (1 << bits) - 1;
  t.p = p;
  t.symmetric = true;
  t.tp = thcTruncation(p);
  for (int z = 0; z < (1 << bits); ++z) t.values.push_back(z);
  t.normalizedVariance = thcTableVariance(t.values, t.granularity, p);
  return t;
}

const ThcTable& cachedThcTable(int bits, int granularity, double p, bool symmetric) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, double, bool>, ThcTable> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(bits, granularity, p, symmetric);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, solveThcTable(bits, granularity, p, symmetric)).first;
  return it->second;
}

}  // namespace gradzip::compress
