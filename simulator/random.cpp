#include "simulator/random.h"

#include <algorithm>
#include <cmath>

namespace lathe {

int64_t Random::integer(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  uint64_t span = uint64_t(hi - lo) + 1;
  return lo + int64_t(uint64_t(uniform() * double(span)) % span);
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
