// Math of the CPU kernels (codegen/cpu/kernel_prelude.h) against libm in double, both
// JIT-compiled with the kernels' fast-math flags and compiled into this test with the
// build's (IEEE) flags, so neither relies on what the other's flags allow:
//  - the vector silu (vsilu, silu_mul): x / (1 + e^-x) for values from -120 to 120 (both
//    tails: e^-x beyond float range and below vexp_neg's cutoff), lengths that end in a
//    partial vector, the product with an up row, no up row (the unfused silu op), and an
//    output that aliases the input;
//  - RoPE's cos / sin table (rope_table: its own range reduction and polynomials) at
//    positions up to 2^20 and frequencies from 1 down to theta 500000's smallest.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cpu/kernel_prelude.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

const char* kHarness = R"(
extern "C" void silu_mul_test(const float* g, const float* u, float* o, long n) { lk::silu_mul(g, u, o, n); }
extern "C" void rope_table_test(int pos, const double* f, float* cs, float* sn) { lk::rope_table<128>(pos, f, cs, sn); }
)";

using Fn = void (*)(const float*, const float*, float*, long);

double silu(double x) { return x / (1.0 + std::exp(-x)); }

void host_silu_mul(const float* g, const float* u, float* o, long n) { lk::silu_mul(g, u, o, n); }
void host_rope_table(int pos, const double* f, float* cs, float* sn) { lk::rope_table<128>(pos, f, cs, sn); }

class CpuSilu : public ::testing::TestWithParam<bool> {};

TEST_P(CpuSilu, MatchesDoublePrecision) {
  Fn fn = GetParam() ? reinterpret_cast<Fn>(testing::test_jit().get(std::string(cpu_prelude_text()) + kHarness,
                                                                      "silu_mul_test", "prelude_math_test"))
                      : host_silu_mul;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), narrow(-8.0f, 8.0f), up(-2.0f, 2.0f);
  for (long n : {1L, 5L, 16L, 17L, 31L, 128L, 1000L}) {
    const size_t len = static_cast<size_t>(n);
    std::vector<float> g(len), u(len), o(len, -1.0f);
    for (long i = 0; i < n; ++i) g[size_t(i)] = i % 2 ? wide(rng) : narrow(rng), u[size_t(i)] = up(rng);
    if (n >= 5) g[0] = 0, g[1] = -87.5f, g[2] = 87.5f, g[3] = -1e-30f, g[4] = 1e-30f;
    fn(g.data(), u.data(), o.data(), n);
    for (long i = 0; i < n; ++i) {
      const double want = silu(g[size_t(i)]) * u[size_t(i)];
      // Relative to the value, with an absolute floor for results near zero.
      EXPECT_NEAR(o[size_t(i)], want, 1e-6 * std::fabs(want) + 1e-30) << "n " << n << " x " << g[size_t(i)];
    }
    // No up row, written over the input.
    std::vector<float> in = g;
    fn(in.data(), nullptr, in.data(), n);
    for (long i = 0; i < n; ++i) {
      const double want = silu(g[size_t(i)]);
      EXPECT_NEAR(in[size_t(i)], want, 1e-6 * std::fabs(want) + 1e-30) << "n " << n << " x " << g[size_t(i)];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(JitOrHost, CpuSilu, ::testing::Bool(),
                         [](const auto& i) { return std::string(i.param ? "jit" : "host"); });

using RopeFn = void (*)(int, const double*, float*, float*);

class CpuRopeTable : public ::testing::TestWithParam<bool> {};

TEST_P(CpuRopeTable, MatchesLibm) {
  RopeFn fn = GetParam() ? reinterpret_cast<RopeFn>(testing::test_jit().get(
                               std::string(cpu_prelude_text()) + kHarness, "rope_table_test", "prelude_math_test"))
                         : host_rope_table;
  std::mt19937 rng(5);
  int checked = 0;
  for (double theta : {10000.0, 500000.0}) {
    std::vector<double> freq(64);
    for (int i = 0; i < 64; ++i) freq[size_t(i)] = std::pow(theta, -2.0 * i / 128.0);
    std::vector<int> positions = {0, 1, 2, 3, 7, 100, 4095, 65535, 1 << 20};
    for (int i = 0; i < 40; ++i) positions.push_back(int(rng() % (1u << 20)));
    for (int pos : positions) {
      std::vector<float> cs(64), sn(64);
      fn(pos, freq.data(), cs.data(), sn.data());
      for (size_t i = 0; i < 64; ++i) {
        const double a = double(pos) * freq[i];
        // libm rounded to float, within two float ulps of 1.
        EXPECT_NEAR(cs[i], float(std::cos(a)), 2.4e-7) << "theta " << theta << " pos " << pos << " pair " << i;
        EXPECT_NEAR(sn[i], float(std::sin(a)), 2.4e-7) << "theta " << theta << " pos " << pos << " pair " << i;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * 49 * 64);
}

INSTANTIATE_TEST_SUITE_P(JitOrHost, CpuRopeTable, ::testing::Bool(),
                         [](const auto& i) { return std::string(i.param ? "jit" : "host"); });

}  // namespace
}  // namespace lathe
