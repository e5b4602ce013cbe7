// Rendezvous: builds a Communicator from the torchrun environment (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), from SLURM's (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR/MASTER_PORT still required when
// SLURM_NTASKS > 1), or from explicit options. Rank 0 hosts c10d's TCPStore;
// every rank then joins a ProcessGroupGloo (and ProcessGroupNCCL where CUDA is
// compiled in and present). World size 1 needs no environment and yields a
// LocalCommunicator.
#pragma once

#include "comm/Communicator.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace gradzip::comm {

struct RendezvousOptions {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  // Bounds the store connection and every collective (dead peers fail within it).
  std::chrono::milliseconds timeout{60000};
  // Network interface for Gloo (GLOO_SOCKET_IFNAME); empty = the address that
  // routes to masterAddr.
  std::string interface;
  // Opaque text every rank must agree on (e.g. a hash of the effective config);
  // a mismatch is reported at connect time naming the ranks. Empty skips it.
  std::string fingerprint;
  // torchrun's agent already hosts the store on MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank, rank 0 included, joins as a
  // client. `generation` (TORCHELASTIC_RESTART_COUNT) keeps restarts' keys apart.
  bool agentStore = false;
  int generation = 0;
  // How CUDA tensors travel: "nccl" (NCCL; needs a CUDA build and a GPU per
  // rank, else connect() fails naming which is missing), "gloo" (copied
  // through host memory over Gloo: comm/HostStaging.h; for ranks that share a
  // GPU), or "auto" (NCCL where the build has it and a GPU is visible; without
  // it a CUDA tensor is refused naming both options).
  std::string cudaBackend = "auto";

  // Reads the torchrun variables, else SLURM's, else defaults to one rank.
  // `timeout` is the caller's (e.g. comm.timeout_s); GRADZIP_COMM_TIMEOUT_S
  // overrides it. Malformed values throw UserError naming the variable.
  static RendezvousOptions fromEnv(std::chrono::milliseconds timeout = std::chrono::seconds(60));
};

// Factory of the backend for CUDA tensors (see comm/NcclBackend.h); returns
// null when no GPU is visible. Unset by default (a build without CUDA).
using CudaBackendFactory = c10::intrusive_ptr<c10d::Backend> (*)(const c10::intrusive_ptr<c10d::Store>& store,
                                                                 int rank, int size,
                                                                 std::chrono::milliseconds timeout);
void setCudaBackendFactory(CudaBackendFactory factory);

// Connects this process; throws CommError naming the cause (port in use,
// unreachable master, world-size or fingerprint mismatch, timeout).
std::unique_ptr<Communicator> connect(const RendezvousOptions& opts);

}  // namespace gradzip::comm
