// Tests compress/Qsgd and compress/NaturalDithering (both on compress/Dithering):
// unbiasedness (Monte Carlo, 5 sigma of the exact per-coordinate variance),
// per-bucket norms (the error of a small bucket next to a large one),
// natural dithering's second moment against its exact value and Theorem 4's
// bound, exact wire size, the all-gather aggregation on 3 ranks, and the
// parameter-server and decompress-add-recompress ring forms (unbiased within a
// variance bound built from the compressors' ω, identical on every rank), and
// the device-generic codec path (compress/DitheringGeneric.cpp): the same
// payload and decoded floats as the CPU loop for sizes around the bucket
// length, signed zeros and zero buckets, and the same aggregate on 3 ranks in
// every deployment.
#include "compress/NaturalDithering.h"
#include "compress/Qsgd.h"

#include "comm/LocalCommunicator.h"
#include "compress/ShardedExchange.h"
#include "tests/compress/AggregateHarness.h"
#include "tests/testing/ThreadGroup.h"
#include "util/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace gradzip::compress {
namespace {

// Exact E[ξ] = y, and per coordinate Var and E[out²] of general dithering
// (Definition 3) for the levels of `q`.
struct Moments {
  at::Tensor var, second;
};
// The norm each coordinate of x is divided by: its bucket's.
at::Tensor coordinateNorms(const Dithering& q, const at::Tensor& x) {
  const int64_t b = q.bucketLength(x.numel());
  return q.bucketNorms(x).to(at::kDouble).repeat_interleave(b).narrow(0, 0, x.numel());
}

Moments exactMoments(const Dithering& q, const at::Tensor& x) {
  const auto norms = coordinateNorms(q, x);
  const auto& lv = q.levels();
  auto var = at::empty({x.numel()}, at::kDouble), sec = at::empty({x.numel()}, at::kDouble);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double norm = norms[i].item<double>();
    const double y = std::fabs(x[i].item<float>()) / norm;
    int j = int(std::upper_bound(lv.begin(), lv.end(), float(y)) - lv.begin()) - 1;
    j = std::clamp(j, 0, int(lv.size()) - 2);
    const double lo = lv[j], hi = lv[j + 1], pUp = (y - lo) / (hi - lo);
    var[i] = norm * norm * (y - lo) * (hi - y);
    sec[i] = norm * norm * (pUp * hi * hi + (1 - pUp) * lo * lo);
  }
  return {var, sec};
}

void checkUnbiased(Dithering& q) {
  comm::LocalCommunicator local;
  auto x = at::randn({64}, at::make_generator<at::CPUGeneratorImpl>(3));
  const int reps = 3000;
  auto sum = at::zeros({64}, at::kDouble);
  Context ctx{local};
  for (int r = 0; r < reps; ++r) {
    ctx.step = r;  // a fresh noise stream per repetition
    sum += q.decode(q.encode(x, ctx), 64, ctx).to(at::kDouble);
  }
  // Coordinate i's mean over `reps` draws has std sqrt(var_i / reps); 5 sigma.
  auto m = exactMoments(q, x);
  auto dev = (sum / reps - x.to(at::kDouble)).abs();
  auto tol = 5 * (m.var / reps).sqrt() + 1e-6;
  EXPECT_TRUE((dev <= tol).all().item<bool>()) << q.name() << " max dev/tol " << (dev / tol).max().item<double>();
}

TEST(Dithering, QsgdIsUnbiased) {
  Qsgd q(QsgdOptions{});
  checkUnbiased(q);
  QsgdOptions inf;
  inf.norm = "inf";
  inf.levels = 3;
  Qsgd qi(inf);
  checkUnbiased(qi);
  QsgdOptions buckets;  // 64 coordinates in 5 buckets, the last one short
  buckets.bucket = 14;
  Qsgd qb(buckets);
  checkUnbiased(qb);
}

