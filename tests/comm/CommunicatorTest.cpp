// Tests of comm/ProcessGroupCommunicator and LocalCommunicator on real Gloo
// groups (threads on loopback): closed-form collective results, dtype checks
// before Gloo is called, counters, and errors that name rank and operation.
#include "comm/LocalCommunicator.h"
#include "comm/ProcessGroupCommunicator.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

using namespace gradzip;
using gradzip::testing::runRanks;

TEST(Communicator, AllReduceSumAndMaxClosedForm) {
  for (int n : {2, 3, 4}) {
    runRanks(n, [n](comm::Communicator& c) {
      auto t = torch::full({7}, float(c.rank()));
      c.allReduce(t, comm::ReduceOp::Sum).wait();
      EXPECT_TRUE(torch::equal(t, torch::full({7}, float(n * (n - 1) / 2))));
      auto m = torch::full({3}, double(c.rank() * 10));
      c.allReduce(m, comm::ReduceOp::Max).wait();
      EXPECT_TRUE(torch::equal(m, torch::full({3}, double((n - 1) * 10), torch::kDouble)));
    });
  }
}

TEST(Communicator, AllGatherBroadcastReduceScatterSendRecv) {
  runRanks(3, [](comm::Communicator& c) {
    const int r = c.rank(), n = c.size();
    std::vector<at::Tensor> out;
    for (int i = 0; i < n; ++i) out.push_back(torch::empty({2}, torch::kLong));
    c.allGather(out, torch::full({2}, int64_t(r), torch::kLong)).wait();
    for (int i = 0; i < n; ++i) EXPECT_EQ(out[i][0].item<int64_t>(), i);

    auto b = torch::full({4}, float(r == 1 ? 42 : -1));
    c.broadcast(b, 1).wait();
    EXPECT_TRUE(torch::equal(b, torch::full({4}, 42.0f)));

    std::vector<at::Tensor> in;
    for (int i = 0; i < n; ++i) in.push_back(torch::full({2}, float(r + 10 * i)));
    auto rs = torch::empty({2});
    c.reduceScatter(rs, in, comm::ReduceOp::Sum).wait();
    // sum over ranks q of (q + 10 r) = n(n-1)/2 + 10 r n
    EXPECT_TRUE(torch::equal(rs, torch::full({2}, float(n * (n - 1) / 2 + 10 * r * n))));

    // A ring of point-to-point messages: each rank sends r to r+1.
    auto msg = torch::full({5}, int32_t(r), torch::kInt);
    auto got = torch::empty({5}, torch::kInt);
    auto s = c.send(msg, (r + 1) % n, 7);
    auto v = c.recv(got, (r + n - 1) % n, 7);
    s.wait();
    v.wait();
    EXPECT_EQ(got[0].item<int32_t>(), (r + n - 1) % n);
    c.barrier().wait();

    const auto sendStats = c.stats().get("send");
    EXPECT_EQ(sendStats.calls, 1);
    EXPECT_EQ(sendStats.bytesSent, 5 * 4);
    EXPECT_EQ(c.stats().get("recv").bytesReceived, 5 * 4);
    EXPECT_GE(c.stats().get("allreduce").calls, 0);
  });
}

TEST(Communicator, EveryGlooDtypeAllReduces) {
  runRanks(2, [](comm::Communicator& c) {
    for (auto dt : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kChar, at::kByte, at::kInt, at::kLong}) {
      auto t = torch::full({3}, c.rank() + 1, torch::TensorOptions().dtype(dt));
      c.allReduce(t).wait();
      EXPECT_EQ(t.to(at::kDouble)[0].item<double>(), 3.0) << c10::toString(dt);
    }
  });
}

TEST(Communicator, UnsupportedDtypeIsRefusedBeforeGloo) {
  runRanks(2, [](comm::Communicator& c) {
    auto t = torch::zeros({3}, torch::kBool);
    try {
      c.allReduce(t);
      ADD_FAILURE() << "expected UserError";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("Gloo cannot communicate dtype Bool"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(c.rank())), std::string::npos);
    }
    auto nc = torch::zeros({4, 4}).t();
    EXPECT_THROW(c.allReduce(nc), UserError);
    auto x = torch::zeros({1});
    EXPECT_THROW(c.send(x, c.rank(), 0), UserError);  // sending to oneself
    EXPECT_THROW(c.send(x, 5, 0), UserError);         // no such rank
  });
}

TEST(Communicator, MissingPeerTimesOutNamingOperationAndPeer) {
  // Rank 1 never sends: rank 0's recv must fail within the group timeout and
  // name the operation and the peer.
  const auto t0 = std::chrono::steady_clock::now();
  try {
    runRanks(
        2,
        [](comm::Communicator& c) {
          if (c.rank() == 0) {
            auto t = torch::empty({1});
            c.recv(t, 1, 3).wait();
          }
        },
        std::chrono::milliseconds(1500));
    ADD_FAILURE() << "expected a timeout";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 0: recv from rank 1 (tag 3) failed"), std::string::npos) << msg;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
}

TEST(Communicator, LocalCommunicatorIsIdentity) {
  comm::LocalCommunicator c;
  auto t = torch::arange(5).to(torch::kFloat);
  c.allReduce(t, comm::ReduceOp::Sum).wait();
  EXPECT_TRUE(torch::equal(t, torch::arange(5).to(torch::kFloat)));
  std::vector<at::Tensor> out{torch::empty({5})};
  c.allGather(out, t).wait();
  EXPECT_TRUE(torch::equal(out[0], t));
  EXPECT_THROW(c.send(t, 1, 0), CommError);
}
