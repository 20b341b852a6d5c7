// The CPU backend's greedy-sampling kernel (argmax_kernel in codegen/cpu/kernel_lib.h:
// rows cut into chunks across the threads, 16-lane maxima, the first index of the
// largest logit) against the sequential scan `if (l[v] > l[best]) best = v` from 0, on
// two threads: vocabularies inside one chunk and across several, a last chunk shorter
// than a vector (4100), ties within and across chunks (the first wins), -inf everywhere, NaN at 0 (kept) and elsewhere
// (never wins).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/abi.h"
#include "codegen/cpu/emit_cpu.h"
#include "codegen/cpu/kernel_lib.h"
#include "runtime/cpu/thread_pool.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

const char* kHarness = R"(
#define ARGMAX(V) \
  extern "C" void argmax_##V(const LatheCtx* c, const LatheStep* st, const float* l, int* t) { lk::argmax_kernel<V>(c, st, l, t); }
ARGMAX(5)
ARGMAX(17)
ARGMAX(40)
ARGMAX(512)
ARGMAX(4096)
ARGMAX(4100)
ARGMAX(4113)
ARGMAX(9000)
)";

using Fn = void (*)(const LatheCtx*, const LatheStep*, const float*, int*);

int scan(const float* l, int V) {
  int best = 0;
  for (int v = 1; v < V; ++v)
    if (l[v] > l[best]) best = v;
  return best;
}

TEST(CpuArgmax, MatchesTheSequentialScan) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  ThreadPool pool(2);
  std::vector<float> shared(size_t(1) << 16);
  LatheCtx c{};
  c.pool = &pool;
  c.parallel_for = ThreadPool::run;
  c.threads = pool.threads();
  c.shared = shared.data();
  c.shared_floats = long(shared.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  int cases = 0;
  for (int V : {5, 17, 40, 512, 4096, 4100, 4113, 9000}) {
    auto fn = reinterpret_cast<Fn>(testing::test_jit().get(std::string(cpu_prelude_text()) + kHarness,
                                                           "argmax_" + std::to_string(V), "argmax_test"));
    ASSERT_LE(lk::argmax_shared_floats(V, 4), long(shared.size()));
    // Each row a different pattern; rows 0-3 of one call, so rows share the chunk pool.
    std::vector<std::vector<float>> rows;
    for (int pattern = 0; pattern < 16; ++pattern) {
      std::vector<float> l(static_cast<size_t>(V));
      for (float& x : l) x = u(rng);
      const int a = int(rng() % uint32_t(V)), b = int(rng() % uint32_t(V));
      switch (pattern) {
        case 0: break;                                               // random
        case 1: l[size_t(V - 1)] = 9; break;                         // the last logit (a short tail)
        case 2: l[size_t(a)] = l[size_t(b)] = 9; break;              // a tie: the first wins
        case 3: for (float& x : l) x = -inf; break;                  // all -inf: index 0
        case 4: l[0] = nan; l[size_t(a)] = 9; break;                 // NaN at 0: kept
        case 5: l[size_t(a)] = nan; break;                           // NaN elsewhere: never wins
        case 6: for (float& x : l) x = nan; l[0] = -inf; break;      // only l[0] is a number
        case 7: for (float& x : l) x = 1; break;                     // all equal: index 0
        case 8: l[0] = 9; break;                                     // the first logit
        case 9: l[size_t(std::min(V - 1, 4096))] = 9; break;         // a chunk's first logit
        case 10: for (float& x : l) x = -inf; l[size_t(b)] = nan; l[size_t(a)] = -1; break;
        case 11: l[size_t(a)] = inf; l[size_t(b)] = inf; break;      // +inf tie
        case 12: l[size_t(std::min(V - 1, 4097))] = 9; l[5 % size_t(V)] = 9; break;  // a tie across chunks
        case 13: l[size_t(V - 1)] = 9; l[size_t(V / 2)] = 9; break;  // a tie with the last logit
        case 14: l[size_t(std::min(V - 1, 8200))] = 9; break;        // the maximum in a later chunk
        case 15: break;                                              // random again
      }
      rows.push_back(l);
    }
    for (size_t r0 = 0; r0 < rows.size(); r0 += 4) {
      std::vector<float> batch;
      for (size_t r = r0; r < r0 + 4; ++r) batch.insert(batch.end(), rows[r].begin(), rows[r].end());
      std::vector<LatheSeq> seqs(4);
      std::vector<int> row_seq(4), row_pos(4, 0);
      for (int s = 0; s < 4; ++s) seqs[size_t(s)] = {s, 0, 1, s}, row_seq[size_t(s)] = s;
      LatheStep st{4, 4, seqs.data(), row_seq.data(), row_pos.data(), nullptr, 0};
      std::vector<int> got(4, -1);
      fn(&c, &st, batch.data(), got.data());
      for (size_t r = r0; r < r0 + 4; ++r) {
        EXPECT_EQ(got[r - r0], scan(rows[r].data(), V)) << "V " << V << " pattern " << r;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 8 * 16);
}

}  // namespace
}  // namespace lathe
