// The median of a sample (the mean of the two middle values for an even
// count), shared by the benchmarks, the network probe, the link fitter and
// the controller's detectors. UserError on an empty sample.
#pragma once

#include "util/Error.h"

#include <algorithm>
#include <vector>

namespace gradzip {

inline double median(std::vector<double> v) {
  GZ_CHECK(!v.empty(), "median of an empty sample");
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2) return v[h];
  return 0.5 * (*std::max_element(v.begin(), v.begin() + h) + v[h]);
}

}  // namespace gradzip
