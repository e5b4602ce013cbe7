// Implements data/ImageData.h: the shape/type invariants every reader guarantees.
#include "data/ImageData.h"

#include "util/Error.h"

namespace gradzip::data {

void checkImageData(const ImageData& d) {
  GZ_ASSERT(d.images.defined() && d.labels.defined(), "{}: images or labels missing", d.source);
  GZ_ASSERT(d.images.dim() == 4 && d.images.scalar_type() == at::kByte && d.images.is_contiguous(),
            "{}: images must be contiguous uint8 [N,H,W,C]", d.source);
  GZ_ASSERT(d.images.size(3) == 1 || d.images.size(3) == 3, "{}: {} channels", d.source, d.images.size(3));
  GZ_ASSERT(d.labels.dim() == 1 && d.labels.scalar_type() == at::kLong && d.labels.size(0) == d.images.size(0),
            "{}: labels must be int64 [N]", d.source);
  GZ_ASSERT(!d.classNames.empty(), "{}: no class names", d.source);
}

}  // namespace gradzip::data
