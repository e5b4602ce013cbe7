// Shared helpers of the collective tests (CollectiveTest.cpp,
// CollectiveWireTest.cpp): the algorithms under test, world sizes and lengths,
// and the cross-rank bit-identity check.
#pragma once

#include "comm/Collective.h"
#include "comm/RingAllReduce.h"
#include "comm/TreeAllReduce.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace gradzip::comm::testutil {

// "-seg" variants cut messages into 64-byte segments, so small tensors also run
// through the segment pipeline (many segments per chunk, uneven last segments).
inline std::unique_ptr<Collective> makeAlgo(const std::string& name, Communicator& c) {
  if (name == "ring-seg") return std::make_unique<RingAllReduce>(c, 64);
  if (name == "tree-seg") return std::make_unique<TreeAllReduce>(c, 64);
  return makeCollective(name, c);
}
inline const std::vector<std::string> kPointToPoint = {"ring", "ring-seg", "tree", "tree-seg", "ps"};
inline std::vector<std::string> withEngine() {
  auto v = kPointToPoint;
  v.push_back("engine");
  return v;
}
inline const std::vector<int> kWorldSizes = {2, 3, 4};
inline std::vector<int64_t> lengthsFor(int n) { return {0, 1, n - 1, n + 1, 1003}; }

inline std::string where(const std::string& algo, at::ScalarType dt, int64_t len, int n) {
  return fmt::format("{} {} numel={} n={}", algo, c10::toString(dt), len, n);
}

// Every rank's `t` must have the same bytes: all-gather them with the engine
// (independent of the algorithms under test) and compare.
inline void expectSameOnAllRanks(Communicator& c, const at::Tensor& t, const std::string& what) {
  if (t.numel() == 0) return;
  at::Tensor bytes = t.contiguous().view(at::kByte);
  std::vector<at::Tensor> rows;
  for (int r = 0; r < c.size(); ++r) rows.push_back(at::empty_like(bytes));
  c.allGather(rows, bytes).wait();
  for (int r = 0; r < c.size(); ++r)
    EXPECT_TRUE(at::equal(rows[static_cast<size_t>(r)], bytes)) << what << ": rank " << r << " differs from rank "
                                                                << c.rank();
}

}  // namespace gradzip::comm::testutil
