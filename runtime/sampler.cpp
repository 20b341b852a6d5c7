#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/assert.h"

namespace lathe {

Sampler::Sampler(SamplerOptions o) : o_(o), rng_(o.seed) {
  if (o.temperature < 0) throw Error("temperature must be >= 0");
  if (o.top_k < 0) throw Error("top-k must be >= 0");
  if (!(o.top_p > 0 && o.top_p <= 1)) throw Error("top-p must be in (0, 1]");
}

int32_t Sampler::sample(const std::vector<float>& logits) {
  LATHE_ASSERT(!logits.empty(), "sampling from empty logits");
  for (float x : logits)
    if (std::isnan(x))
      throw Error("the logits hold NaN: values overflowed on the way (weights too large for their format: check "
                  "the weight file), or the plan computes garbage (a hand-edited plan, or a kernel bug)");
  if (greedy()) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  size_t keep = o_.top_k > 0 ? std::min(size_t(o_.top_k), idx.size()) : idx.size();
  std::partial_sort(idx.begin(), idx.begin() + long(keep), idx.end(),
                    [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  idx.resize(keep);
  double mx = logits[size_t(idx[0])];
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((double(logits[size_t(idx[i])]) - mx) / o_.temperature);
  // Nucleus: the smallest prefix (by probability) whose mass reaches top_p.
  size_t cut = keep;
  if (o_.top_p < 1) {
    double acc = 0;
    for (size_t i = 0; i < keep; ++i) {
      acc += p[i] / sum;
      if (acc >= o_.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double total = std::accumulate(p.begin(), p.begin() + long(cut), 0.0);
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (size_t i = 0; i < cut; ++i) {
    u -= p[i];
    if (u <= 0) return idx[i];
  }
  return idx[cut - 1];
}

}  // namespace lathe
