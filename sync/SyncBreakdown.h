// SyncBreakdown: where one step's gradient synchronisation spent its time, for
// the whole step (GradSync::finishStep) and per bucket
// (SyncedBuckets::lastBreakdown): the TTA rows' time split and the
// controller's observations of the link and of the bucket pipeline.
#pragma once

#include <cstdint>

namespace gradzip::trainer {

struct SyncBreakdown {
  double encode = 0, communicate = 0, decode = 0;  // comm-thread seconds
  double exposed = 0;                              // training thread waiting after backward
  // Per bucket only (lastBreakdown): seconds from beginStep until the bucket
  // was handed to the comm thread, and the comm thread's wall seconds on it
  // (encode, communicate and decode plus the finiteness check, copies and
  // measuring), which controller/OverlapModel.h pipelines behind backward.
  double handover = 0, busy = 0;
  int64_t bytesSent = 0;
  int64_t saturated = 0;
};

}  // namespace gradzip::trainer
