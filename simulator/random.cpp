#include "simulator/random.h"

#include <algorithm>
#include <cmath>

namespace lathe {

int64_t Random::integer(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  uint64_t span = uint64_t(hi) - uint64_t(lo) + 1;  // 0: all 2^64 values
  if (span != 0 && span <= (uint64_t(1) << 53))  // 53-bit uniform: every value reachable
    return lo + int64_t(uint64_t(uniform() * double(span)) % span);
  // Wider spans (a sweep of more than 2^53 points) from whole 64-bit draws: a double
  // in [0, 1) has 53 bits, so scaling it reaches one value in span / 2^53. Rejection
  // keeps them uniform: draws at or above the largest multiple of span are redrawn.
  if (span == 0) return int64_t(engine_());
  const uint64_t limit = ~uint64_t(0) - ~uint64_t(0) % span;
  uint64_t x;
  do x = engine_();
  while (x >= limit);
  return int64_t(uint64_t(lo) + x % span);
}

double Random::exponential(double rate) {
  return -std::log1p(-uniform()) / rate;
}

double Random::normal() {
  double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double Random::sample(const Distribution& d, bool integral) {
  double v = d.a;
  switch (d.kind) {
    case Distribution::Kind::fixed:
      v = d.a;
      break;
    case Distribution::Kind::uniform:
      if (integral) return double(integer(int64_t(std::ceil(d.a)), int64_t(std::floor(d.b))));
      v = uniform(d.a, d.b);
      break;
    case Distribution::Kind::lognormal:
      v = d.a * std::exp(d.b * normal());
      break;
  }
  if (!integral) return v;
  return std::max(1.0, std::round(v));
}

size_t Random::pick(const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  double x = uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return i;
    x -= weights[i];
  }
  return weights.empty() ? 0 : weights.size() - 1;
}

}  // namespace lathe