// A bucket of small values next to one 1000x larger: with per-bucket norms the
// small bucket's expected squared error Σ Var_i is within Lemma 3.1's
// ω = min(B/s², √B/s) times its own squared norm, and the Monte-Carlo error
// matches it within 5 sigma (Var of Σ e_i² from the exact 2-point law of each
// e_i); with one norm for the whole vector (bucket 0) the same coordinates
// carry ~1000x that error, because |x_i|/‖x‖ falls below the first level 1/s.
TEST(Dithering, QsgdNormalisesPerBucket) {
  constexpr int64_t kB = 512;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  const at::Tensor x = at::cat({at::randn({kB}, gen) * 1000, at::randn({kB}, gen)});
  Qsgd bucketed(QsgdOptions{});
  ASSERT_EQ(bucketed.bucket(), kB);
  QsgdOptions whole;
  whole.bucket = 0;
  Qsgd global(whole);
  const at::Tensor small = x.narrow(0, kB, kB).to(at::kDouble);
  const double expected = exactMoments(bucketed, x).var.narrow(0, kB, kB).sum().item<double>();
  const double s = 7;
  EXPECT_LE(expected, std::min(kB / (s * s), std::sqrt(double(kB)) / s) * small.square().sum().item<double>());
  const double expectedGlobal = exactMoments(global, x).var.narrow(0, kB, kB).sum().item<double>();
  EXPECT_GE(expectedGlobal, 100 * expected);

  // Var(e_i²) = E e_i⁴ − Var_i², e_i = norm·(hi − y) w.p. pUp, norm·(lo − y) otherwise.
  const auto norms = coordinateNorms(bucketed, x);
  const auto& lv = bucketed.levels();
  double varOfSum = 0;
  for (int64_t i = kB; i < 2 * kB; ++i) {
    const double norm = norms[i].item<double>(), y = std::fabs(x[i].item<float>()) / norm;
    const int j = std::clamp(int(std::upper_bound(lv.begin(), lv.end(), float(y)) - lv.begin()) - 1, 0, int(lv.size()) - 2);
    const double lo = lv[j], hi = lv[j + 1], p = (y - lo) / (hi - lo);
    const double e2 = norm * norm * (y - lo) * (hi - y);
    const double e4 = std::pow(norm, 4) * (p * std::pow(hi - y, 4) + (1 - p) * std::pow(y - lo, 4));
    varOfSum += e4 - e2 * e2;
  }
  comm::LocalCommunicator local;
  Context ctx{local};
  const int reps = 400;
  double acc = 0;
  for (int r = 0; r < reps; ++r) {
    ctx.step = r;
    const auto out = bucketed.decode(bucketed.encode(x, ctx), 2 * kB, ctx).to(at::kDouble);
    acc += (out.narrow(0, kB, kB) - small).square().sum().item<double>();
  }
  EXPECT_NEAR(acc / reps, expected, 5 * std::sqrt(varOfSum / reps));
}

TEST(Dithering, NaturalDitheringIsUnbiasedAndWithinTheorem4) {
  NaturalDithering q(NaturalDitheringOptions{});
  checkUnbiased(q);
  for (int s : {2, 4, 8}) {
    NaturalDitheringOptions o;
    o.levels = s;
    NaturalDithering nd(o);
    const int64_t d = 1000;
    auto x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(s));
    auto m = exactMoments(nd, x);
    const double xx = x.to(at::kDouble).pow(2).sum().item<double>();
    const double omega = NaturalDithering::theorem4Omega(d, s, 2.0);
    // Theorem 4: E||D(x)||² <= (ω + 1)||x||² (exact expectation of our probabilities).
    EXPECT_LE(m.second.sum().item<double>(), (omega + 1) * xx) << "s " << s;
    // Monte Carlo of the implementation against the exact second moment: the
    // sum of d independent terms has variance Σ Var(out_i²), out_i² taking
    // norm²·hi² or norm²·lo²; 5 sigma.
    comm::LocalCommunicator local;
    Context ctx{local};
    const int reps = 200;
    double acc = 0, varSum = 0;
    for (int r = 0; r < reps; ++r) {
      ctx.step = r;
      acc += nd.decode(nd.encode(x, ctx), d, ctx).to(at::kDouble).pow(2).sum().item<double>();
    }
    const double norm = nd.bucketNorms(x)[0].item<double>();  // dnat's default: one bucket
    const auto& lv = nd.levels();
    for (int64_t i = 0; i < d; ++i) {
      const double y = std::fabs(x[i].item<float>()) / norm;
      int j = std::clamp(int(std::upper_bound(lv.begin(), lv.end(), float(y)) - lv.begin()) - 1, 0, int(lv.size()) - 2);
      const double lo = lv[j] * lv[j], hi = lv[j + 1] * lv[j + 1], p = (y - lv[j]) / (lv[j + 1] - lv[j]);
      varSum += std::pow(norm, 4) * p * (1 - p) * (hi - lo) * (hi - lo);
    }
    EXPECT_NEAR(acc / reps, m.second.sum().item<double>(), 5 * std::sqrt(varSum / reps) + 1e-9) << "s " << s;
  }
}

