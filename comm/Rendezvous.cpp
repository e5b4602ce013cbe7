// Implements comm/Rendezvous.h: environment parsing, the TCPStore rendezvous
// with join checks (world size, fingerprint), and creation of the c10d groups.
#include "comm/Rendezvous.h"

#include "comm/LocalCommunicator.h"
#include "comm/ProcessGroupCommunicator.h"
#include "util/Error.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace gradzip::comm {

namespace {

CudaBackendFactory gCudaFactory = nullptr;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

int envInt(const char* name, int lo, int hi) {
  const char* v = env(name);
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  GZ_CHECK(end && *end == '\0' && x >= lo && x <= hi, "environment variable {}={} is not an integer in [{}, {}]",
           name, v, lo, hi);
  return static_cast<int>(x);
}

// The local address on the route to `host`: where peers can reach this rank.
// A connected UDP socket sends nothing; getsockname reports the chosen source.
std::string localAddressTowards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    throw CommError(fmt::format("cannot resolve MASTER_ADDR '{}'", host));
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  std::string out;
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
      char buf[INET_ADDRSTRLEN];
      if (inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf))) out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  if (out.empty()) throw CommError(fmt::format("no network route to MASTER_ADDR '{}'", host));
  return out;
}


using Clock = std::chrono::steady_clock;

// What is left of the rendezvous timeout at `deadline` (at least 1 ms).
std::chrono::milliseconds left(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// Whether something accepts TCP connections at host:port within `wait`: a
// plain connect, no bytes sent.
bool somethingListens(const std::string& host, int port, std::chrono::milliseconds wait) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return false;
  bool ok = false;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = poll(&p, 1, static_cast<int>(wait.count())) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
           err == 0;
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

c10::intrusive_ptr<c10d::Store> openStore(const RendezvousOptions& o, Clock::time_point deadline) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(o.masterPort);
  so.isServer = o.rank == 0 && !o.agentStore;
  so.numWorkers = std::nullopt;  // joins are checked below, with better errors
  so.waitWorkers = false;
  // A client's TCPStore construction tries for `timeout`, sleeps up to
  // `timeout` and tries once more (torch 2.11, TCPStore.cpp), so an absent
  // master costs up to 3x the timeout: give it a third. Store operations get
  // the full timeout afterwards.
  so.timeout = so.isServer ? o.timeout : std::max(std::chrono::milliseconds(1000), o.timeout / 3);
  auto describe = [&](const std::string& what) {
    if (so.isServer)
      return CommError(fmt::format("rank 0: cannot host the rendezvous store on {}:{} ({}); is the port in use? "
                                   "choose another MASTER_PORT",
                                   o.masterAddr, o.masterPort, what));
    return CommError(fmt::format("rank {}: cannot reach the rendezvous store at {}:{} within {} s ({}); is rank 0 "
                                 "running and MASTER_ADDR/MASTER_PORT right?",
                                 o.rank, o.masterAddr, o.masterPort, o.timeout.count() / 1000.0, what));
  };
  if (so.isServer) {
    try {
      auto store = c10::make_intrusive<c10d::TCPStore>(o.masterAddr, so);
      store->setTimeout(o.timeout);
      return store;
    } catch (const std::exception& e) {
      throw describe(firstLine(e.what()));
    }
  }
  // A client's first exchange (validate, then ping) waits for the answer
  // without any timeout: a program that accepts the connection and never
  // answers (a web server on MASTER_PORT) would block it forever. So the
  // client is built on a helper thread, and this thread waits until the
  // deadline. A thread still blocked then is left to end when that program
  // closes the connection, or with the process; it owns all it touches.
  struct Attempt {
    std::mutex mutex;
    std::condition_variable done;
    bool finished = false;
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
  };
  auto attempt = std::make_shared<Attempt>();
  std::thread([attempt, addr = o.masterAddr, so] {
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(addr, so);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(attempt->mutex);
    attempt->store = std::move(store);
    attempt->error = error;
    attempt->finished = true;
    attempt->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(attempt->mutex);
  if (!attempt->done.wait_until(lock, deadline, [&] { return attempt->finished; })) {
    lock.unlock();
    if (somethingListens(o.masterAddr, o.masterPort, std::chrono::milliseconds(1000)))
      throw CommError(fmt::format(
          "rank {}: {}:{} accepted the connection but did not answer as a rendezvous store within {} s; another "
          "program (not gradzip's rank 0 or torchrun's agent) seems to listen on MASTER_PORT={}: stop it, or start "
          "every rank with a free MASTER_PORT",
          o.rank, o.masterAddr, o.masterPort, o.timeout.count() / 1000.0, o.masterPort));
    throw describe("no answer");
  }
  if (attempt->error) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(attempt->error);
    } catch (const std::exception& e) {
      what = firstLine(e.what());
    }
    // Something listens, yet the store's handshake failed: it answered with
    // bytes that are not the store's (a web server replying to the
    // handshake as a malformed request), or it closed the connection.
    if (somethingListens(o.masterAddr, o.masterPort, std::chrono::milliseconds(1000)))
      throw CommError(fmt::format(
          "rank {}: {}:{} accepted the connection but did not answer as a rendezvous store ({}); another program "
          "(not gradzip's rank 0 or torchrun's agent) seems to listen on MASTER_PORT={}: stop it, or start every "
          "rank with a free MASTER_PORT",
          o.rank, o.masterAddr, o.masterPort, what, o.masterPort));
    throw describe(what);
  }
  attempt->store->setTimeout(o.timeout);
  return attempt->store;
}

