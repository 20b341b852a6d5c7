#include "simulator/moe_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ir/assert.h"
#include "simulator/random.h"
#include "simulator/simulate.h"
#include "support/plans.h"

namespace lathe {
namespace {

struct Mixtral {
  testing::Built b;
  Lowered l;
};

const Mixtral& mixtral() {
  static const Mixtral m = [] {
    Mixtral x;
    x.b = testing::build_plan_graphs("mixtral-8x7b", "h100-sxm", {64, 1024, 2});
    x.l = testing::lower_plan(x.b, {});
    return x;
  }();
  return m;
}

// On the same routing samples, the balanced placement is never slower than
// round-robin, and replicating hot experts never slower than balanced: for uniform,
// Zipf and random measured histograms, in decode at batch 1 and 64 and in prefill.
TEST(Moe, BalancedPlacementIsNeverSlowerThanRoundRobin) {
  const Mixtral& m = mixtral();
  std::vector<MoeOptions> cases;
  for (double skew : {0.0, 0.8, 1.2, 2.0}) {
    MoeOptions o;
    o.zipf_skew = skew;
    cases.push_back(o);
  }
  Random rng(5);
  for (int i = 0; i < 3; ++i) {
    MoeOptions o;
    o.load = ExpertLoadKind::histogram;
    for (int e = 0; e < 8; ++e) o.histogram.push_back(rng.uniform(1, 100));
    o.gpus = 2 + i;  // 2, 3, 4 devices (3 does not divide 8)
    cases.push_back(o);
  }
  int compared = 0;
  for (MoeOptions o : cases) {
    for (int64_t prompt : {int64_t(0), int64_t(256)}) {
      o.prompt = prompt;
      o.batches = prompt ? std::vector<int64_t>{4} : std::vector<int64_t>{1, 64};
      o.samples = 64;
      MoeResult r = simulate_moe(m.l.prefill, m.l.decode, m.b.target, o);
      for (const MoeBatchResult& b : r.batches) {
        ASSERT_EQ(b.placements.size(), 3u);
        const PlacementResult &rr = b.placements[0], &bal = b.placements[1], &rep = b.placements[2];
        EXPECT_LE(bal.step_s, rr.step_s * (1 + 1e-12))
            << "batch " << b.batch << " prompt " << prompt;
        EXPECT_LE(rep.step_s, bal.step_s * (1 + 1e-12))
            << "batch " << b.batch << " prompt " << prompt;
        EXPECT_NEAR(std::accumulate(rr.gpu_load_share.begin(), rr.gpu_load_share.end(), 0.0), 1.0,
                    1e-9);
        EXPECT_NEAR(std::accumulate(rep.gpu_load_share.begin(), rep.gpu_load_share.end(), 0.0), 1.0,
                    1e-9);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 7 * 3);
}

// A two-layer mixtral-8x7b variant with `experts` experts of `expert_ffn`, top_k of
// them per token, lowered on h100-sxm for workload `w`.
Lowered lowered_moe(const std::string& name, int64_t experts, int64_t top_k, int64_t expert_ffn, Workload w) {
  ModelSpec model = load_model("mixtral-8x7b");
  model.name = name;
  model.moe->experts = experts;
  model.moe->top_k = top_k;
  model.moe->expert_ffn = expert_ffn;
  model.layers = 2;
  const Target t = load_target("h100-sxm");
  testing::Built b;
  b.model = model;
  b.target = t;
  b.workload = w;
  b.prefill = build_graph(model, build_options(model, t, {}, w, Phase::prefill));
  b.decode = build_graph(model, build_options(model, t, {}, w, Phase::decode));
  return testing::lower_plan(b, {});
}

// Many experts (64, top-6, as the fine-grained MoE models): the balanced search is
// costed incrementally and checked against a full evaluation of what it finds (an
// assertion inside simulate_moe), never loses to round-robin, and moves experts off the
// hot devices, within its search budget.
TEST(Moe, ManyExpertsBalance) {
  const Target t = load_target("h100-sxm");
  const Lowered l = lowered_moe("moe64", 64, 6, 1408, {64, 1024, 2});
  for (int64_t gpus : {2, 3, 8}) {
    MoeOptions o;
    o.gpus = gpus;
    o.zipf_skew = 1.2;
    o.batches = {1, 64};
    o.samples = 32;
    MoeResult r = simulate_moe(l.prefill, l.decode, t, o);
    ASSERT_EQ(r.batches.size(), 2u);
    for (const MoeBatchResult& br : r.batches) {
      EXPECT_FALSE(br.search_stopped) << gpus << " gpus, batch " << br.batch;
      const PlacementResult &rr = br.placements[0], &bal = br.placements[1];
      EXPECT_LE(bal.step_s, rr.step_s * (1 + 1e-12));
      size_t placed = 0;
      for (const std::vector<int>& on : bal.experts_on_gpu) {
        EXPECT_LE(int64_t(on.size()), (64 + gpus - 1) / gpus);
        placed += on.size();
      }
      EXPECT_EQ(placed, 64u);
      // Zipf 1.2 over 64 experts on 8 devices: round-robin leaves one device well above
      // its share, and balancing lowers the busiest device's load.
      const double rr_max = *std::max_element(rr.gpu_load_share.begin(), rr.gpu_load_share.end());
      const double bal_max = *std::max_element(bal.gpu_load_share.begin(), bal.gpu_load_share.end());
      if (br.batch == 64 && gpus == 8) {
        EXPECT_LT(bal_max, rr_max) << gpus << " gpus";
      }
    }
  }
}

// Replicated copies on many devices (256 experts, top-8, over 64 GPUs: each copy's
// device is chosen among the 16 least busy): a copy costs an expert's weights in every
// layer, so the placement holds copies only when they lower the layer time by 0.1% or
// more (copies that each saved 0.002% piled 7 experts onto one device). Prefill with a
// skewed load still replicates.
TEST(Moe, CopiesOnManyGpusPayForThemselves) {
  const Target t = load_target("h100-sxm");
  const Lowered l = lowered_moe("moe256", 256, 8, 2048, {64, 256, 2});
  int replicated_runs = 0;
  for (int64_t prompt : {int64_t(0), int64_t(256)}) {
    MoeOptions o;
    o.gpus = 64;
    o.zipf_skew = 1.2;
    o.batches = {prompt > 0 ? int64_t(8) : int64_t(64)};
    o.samples = 32;
    o.prompt = prompt;
    o.hot_replicas = 32;
    MoeResult r = simulate_moe(l.prefill, l.decode, t, o);
    const PlacementResult &bal = r.batches[0].placements[1], &rep = r.batches[0].placements[2];
    size_t held = 0;
    for (const std::vector<int>& on : rep.experts_on_gpu) held += on.size();
    const double layer = rep.router_s + rep.dispatch_s + rep.combine_s + rep.experts_s;
    EXPECT_LE(rep.step_s, bal.step_s * (1 + 1e-12)) << "prompt " << prompt;
    if (held > 256) {
      ++replicated_runs;
      EXPECT_GE(bal.step_s - rep.step_s, 1e-3 * layer * double(r.layers) * (1 - 1e-9))
          << "prompt " << prompt << ": " << held - 256 << " copies";
    } else {
      EXPECT_EQ(rep.extra_expert_bytes, 0.0);
    }
  }
  EXPECT_GE(replicated_runs, 1) << "no case replicated an expert";
}

// A skewed load makes round-robin slower in prefill (compute-bound expert GEMMs),
// and balancing recovers part of it.
TEST(Moe, SkewCostsRoundRobinInPrefill) {
  const Mixtral& m = mixtral();
  MoeOptions o;
  o.prompt = 512;
  o.batches = {8};
  o.samples = 16;
  o.zipf_skew = 0;
  double uniform =
      simulate_moe(m.l.prefill, m.l.decode, m.b.target, o).batches[0].placements[0].step_s;
  o.zipf_skew = 1.5;
  MoeResult skewed = simulate_moe(m.l.prefill, m.l.decode, m.b.target, o);
  EXPECT_GT(skewed.batches[0].placements[0].step_s, uniform * 1.05);
  EXPECT_GT(skewed.batches[0].placements[2].speedup, 1.02);
}

// At one GPU with a uniform load there is nothing to place: moe-sim's step is the
// plan's own, as `simulate` costs it. Prefill was 15% slower (each expert's GEMM
// costed alone, its waves counted apart from the other experts').
TEST(Moe, OneGpuMatchesSimulate) {
  const Mixtral& m = mixtral();
  for (int64_t prompt : {int64_t(128), int64_t(512), int64_t(2048)}) {
    MoeOptions o;
    o.gpus = 1;
    o.zipf_skew = 0;
    o.prompt = prompt;
    o.batches = {1};
    o.samples = 8;
    double step = simulate_moe(m.l.prefill, m.l.decode, m.b.target, o).batches[0].placements[0].step_s;
    double ttft = simulate(m.l.prefill, m.l.decode, m.b.target, {1, prompt, 2}).ttft_s;
    EXPECT_NEAR(step, ttft, 0.01 * ttft) << "prompt " << prompt;
  }
  MoeOptions o;
  o.gpus = 1;
  o.zipf_skew = 0;
  o.context = 1024;
  o.batches = {1};
  double step = simulate_moe(m.l.prefill, m.l.decode, m.b.target, o).batches[0].placements[0].step_s;
  double tpot = simulate(m.l.prefill, m.l.decode, m.b.target, {1, 1024, 2}).tpot_s;
  EXPECT_NEAR(step, tpot, 0.01 * tpot);
}

// The all-to-all runs over a full-duplex link: a device's time is the busier direction
// at half the link's two-way bandwidth (it was sent + received over the whole link,
// which halved a receiving device's time). Two experts take every token: round-robin
// puts them on devices 0 and 1, each of which receives its expert's rows from the three
// other devices (3 x 1024 tokens) and sends 1024 to the other.
TEST(Moe, AllToAllCostsTheBusierDirection) {
  const Mixtral& m = mixtral();
  MoeOptions o;
  o.gpus = 4;
  o.load = ExpertLoadKind::histogram;
  o.histogram = {1, 1, 0, 0, 0, 0, 0, 0};
  o.prompt = 512;
  o.batches = {8};  // 2 sequences of 512 tokens a device
  o.samples = 4;
  const MoeResult r = simulate_moe(m.l.prefill, m.l.decode, m.b.target, o);
  const PlacementResult& rr = r.batches[0].placements[0];
  const Target& t = m.b.target;
  const double row = double(load_model("mixtral-8x7b").hidden) * 2;  // a bf16 token row
  const double want = 3072 * row / (t.link_bytes_per_s() / 2) + 3 * t.interconnect_latency_us * 1e-6;
  EXPECT_NEAR(rr.dispatch_s, want, 1e-9 * want);
  EXPECT_NEAR(rr.combine_s, want, 1e-9 * want);
}

TEST(Moe, SharesAndErrors) {
  MoeOptions o;
  o.zipf_skew = 0;
  for (double p : expert_shares(o, 8)) EXPECT_NEAR(p, 0.125, 1e-12);
  o.zipf_skew = 1;
  auto z = expert_shares(o, 8);
  EXPECT_NEAR(*std::max_element(z.begin(), z.end()) / *std::min_element(z.begin(), z.end()), 8.0,
              1e-9);
  o.load = ExpertLoadKind::histogram;
  o.histogram = {1, 2, 3};
  EXPECT_THROW(expert_shares(o, 8), Error);
  testing::Built dense = testing::build_plan_graphs("llama-3-8b", "h100-sxm", {1, 64, 2});
  Lowered l = testing::lower_plan(dense, {});
  EXPECT_THROW(simulate_moe(l.prefill, l.decode, dense.target, MoeOptions{}), Error);
}

}  // namespace
}  // namespace lathe