TEST(Dithering, WireSizeIsExact) {
  comm::LocalCommunicator local;
  Context ctx{local};
  Qsgd q(QsgdOptions{});  // s = 7: sign + 3-bit index
  EXPECT_EQ(q.codeBits(), 4);
  EXPECT_DOUBLE_EQ(q.bitsPerCoordinate(1024, 2), 4.0 + 2 * 32.0 / 1024);  // + a float32 norm per 512
  EXPECT_DOUBLE_EQ(q.bitsPerCoordinate(1025, 1), (3 * 32.0 + 8 * 513) / 1025);  // 3 buckets, the last of 1
  NaturalDithering nd(NaturalDitheringOptions{});  // s = 8: 9 levels -> sign + 4 bits
  EXPECT_EQ(nd.codeBits(), 5);
  for (int64_t d : {1, 3, 512, 513, 1000, 4097}) {
    for (Dithering* c : std::initializer_list<Dithering*>{&q, &nd}) {
      auto p = c->encode(at::randn({d}), ctx);
      EXPECT_DOUBLE_EQ(p.bytes() * 8.0 / d, c->bitsPerCoordinate(d, 1)) << c->name() << " d " << d;
    }
  }
}

TEST(Dithering, ZeroVectorAndBadInput) {
  comm::LocalCommunicator local;
  Context ctx{local};
  Qsgd q(QsgdOptions{});
  auto z = at::zeros({10});
  EXPECT_TRUE(at::equal(q.decode(q.encode(z, ctx), 10, ctx), z));
  // NaN/Inf, dtype, rank, stride, empty: Compressor.BadInputGivesAClearError.
  QsgdOptions bad;
  bad.norm = "0.5";
  EXPECT_THROW(Qsgd{bad}, UserError);
  QsgdOptions negative;
  negative.bucket = -1;
  EXPECT_THROW(Qsgd{negative}, UserError);
  ctx.collectiveName = "tree";  // partial sums of dithered vectors cannot be forwarded
  EXPECT_THROW(q.aggregate(at::ones({3}), ctx), UserError);
}

TEST(Dithering, AllGatherOnThreeRanks) {
  testing::runRanks(3, [](comm::Communicator& c) {
    Qsgd q(QsgdOptions{});
    NaturalDithering nd(NaturalDitheringOptions{});
    for (Dithering* comp : std::initializer_list<Dithering*>{&q, &nd}) {
      Context ctx{c};
      ctx.collectiveName = "allgather";
      auto x = at::randn({5000}, at::make_generator<at::CPUGeneratorImpl>(10 + c.rank()));
      auto r = comp->aggregate(x, ctx);
      std::vector<at::Tensor> means(c.size()), xs(c.size()), locals(c.size());
      for (int i = 0; i < c.size(); ++i) {
        means[i] = at::empty_like(r.mean);
        xs[i] = at::empty_like(x);
        locals[i] = at::empty_like(x);
      }
      c.allGather(means, r.mean).wait();
      c.allGather(xs, x).wait();
      c.allGather(locals, r.localApplied).wait();
      for (int i = 1; i < c.size(); ++i) EXPECT_TRUE(at::equal(means[i], means[0]));
      // The mean is the average of every rank's decoded message.
      auto avg = at::stack(locals).to(at::kDouble).mean(0).to(at::kFloat);
      EXPECT_TRUE(at::equal(avg, r.mean));
      // Squared error against the exact mean: Σ_i Var_i / n², with Var_i the
      // exact per-rank variance; 10000+ independent terms concentrate, 1.5x.
      double var = 0;
      for (int i = 0; i < c.size(); ++i) var += exactMoments(*comp, xs[i]).var.sum().item<double>();
      var /= c.size() * c.size();
      auto exact = at::stack(xs).mean(0);
      const double err = (r.mean - exact).to(at::kDouble).pow(2).sum().item<double>();
      EXPECT_LE(err, 1.5 * var) << comp->name();
      EXPECT_GE(err, 0.5 * var) << comp->name();
    }
  });
}

