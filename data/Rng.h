// The deterministic random number generator of data/: every random choice the
// data pipeline makes (epoch shuffles, crops, flips, MLM masks) comes from an Rng
// derived from explicit integers (seed, epoch, rank, step), never from global
// state, so a run is reproducible and a resumed run draws exactly what the
// uninterrupted one would have. A thin wrapper of std::mt19937_64 whose seed is
// a SplitMix64 hash of the key, so nearby keys give unrelated streams.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <random>

namespace gradzip::data {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : engine_(mix(seed)) {}

  // A stream keyed by several integers, e.g. Rng::derive({seed, epoch, rank, step}).
  // Different keys (including permutations of the same values) give different streams.
  static Rng derive(std::initializer_list<uint64_t> key) {
    uint64_t h = 0x6a09e667f3bcc908ULL;
    for (uint64_t k : key) h = mix(h ^ mix(k + 0x9e3779b97f4a7c15ULL));
    return Rng(h);
  }

  // Uniform integer in [0, n); n > 0.
  uint64_t uniformInt(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(engine_); }
  // Uniform double in [0, 1).
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(engine_); }
  bool bernoulli(double p) { return uniform() < p; }
  uint64_t next() { return engine_(); }
  std::mt19937_64& engine() { return engine_; }

  // SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijective 64-bit mix.
  static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace gradzip::data
