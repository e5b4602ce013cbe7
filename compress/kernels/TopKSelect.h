// Exact top-K selection by magnitude for TopK and AR-TopK (compress/TopK.h,
// compress/ArTopK.h) without sorting: a radix select on the float bits. A
// float's magnitude orders like its bit pattern with the sign cleared, so one
// pass builds a histogram of the top 11 of those 31 bits, the bin holding the
// K-th largest is found from the top, a second pass gathers that bin's keys
// (a few % of d on gradients), std::nth_element finds the exact threshold
// among them, and a third pass writes the indices whose key is above it, plus
// as many equal to it as K needs, lowest indices first. Three linear passes
// instead of at::topk's partial sort, several times faster
// (experiments/results/compressors_topk_select.md); AVX-512 and AVX2 tiers
// append with left-packed vector stores, the portable one branch-free. Every
// tier returns the same indices.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress {

// The indices (int32, ascending) of the k entries of the contiguous float
// tensor x with the largest |x|; among equal magnitudes the lower index wins.
// NaN counts as larger than +-Inf (as at::topk ranks it). k is clamped to
// [0, numel]; x must have fewer than 2^31 elements.
at::Tensor largestMagnitudes(const at::Tensor& x, int64_t k);

}  // namespace gradzip::compress