// Every rank publishes "worldSize|fingerprint"; each compares with rank 0's and
// rank 0 waits for all, so mismatches fail fast with names instead of hanging.
void checkJoin(c10d::Store& store, const RendezvousOptions& o, Clock::time_point deadline) {
  const std::string mine = fmt::format("{}|{}", o.worldSize, o.fingerprint);
  store.set(fmt::format("gradzip/join/{}", o.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  auto read = [&](int r) {
    auto v = store.get(fmt::format("gradzip/join/{}", r));
    return std::string(v.begin(), v.end());
  };
  auto split = [](const std::string& s) { return std::make_pair(s.substr(0, s.find('|')), s.substr(s.find('|') + 1)); };
  auto compare = [&](int r, const std::string& theirs) {
    auto [ws, fp] = split(theirs);
    if (ws != std::to_string(o.worldSize))
      throw CommError(fmt::format("rank {}: world size mismatch: this rank has WORLD_SIZE={} but rank {} has {}",
                                  o.rank, o.worldSize, r, ws));
    if (fp != o.fingerprint)
      throw CommError(fmt::format("rank {}: configuration mismatch: this rank's config fingerprint {} differs from "
                                  "rank {}'s {}; start every rank with the same config",
                                  o.rank, o.fingerprint, r, fp));
  };
  std::vector<std::string> keys;
  for (int r = 0; r < o.worldSize; ++r) keys.push_back(fmt::format("gradzip/join/{}", r));
  if (o.rank != 0) {
    try {
      store.wait({keys[0]}, left(deadline));
    } catch (const std::exception&) {
      throw CommError(fmt::format("rank {}: rank 0 did not join within {} s", o.rank, o.timeout.count() / 1000.0));
    }
    compare(0, read(0));
  }
  try {
    store.wait(keys, left(deadline));
  } catch (const std::exception&) {
    std::string missing;
    for (int r = 0; r < o.worldSize; ++r)
      if (!store.check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw CommError(fmt::format("rank {}: ranks [{}] did not join within {} s (world size {})", o.rank, missing,
                                o.timeout.count() / 1000.0, o.worldSize));
  }
  for (int r = 0; r < o.worldSize; ++r)
    if (r != o.rank) compare(r, read(r));
}

}  // namespace

void setCudaBackendFactory(CudaBackendFactory factory) { gCudaFactory = factory; }

RendezvousOptions RendezvousOptions::fromEnv(std::chrono::milliseconds timeout) {
  RendezvousOptions o;
  o.timeout = timeout;
  if (env("WORLD_SIZE") || env("RANK")) {
    GZ_CHECK(env("WORLD_SIZE") && env("RANK"), "RANK and WORLD_SIZE must be set together (torchrun sets both)");
    o.worldSize = envInt("WORLD_SIZE", 1, 1 << 20);
    o.rank = envInt("RANK", 0, o.worldSize - 1);
    o.localRank = env("LOCAL_RANK") ? envInt("LOCAL_RANK", 0, 1 << 20) : 0;
  } else if (env("SLURM_NTASKS") && env("SLURM_PROCID")) {
    o.worldSize = envInt("SLURM_NTASKS", 1, 1 << 20);
    o.rank = envInt("SLURM_PROCID", 0, o.worldSize - 1);
    o.localRank = env("SLURM_LOCALID") ? envInt("SLURM_LOCALID", 0, 1 << 20) : 0;
  }
  if (o.worldSize > 1) {
    GZ_CHECK(env("MASTER_ADDR") && env("MASTER_PORT"),
             "MASTER_ADDR and MASTER_PORT must be set when the world size is {} (rank {})", o.worldSize, o.rank);
  }
  if (env("MASTER_ADDR")) o.masterAddr = env("MASTER_ADDR");
  if (env("MASTER_PORT")) o.masterPort = envInt("MASTER_PORT", 1, 65535);
  if (env("GLOO_SOCKET_IFNAME")) o.interface = env("GLOO_SOCKET_IFNAME");
  if (env("TORCHELASTIC_USE_AGENT_STORE")) o.agentStore = std::string(env("TORCHELASTIC_USE_AGENT_STORE")) == "True";
  if (env("TORCHELASTIC_RESTART_COUNT")) o.generation = envInt("TORCHELASTIC_RESTART_COUNT", 0, 1 << 20);
  if (env("GRADZIP_COMM_TIMEOUT_S")) o.timeout = std::chrono::seconds(envInt("GRADZIP_COMM_TIMEOUT_S", 1, 86400));
  return o;
}

std::unique_ptr<Communicator> connect(const RendezvousOptions& o) {
  GZ_CHECK(o.worldSize >= 1 && o.rank >= 0 && o.rank < o.worldSize, "rank {} is out of range for world size {}",
           o.rank, o.worldSize);
  GZ_CHECK(o.cudaBackend == "auto" || o.cudaBackend == "nccl" || o.cudaBackend == "gloo",
           "unknown CUDA backend '{}' (valid: auto, nccl, gloo)", o.cudaBackend);
  if (o.worldSize == 1) return std::make_unique<LocalCommunicator>();

  // Connecting and joining share one timeout; Gloo's connection setup below
  // has its own (Options::timeout is also its default operation timeout).
  const auto deadline = Clock::now() + o.timeout;
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::PrefixStore>(fmt::format("gradzip{}", o.generation), openStore(o, deadline));
  try {
    checkJoin(*store, o, deadline);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    // The store's host (rank 0, or torchrun's agent) went away mid-join,
    // typically because it already failed a join check itself.
    throw CommError(fmt::format("rank {}: lost the rendezvous store at {}:{} while joining ({}); see rank 0's error",
                                o.rank, o.masterAddr, o.masterPort, firstLine(e.what())));
  }

  auto gopts = c10d::ProcessGroupGloo::Options::create(o.timeout);
  try {
    if (!o.interface.empty())
      gopts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(o.interface));
    else
      gopts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(localAddressTowards(o.masterAddr, o.masterPort)));
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot create a Gloo device ({})", o.rank, firstLine(e.what())));
  }
  gopts->threads = 2;
  c10::intrusive_ptr<c10d::Backend> gloo;
  try {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", store);
    gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, o.rank, o.worldSize, gopts);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: Gloo group setup failed ({})", o.rank, firstLine(e.what())));
  }
  c10::intrusive_ptr<c10d::Backend> cuda;
  if (gCudaFactory && o.cudaBackend != "gloo")
    cuda = gCudaFactory(c10::make_intrusive<c10d::PrefixStore>("nccl", store), o.rank, o.worldSize, o.timeout);
  if (o.cudaBackend == "nccl" && !cuda)
    throw CommError(fmt::format("rank {}: comm.cuda_backend: nccl, but {}", o.rank,
                                gCudaFactory ? "no GPU is visible to this process"
                                             : "this gradzip was built without CUDA (GRADZIP_CUDA=OFF or no CUDA toolkit)"));
  spdlog::debug("joined {} ranks through {}:{}", o.worldSize, o.masterAddr, o.masterPort);
  return std::make_unique<ProcessGroupCommunicator>(gloo, cuda, o.rank, o.worldSize, o.timeout,
                                                    o.cudaBackend == "gloo");
}

}  // namespace gradzip::comm