// ω of the B(ω) class for d coordinates: QSGD (Alistarh et al. Lemma 3.1,
// p = 2) min(d/s², √d/s); natural dithering Theorem 4.
double omegaOf(const Dithering& q, int64_t d) {
  const int s = static_cast<int>(q.levels().size()) - 1;
  if (q.name() == "qsgd") return std::min(double(d) / (s * s), std::sqrt(double(d)) / s);
  return NaturalDithering::theorem4Omega(d, s, 2.0);
}

// The ps and ring forms on 4 ranks (d = 41: uneven segments): every rank gets
// the same mean; averaged over T steps (fresh noise each step) it converges to
// the exact mean within 4 standard errors of a variance bound V: ps,
// V = Σ_j U_j + ω(||x̄_j||² + U_j) with U_j = Σ_r ω||x_rj||²/n² (uplink, then
// re-compression of the owner's mean); ring, per segment V_0 = ω||P_0||²,
// V_k = V_{k−1} + ω(||P_k||² + V_{k−1}) for the partial sums P_k, over n².
// A bias (e.g. a missing 1/n) would miss by ~||x̄||², far outside.
TEST(Dithering, ParameterServerAndRingFormsAreUnbiasedOnFourRanks) {
  constexpr int kN = 4;
  constexpr int64_t kDim = 41, kSteps = 100;
  testing::runRanks(kN, [](comm::Communicator& c) {
    std::vector<at::Tensor> xs;
    for (int r = 0; r < kN; ++r) xs.push_back(at::randn({kDim}, at::make_generator<at::CPUGeneratorImpl>(30 + r)));
    const at::Tensor exact = at::stack(xs).mean(0).to(at::kDouble);
    for (const std::string form : {"ps", "ring"}) {
      QsgdOptions qo;
      qo.deployment = form;
      NaturalDitheringOptions no;
      no.deployment = form;
      Qsgd q(qo);
      NaturalDithering nd(no);
      for (Dithering* comp : std::initializer_list<Dithering*>{&q, &nd}) {
        const auto off = shardOffsets(kDim, kN);
        double bound = 0;
        for (int j = 0; j < kN; ++j) {
          const int64_t len = off[j + 1] - off[j];
          const double w = omegaOf(*comp, len);
          auto seg = [&](int r) { return xs[r].narrow(0, off[j], len).to(at::kDouble); };
          if (form == "ps") {
            double u = 0;
            for (int r = 0; r < kN; ++r) u += w * seg(r).square().sum().item<double>() / (kN * kN);
            bound += u + w * (exact.narrow(0, off[j], len).square().sum().item<double>() + u);
          } else {
            at::Tensor partial = seg(j);
            double v = w * partial.square().sum().item<double>();
            for (int k = 1; k < kN; ++k) {
              partial = partial + seg((j + k) % kN);
              v = v + w * (partial.square().sum().item<double>() + v);
            }
            bound += v / (kN * kN);
          }
        }
        at::Tensor avg = at::zeros({kDim}, at::kDouble);
        for (int64_t t = 0; t < kSteps; ++t) {
          Context ctx{c};
          ctx.collectiveName = t % 2 ? form : "engine";  // the deployment option or the plan's name
          ctx.step = t;
          auto r = comp->aggregate(xs[c.rank()], ctx);
          if (t == 0) testing::expectIdenticalAcrossRanks(c, r.mean);
          avg += r.mean.to(at::kDouble);
        }
        avg /= kSteps;
        const double err = (avg - exact).square().sum().item<double>();
        EXPECT_LE(err, 16 * bound / kSteps) << comp->name() << " " << form << " bound " << bound;
        EXPECT_EQ(comp->capabilities().collectives, (std::vector<std::string>{"allgather", "ps", "ring"}));
      }
    }
  });
}

