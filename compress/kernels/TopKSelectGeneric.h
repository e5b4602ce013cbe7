// Device-generic (ATen-only) counterparts of the top-K selections of
// compress/kernels/TopKSelect.h and TopKC's chunk choice: the same indices,
// ties broken the same way (the lower index wins), ascending, for tensors on
// any device. A selection orders integer keys: the threshold T is the k-th
// largest key (at::topk), every key above T is taken, and of the keys equal to
// T the first k − #above in index order (a cumulative count), so no sort of
// the whole vector and no host loop is needed.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gradzip::compress {

// The indices (int64, ascending) of the k largest entries of the 1-D integer
// tensor `keys`; among equal keys the lower index wins. k is clamped to
// [0, numel].
at::Tensor largestKeys(const at::Tensor& keys, int64_t k);

// largestMagnitudes (compress/kernels/TopKSelect.h) in ATen ops: the indices
// (int32, ascending) of the k entries of the float tensor x with the largest
// |x|, the lower index first among equal magnitudes. Keys are the float bits
// with the sign cleared, as the kernel's, so -0 ties with +0 and NaN ranks
// above ±Inf.
at::Tensor largestMagnitudesGeneric(const at::Tensor& x, int64_t k);

// Order-preserving integer keys (int64) of a 1-D float, half or bfloat16
// tensor: a larger value has a larger key, -0 and +0 share one (TopKC's
// selectTop keys, compress/TopKC.cpp).
at::Tensor orderKeys(const at::Tensor& s);

}  // namespace gradzip::compress
