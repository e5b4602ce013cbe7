// `gradzip bench collectives`: gradzip's point-to-point all-reduce algorithms
// (ring, tree, parameter server; float sum) against c10d's own Gloo all-reduce,
// side by side in one run, for float tensors from --min-bytes to --max-bytes in
// steps of 4x. Per size, each algorithm runs once to warm up and then `repeats`
// times, the algorithms taking turns; each run starts after a barrier and is
// timed as the slowest rank's wall time. Rank 0 prints each algorithm's
// bandwidth (bytes / median time, MB/s = 10^6 B/s), the ratio of Gloo's median
// time to each algorithm's, and the same ratio for the best run of each
// ("best-of": the run least disturbed by other load on a shared machine), and
// appends one JSON line per (size, algorithm) to --out. Our algorithms' times
// include lifting the input (one copy); Gloo's all-reduce runs in place on a
// ready buffer, as a user would call it. Run it under `gradzip launch -n N` or
// torchrun.
#include "experiments/Benchmarks.h"

#include "comm/Collective.h"
#include "comm/Rendezvous.h"
#include "util/Error.h"
#include "util/Median.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <fstream>
#include <functional>

namespace gradzip::experiments {
namespace {

using Clock = std::chrono::steady_clock;

// Times every op in `ops` `repeats` times, round-robin (so a change in machine
// load hits all of them alike), after one warm-up run each. A run starts after
// a barrier and counts the slowest rank's seconds.
struct Timing {
  double median;
  double min;  // best of the repeats: the least disturbed by other load
};
std::vector<Timing> timeRoundRobin(comm::Communicator& comm, int repeats,
                                   const std::vector<std::function<void()>>& ops) {
  const int64_t k = static_cast<int64_t>(ops.size());
  for (const auto& op : ops) {
    comm.barrier().wait();
    op();
  }
  at::Tensor secs = at::empty({k, repeats}, at::kDouble);
  auto table = secs.accessor<double, 2>();
  for (int i = 0; i < repeats; ++i) {
    for (int64_t a = 0; a < k; ++a) {
      comm.barrier().wait();
      const auto start = Clock::now();
      ops[static_cast<size_t>(a)]();
      table[a][i] = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  comm.allReduce(secs, comm::ReduceOp::Max).wait();
  std::vector<Timing> result;
  for (int64_t a = 0; a < k; ++a) {
    const double* p = secs[a].data_ptr<double>();
    std::vector<double> v(p, p + repeats);
    result.push_back(Timing{median(v), *std::min_element(v.begin(), v.end())});
  }
  return result;
}

}  // namespace

int benchCollectives(const BenchCollectivesArgs& args) {
  GZ_CHECK(args.minBytes >= 4 && args.maxBytes >= args.minBytes,
           "bench collectives: need 4 <= --min-bytes <= --max-bytes, got {} and {}", args.minBytes, args.maxBytes);
  GZ_CHECK(args.repeats >= 1, "bench collectives: --repeats must be at least 1, got {}", args.repeats);
  auto comm = comm::connect(comm::RendezvousOptions::fromEnv());
  const int n = comm->size();
  GZ_CHECK(n >= 2, "bench collectives needs at least 2 ranks (run it under `gradzip launch -n N`)");
  // Ranks share the machine's cores; one intra-op thread each avoids
  // oversubscription (the lift copy is the only ATen work timed).
  at::set_num_threads(1);

  const bool leader = comm->rank() == 0;
  std::ofstream out;
  if (leader && !args.out.empty()) {
    out.open(args.out, std::ios::app);
    GZ_CHECK(out, "bench collectives: cannot open {} for appending", args.out);
  }
  const std::vector<std::string> ours = {"ring", "tree", "ps"};
  if (leader) {
    fmt::print("all-reduce of float tensors over {} ranks ({}), algorithm bandwidth in MB/s, median of {}\n", n,
               comm->backendName(), args.repeats);
    fmt::print("{:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8}   best-of ratios (ring tree ps)\n", "bytes",
               "ring", "tree", "ps", "gloo", "ring/gloo", "tree/gloo", "ps/gloo");
  }
  auto sum = comm::floatSum();
  for (int64_t bytes = args.minBytes; bytes <= args.maxBytes; bytes *= 4) {
    const int64_t numel = bytes / 4;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1234 + comm->rank());
    at::Tensor x = at::randn({numel}, gen);
    std::vector<std::unique_ptr<comm::Collective>> colls;
    std::vector<std::function<void()>> ops;
    for (const auto& name : ours) {
      colls.push_back(comm::makeCollective(name, *comm));
      ops.push_back([&, c = colls.back().get()] { c->allReduce(x, *sum); });
    }
    at::Tensor buf = x.clone();
    ops.push_back([&] { comm->allReduce(buf).wait(); });
    const std::vector<Timing> t = timeRoundRobin(*comm, args.repeats, ops);

    if (!leader) continue;
    const double actual = static_cast<double>(numel) * 4;
    auto mbps = [&](double s) { return actual / s / 1e6; };
    const Timing gloo = t.back();
    fmt::print("{:>10} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.3f} {:>10.3f} {:>8.3f}   best-of: {:.3f} {:.3f} {:.3f}\n",
               numel * 4, mbps(t[0].median), mbps(t[1].median), mbps(t[2].median), mbps(gloo.median),
               gloo.median / t[0].median, gloo.median / t[1].median, gloo.median / t[2].median, gloo.min / t[0].min,
               gloo.min / t[1].min, gloo.min / t[2].min);
    std::fflush(stdout);
    if (out.is_open()) {
      for (size_t i = 0; i <= ours.size(); ++i) {
        const std::string algo = i < ours.size() ? ours[i] : "gloo";
        nlohmann::json j = {{"bench", "collectives"},
                            {"algorithm", algo},
                            {"world_size", n},
                            {"bytes", numel * 4},
                            {"dtype", "float32"},
                            {"repeats", args.repeats},
                            {"seconds_median", t[i].median},
                            {"seconds_min", t[i].min},
                            {"algbw_MBps", mbps(t[i].median)},
                            {"ratio_vs_gloo", gloo.median / t[i].median},
                            {"ratio_vs_gloo_best", gloo.min / t[i].min}};
        out << j.dump() << "\n";
      }
      out.flush();
    }
  }
  return 0;
}

}  // namespace gradzip::experiments
