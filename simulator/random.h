// A seeded random source whose streams are the same on every platform: the standard
// library's distributions are implementation-defined, so the transforms are written
// out here (inverse CDF for the exponential, Box-Muller for the normal).
#pragma once

#include <cstdint>
#include <random>

#include "ir/scenario.h"

namespace lathe {

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  // Uniform on [0, 1).
  double uniform() { return double(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Integer uniform on [lo, hi].
  int64_t integer(int64_t lo, int64_t hi);
  double exponential(double rate);
  double normal();
  // One draw of a distribution; `integral` rounds to an integer >= 1 (token counts).
  double sample(const Distribution& d, bool integral);
  // Index drawn with probability proportional to weights[i].
  size_t pick(const std::vector<double>& weights);

 private:
  std::mt19937_64 engine_;  // the algorithm and its output are fixed by the standard
};

}  // namespace lathe
