#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "ir/assert.h"

namespace lathe {
namespace {

TEST(Sampler, GreedyTakesTheLargestLogit) {
  Sampler s(SamplerOptions{});
  EXPECT_EQ(s.sample({0.1f, 2.5f, -1.0f, 2.4f}), 1);
}

// top-k 2 only ever draws the two largest; a fixed seed repeats the draws; a low
// temperature concentrates on the largest.
TEST(Sampler, TopKAndSeedAndTemperature) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.9f, 0.5f, -2.0f};
  SamplerOptions o;
  o.temperature = 1.0;
  o.top_k = 2;
  o.seed = 7;
  Sampler a(o), b(o);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 400; ++i) {
    int32_t t = a.sample(logits);
    EXPECT_EQ(t, b.sample(logits));
    ++seen[t];
  }
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 100);
  EXPECT_GT(seen[2], 100);
  o.temperature = 0.01;
  o.top_k = 0;
  Sampler cold(o);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(cold.sample(logits), 1);
}

// NaN logits (a broken plan) are an error, not token 0 (greedy) or a constant token.
TEST(Sampler, NanLogitsAreAnError) {
  const std::vector<float> logits = {0.5f, std::nanf(""), 1.0f};
  Sampler greedy(SamplerOptions{});
  EXPECT_THROW(greedy.sample(logits), Error);
  SamplerOptions o;
  o.temperature = 0.8;
  Sampler hot(o);
  EXPECT_THROW(hot.sample(logits), Error);
}

}  // namespace
}  // namespace lathe
