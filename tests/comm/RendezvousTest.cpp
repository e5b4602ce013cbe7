// Tests of comm/Rendezvous: environment parsing (torchrun and SLURM) and the
// clear, bounded-time errors for a port in use, an unreachable master,
// another program on the master port, a world-size mismatch, a
// config-fingerprint mismatch, and a CUDA backend that cannot be had.
#include "comm/Rendezvous.h"
#include "util/Error.h"

#include "tests/testing/LoopbackListener.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

using namespace gradzip;
using namespace std::chrono_literals;

namespace {

// A listening socket on a free loopback port for the test's lifetime.
using BusyPort = gradzip::testing::LoopbackListener;

int freePort() {
  BusyPort p;
  return p.port;  // closed again on return; good enough for a test
}

comm::RendezvousOptions opts(int rank, int world, int port, std::chrono::milliseconds timeout = 3000ms) {
  comm::RendezvousOptions o;
  o.rank = rank;
  o.worldSize = world;
  o.masterAddr = "127.0.0.1";
  o.masterPort = port;
  o.timeout = timeout;
  return o;
}

std::string commErrorOf(const comm::RendezvousOptions& o) {
  try {
    comm::connect(o);
  } catch (const CommError& e) {
    return e.what();
  }
  return "no error";
}

struct EnvGuard {
  std::vector<std::string> names;
  void set(const std::string& k, const std::string& v) {
    names.push_back(k);
    setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};

}  // namespace

TEST(Rendezvous, TorchrunEnvironment) {
  EnvGuard g;
  g.set("RANK", "1");
  g.set("WORLD_SIZE", "4");
  g.set("LOCAL_RANK", "1");
  g.set("MASTER_ADDR", "127.0.0.1");
  g.set("MASTER_PORT", "29555");
  auto o = comm::RendezvousOptions::fromEnv();
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.worldSize, 4);
  EXPECT_EQ(o.localRank, 1);
  EXPECT_EQ(o.masterPort, 29555);
}

TEST(Rendezvous, SlurmEnvironment) {
  EnvGuard g;
  g.set("SLURM_PROCID", "2");
  g.set("SLURM_NTASKS", "3");
  g.set("SLURM_LOCALID", "0");
  g.set("MASTER_ADDR", "127.0.0.1");
  g.set("MASTER_PORT", "29556");
  auto o = comm::RendezvousOptions::fromEnv();
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.worldSize, 3);
}

