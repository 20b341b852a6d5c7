// Token sampling: greedy (temperature 0), or temperature with optional top-k and
// top-p (nucleus) filtering, from a seeded generator so runs repeat exactly.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace lathe {

struct SamplerOptions {
  double temperature = 0.0;  // 0 = greedy
  int top_k = 0;             // 0 = all tokens
  double top_p = 1.0;        // 1 = no nucleus cut
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions o);
  int32_t sample(const std::vector<float>& logits);
  bool greedy() const { return o_.temperature <= 0; }

 private:
  SamplerOptions o_;
  std::mt19937_64 rng_;
};

}  // namespace lathe