// The ring form sends 2(n − 1) segment messages per rank, not (n − 1) whole
// messages as the all-gather does, and bitsPerCoordinate counts n norm headers.
TEST(Dithering, RingAndPsTrafficIsSegmentSized) {
  constexpr int kN = 4;
  constexpr int64_t kDim = 4000;
  testing::runRanks(kN, [](comm::Communicator& c) {
    for (const std::string form : {"ring", "ps", "allgather"}) {
      QsgdOptions o;
      o.deployment = form;
      Qsgd q(o);
      PhaseTimes times;
      Context ctx{c};
      ctx.times = &times;
      q.aggregate(at::randn({kDim}, at::make_generator<at::CPUGeneratorImpl>(c.rank())), ctx);
      const double message = q.bitsPerCoordinate(kDim, kN) * kDim / 8;  // bytes of one rank's n segments
      if (form == "allgather") {
        EXPECT_DOUBLE_EQ(times.bytesSent, (kN - 1) * message);
      } else {
        // each segment of 1000 codes is 2 bucket norms (512 + 488) + 500 bytes: 2(n − 1) of them
        EXPECT_DOUBLE_EQ(q.bitsPerCoordinate(kDim, kN), 8.0 * (8 * kN + kDim * 4 / 8) / kDim);
        EXPECT_EQ(times.bytesSent, 2 * (kN - 1) * (8 + 500)) << form;
      }
    }
  });
}

// Inputs for the path comparisons: Gaussian, with exact zeros, negative
// zeros and (when d > 40) an all-zero run that fills a bucket of 14.
at::Tensor pathTestInput(int64_t d, uint64_t seed) {
  auto x = at::randn({d}, at::make_generator<at::CPUGeneratorImpl>(seed));
  if (d > 3) {
    x[1] = 0.0f;
    x[2] = -0.0f;
  }
  if (d > 40) x.narrow(0, 14, 14).zero_();
  return x;
}

// The generic codec draws the CPU loop's counter-based noise and repeats its
// float operations, so payloads and decoded floats agree bit for bit.
TEST(Dithering, GenericPathGivesTheSameBits) {
  const std::vector<std::pair<std::string, std::string>> configs = {
      {"qsgd", "levels: 7"},
      {"qsgd", "levels: 3\nnorm: inf\nbucket: 14"},
      {"qsgd", "levels: 1\nbucket: 0"},
      {"qsgd", "levels: 300\nnorm: 1\nbucket: 100"},  // 10-bit codes: the wide packing
      {"dnat", "levels: 8"},
      {"dnat", "levels: 4\nbucket: 14"},
  };
  for (const auto& [name, yaml] : configs)
    for (int64_t d : {1, 2, 7, 14, 41, 512, 513, 1000, 4099}) {
      SCOPED_TRACE(name + " " + yaml + " d " + std::to_string(d));
      testing::expectSameBitsOnBothPaths(name, yaml, pathTestInput(d, 50 + d), 2);
    }
}

// Every deployment on 3 ranks: the generic path's mean and localApplied equal
// the CPU path's bit for bit (same noise, same operations, same collectives).
TEST(Dithering, GenericAggregationMatchesTheCpuPathOnThreeRanks) {
  testing::runRanks(3, [](comm::Communicator& c) {
    for (const std::string form : {"allgather", "ps", "ring"})
      for (const std::string name : {"qsgd", "dnat"})
        for (int64_t d : {5, 1031}) {
          auto fast = makeCompressor(name, "deployment: " + form + "\ncodec: auto");
          auto generic = makeCompressor(name, "deployment: " + form + "\ncodec: generic");
          const auto x = pathTestInput(d, 70 + c.rank());
          for (int64_t step = 0; step < 2; ++step) {
            Context cf{c}, cg{c};
            cf.step = cg.step = step;
            cf.seed = cg.seed = 9;
            const auto rf = fast->aggregate(x, cf);
            const auto rg = generic->aggregate(x, cg);
            EXPECT_TRUE(testing::bitEqual(rf.mean, rg.mean)) << name << " " << form << " d " << d;
            EXPECT_TRUE(testing::bitEqual(rf.localApplied, rg.localApplied)) << name << " " << form << " d " << d;
          }
        }
  });
}

}  // namespace
}  // namespace gradzip::compress