TEST(Rendezvous, BadEnvironmentNamesTheVariable) {
  EnvGuard g;
  g.set("RANK", "5");
  g.set("WORLD_SIZE", "2");
  try {
    comm::RendezvousOptions::fromEnv();
    ADD_FAILURE();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=5"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, TimeoutIsTheCallersUnlessTheEnvironmentOverridesIt) {
  EXPECT_EQ(comm::RendezvousOptions::fromEnv(std::chrono::seconds(7)).timeout, std::chrono::seconds(7));
  EnvGuard g;
  g.set("GRADZIP_COMM_TIMEOUT_S", "3");
  EXPECT_EQ(comm::RendezvousOptions::fromEnv(std::chrono::seconds(7)).timeout, std::chrono::seconds(3));
}

TEST(Rendezvous, NoEnvironmentMeansOneRank) {
  auto o = comm::RendezvousOptions::fromEnv();
  EXPECT_EQ(o.worldSize, 1);
  auto c = comm::connect(o);
  EXPECT_EQ(c->backendName(), "local");
}

TEST(Rendezvous, TwoRanksConnectAndAllReduce) {
  const int port = freePort();
  auto f = std::async(std::launch::async, [&] { return comm::connect(opts(1, 2, port)); });
  auto c0 = comm::connect(opts(0, 2, port));
  auto c1 = f.get();
  auto a = torch::ones({4}), b = torch::ones({4});
  auto w0 = c0->allReduce(a), w1 = c1->allReduce(b);
  w0.wait();
  w1.wait();
  EXPECT_TRUE(torch::equal(a, torch::full({4}, 2.0f)));
}

TEST(Rendezvous, PortInUseIsNamed) {
  BusyPort busy;
  const auto msg = commErrorOf(opts(0, 2, busy.port));
  EXPECT_NE(msg.find("cannot host the rendezvous store on 127.0.0.1:" + std::to_string(busy.port)),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("port in use"), std::string::npos) << msg;
}

TEST(Rendezvous, UnreachableMasterFailsWithinTimeout) {
  const int port = freePort();  // nobody listens there
  const auto t0 = std::chrono::steady_clock::now();
  const auto msg = commErrorOf(opts(1, 2, port, 2000ms));
  EXPECT_NE(msg.find("rank 1: cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)),
            std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

TEST(Rendezvous, SomethingElseOnMasterPortFailsWithinTimeoutNamingIt) {
  // A listening socket that is not a TCPStore: the kernel accepts the
  // connection, nothing ever answers (as a web server on MASTER_PORT would
  // not answer the store's binary handshake). c10d's client waits for the
  // answer without a timeout; connect must not.
  BusyPort other;
  const auto t0 = std::chrono::steady_clock::now();
  const auto msg = commErrorOf(opts(1, 2, other.port, 2000ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(msg.find("rank 1: 127.0.0.1:" + std::to_string(other.port) + " accepted the connection but did not "
                     "answer as a rendezvous store within 2 s"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("another program"), std::string::npos) << msg;
  EXPECT_GE(took, 1900ms);
  EXPECT_LT(took, 6s);
}

TEST(Rendezvous, SomethingElseAnsweringOnMasterPortIsNamed) {
  // The same program, answering the store's handshake with bytes of its own
  // (a web server's reply to a malformed request) and closing.
  BusyPort other;
  std::thread server([fd = other.fd] {
    for (;;) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;  // shutdown() below
      char buf[64];
      if (recv(c, buf, sizeof(buf), 0) > 0) {
        const char reply[] = "HTTP/1.0 400 Bad request\r\n\r\n";
        (void)!send(c, reply, sizeof(reply) - 1, MSG_NOSIGNAL);
      }
      close(c);
    }
  });
  const auto msg = commErrorOf(opts(1, 2, other.port, 2000ms));
  shutdown(other.fd, SHUT_RDWR);
  server.join();
  EXPECT_NE(msg.find("rank 1: 127.0.0.1:" + std::to_string(other.port) + " accepted the connection but did not "
                     "answer as a rendezvous store"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("another program"), std::string::npos) << msg;
}

TEST(Rendezvous, WorldSizeMismatchIsNamed) {
  const int port = freePort();
  auto f = std::async(std::launch::async, [&] { return commErrorOf(opts(1, 3, port, 3000ms)); });
  const auto msg0 = commErrorOf(opts(0, 2, port, 3000ms));
  const auto msg1 = f.get();
  // Rank 0 finds rank 1's world size differs; rank 1 names the mismatch too
  // unless rank 0 had already exited (then it reports losing the store).
  EXPECT_NE(msg0.find("world size mismatch: this rank has WORLD_SIZE=2 but rank 1 has 3"), std::string::npos)
      << msg0;
  EXPECT_TRUE(msg1.find("world size mismatch: this rank has WORLD_SIZE=3 but rank 0 has 2") != std::string::npos ||
              msg1.find("lost the rendezvous store") != std::string::npos) << msg1;
}

TEST(Rendezvous, ConfigFingerprintMismatchIsNamed) {
  const int port = freePort();
  auto o0 = opts(0, 2, port), o1 = opts(1, 2, port);
  o0.fingerprint = "aaaa";
  o1.fingerprint = "bbbb";
  auto f = std::async(std::launch::async, [&] { return commErrorOf(o1); });
  const auto msg0 = commErrorOf(o0);
  const auto msg1 = f.get();
  // Rank 0 always sees the mismatch; rank 1 either sees it too or, when rank 0
  // has already exited, reports losing the store (never a hang or a crash).
  EXPECT_NE(msg0.find("configuration mismatch"), std::string::npos) << msg0;
  EXPECT_TRUE(msg1.find("configuration mismatch") != std::string::npos ||
              msg1.find("lost the rendezvous store") != std::string::npos) << msg1;
}

TEST(Rendezvous, CudaBackendNcclWithoutItsPiecesIsNamed) {
  // This test program never registers the NCCL factory (comm/NcclBackend.h),
  // as a build without CUDA does not: asking for NCCL must say so on every rank.
  const int port = freePort();
  auto o0 = opts(0, 2, port), o1 = opts(1, 2, port);
  o0.cudaBackend = o1.cudaBackend = "nccl";
  auto f = std::async(std::launch::async, [&] { return commErrorOf(o1); });
  const auto msg0 = commErrorOf(o0);
  const auto msg1 = f.get();
  for (const auto& [rank, msg] : {std::pair{0, msg0}, {1, msg1}})
    EXPECT_NE(msg.find(fmt::format("rank {}: comm.cuda_backend: nccl, but this gradzip was built without CUDA", rank)),
              std::string::npos) << msg;
}

TEST(Rendezvous, UnknownCudaBackendIsNamed) {
  auto o = opts(0, 1, freePort());
  o.cudaBackend = "mpi";
  try {
    comm::connect(o);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown CUDA backend 'mpi' (valid: auto, nccl, gloo)"), std::string::npos)
        << e.what();
  }
}
