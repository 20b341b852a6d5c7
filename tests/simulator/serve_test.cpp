#include "simulator/serve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "ir/assert.h"

#include "simulator/prepared.h"
#include "simulator/random.h"
#include "simulator/simulate.h"
#include "simulator/step_cost.h"
#include "support/plans.h"

namespace lathe {
namespace {

struct Plan {
  testing::Built built;
  Lowered lowered;
};

const Plan& llama_h100() {
  static const Plan p = [] {
    Plan x;
    x.built = testing::build_plan_graphs("llama-3-8b", "h100-sxm", {16, 512, 128});
    x.lowered = testing::lower_plan(x.built, {});
    return x;
  }();
  return p;
}

ServeResult serve(std::vector<Request> reqs, const ServeOptions& o) {
  const Plan& p = llama_h100();
  return simulate_serving(p.lowered.prefill, p.lowered.decode, p.built.target, std::move(reqs), o);
}

ArrivalOptions stream(double rate, int64_t n, uint64_t seed, std::vector<double> mix = {1.0}) {
  ArrivalOptions a;
  a.rate_per_s = rate;
  a.requests = n;
  a.seed = seed;
  a.priority_mix = std::move(mix);
  return a;
}

const BatchingKind kAll[] = {BatchingKind::static_batch, BatchingKind::dynamic_batch,
                             BatchingKind::continuous, BatchingKind::chunked};

// A pure decode step, or one prefill, costs what the graph's kernels cost at those
// bindings; a mixed step reads the weights once, so it is cheaper than the two
// steps apart but dearer than either.
TEST(StepCost, PureStepsEqualTheGraphAndMixedStepsShareWeights) {
  const Plan& p = llama_h100();
  const Target& t = p.built.target;
  StepCoster c(p.lowered.prefill, p.lowered.decode, t);
  auto graph_cost = [&](const Graph& g, Bindings b) {
    double s = 0;
    for (NodeId id : g.topo_order()) s += cost_node(g, g.node(id), t, b).time_s;
    return s;
  };
  for (int64_t n : {1, 7, 64})
    for (int64_t ctx : {100, 2049})
      EXPECT_NEAR(c.decode_s(n, ctx), graph_cost(p.lowered.decode, {n, 1, ctx}), 1e-12)
          << n << " " << ctx;
  for (int64_t k : {1, 3})
    for (int64_t prompt : {17, 512, 3000})
      EXPECT_NEAR(c.prefill_s(k, prompt), graph_cost(p.lowered.prefill, {k, prompt, prompt}),
                  1e-12);
  StepShape mixed;
  mixed.decode_seqs = 32;
  mixed.decode_context_sum = 32 * 1000;
  mixed.chunks.push_back({256, 256, 1});
  double both = c.step_s(mixed), apart = c.decode_s(32, 1000) + c.prefill_s(1, 256);
  EXPECT_LT(both, apart);
  EXPECT_GT(both, std::max(c.decode_s(32, 1000), c.prefill_s(1, 256)));
  EXPECT_GT(c.cache_entries(), 0);
}

// With no load, a request sees exactly the single-request latency that simulate()
// predicts for its shape: TTFT to rounding, E2E within simulate()'s own Simpson sum.
TEST(Serve, ZeroLoadGivesTheSingleRequestLatency) {
  const Plan& p = llama_h100();
  const std::pair<int64_t, int64_t> shapes[] = {{512, 128}, {2000, 33}, {64, 1}, {1500, 300}};
  for (BatchingKind k : kAll) {
    std::vector<Request> reqs;
    double t = 0.5;
    for (auto [prompt, out] : shapes) {
      reqs.push_back({t, prompt, out, 0});
      t += 1000;  // far apart: each runs alone
    }
    ServeOptions o;
    o.batching = k;
    o.batch_timeout_s = 0;
    o.token_budget = 4096;
    ServeResult r = serve(reqs, o);
    for (size_t i = 0; i < reqs.size(); ++i) {
      SimResult s = simulate(p.lowered.prefill, p.lowered.decode, p.built.target,
                             {1, reqs[i].prompt, reqs[i].output});
      const RequestRecord& rec = r.records[i];
      double ttft = rec.first_token_s - reqs[i].arrival_s, e2e = rec.finish_s - reqs[i].arrival_s;
      std::string what = std::string(batching_name(k)) + " request " + std::to_string(i);
      // Static batching waits for the stream to end before it flushes a partial batch.
      if (k == BatchingKind::static_batch) continue;
      EXPECT_NEAR(ttft, s.ttft_s, 1e-9 * s.ttft_s) << what;
      EXPECT_NEAR(e2e, s.e2e_s, 1e-5 * s.e2e_s) << what;
      EXPECT_EQ(rec.queued_s, 0.0) << what;
    }
  }
  // Static batching with the whole stream in one request: no wait, same figures.
  ServeOptions o;
  o.batching = BatchingKind::static_batch;
  ServeResult r = serve({{0.0, 700, 50, 0}}, o);
  SimResult s = simulate(p.lowered.prefill, p.lowered.decode, p.built.target, {1, 700, 50});
  EXPECT_NEAR(r.records[0].first_token_s, s.ttft_s, 1e-9 * s.ttft_s);
  EXPECT_NEAR(r.records[0].finish_s, s.e2e_s, 1e-5 * s.e2e_s);
}

// A static batcher forms its batch once the waiting requests fill the KV cache, not
// only at max_batch: with room for 6 and --max-batch 12, the first request waited for
// the twelfth arrival (11 s at one a second) while the GPU sat idle.
TEST(Serve, StaticBatchStartsWhenTheCacheIsFull) {
  ServeOptions o;
  o.batching = BatchingKind::static_batch;
  o.max_batch = 12;
  std::vector<Request> reqs;
  for (int i = 0; i < 30; ++i) reqs.push_back({double(i), 30000, 10, 0});
  ServeResult r = serve(reqs, o);
  const int64_t per_request = (30010 + o.kv_block - 1) / o.kv_block * o.kv_block;
  const int64_t fit = r.kv_capacity_tokens / per_request;  // the cache's room, in requests
  ASSERT_GE(fit, 2);
  ASSERT_LT(fit, 12);
  EXPECT_DOUBLE_EQ(r.records[0].dispatch_s, double(fit - 1));  // when the fit-th arrives
  EXPECT_DOUBLE_EQ(r.records[size_t(fit - 1)].dispatch_s, double(fit - 1));
  EXPECT_GT(r.records[size_t(fit)].dispatch_s, double(fit - 1));
  EXPECT_EQ(r.running.peak(), double(fit));
  // With room to spare, max_batch requests waiting form the batch at once (the fourth
  // arrival here), not a request later.
  o.max_batch = 4;
  std::vector<Request> small;
  for (int i = 0; i < 8; ++i) small.push_back({double(i), 100, 10, 0});
  ServeResult s = serve(small, o);
  EXPECT_DOUBLE_EQ(s.records[0].dispatch_s, 3.0);
  EXPECT_DOUBLE_EQ(s.records[3].dispatch_s, 3.0);
  EXPECT_DOUBLE_EQ(s.records[4].dispatch_s, 7.0);
}

// Little's law. Exactly, with the measured arrival rate: the time integral of the
// number in the system (kept by the event loop) equals the sum of the times requests
// spent in it (kept per request); the same for the waiting queue. Approximately, with
// the nominal Poisson rate, for a long stable run.
TEST(Serve, LittlesLawHolds) {
  for (BatchingKind k : kAll) {
    ServeOptions o;
    o.batching = k;
    o.max_batch = 32;
    ServeResult r = serve(generate_requests(stream(6.0, 3000, 7, {0.3, 0.7})), o);
    std::string what(batching_name(k));
    EXPECT_NEAR(r.little_L, r.little_lambda_W, 1e-9 * r.little_L) << what;
    EXPECT_NEAR(r.little_Lq, r.little_lambda_Wq, 1e-9 * r.little_L) << what;
    double sum_w = 0, sum_q = 0;
    for (size_t i = 0; i < r.requests.size(); ++i) {
      sum_w += r.records[i].finish_s - r.requests[i].arrival_s;
      sum_q += r.records[i].queued_s;
    }
    EXPECT_NEAR(r.in_system.integral(), sum_w, 1e-9 * sum_w) << what;
    EXPECT_NEAR(r.queue.integral(), sum_q, 1e-9 * sum_w) << what;
    EXPECT_GT(r.little_L, 1.0) << what;  // a loaded system, not a trivial one
  }
  ServeOptions o;
  ArrivalOptions a = stream(8.0, 20000, 3);
  ServeResult r = serve(generate_requests(a), o);
  double L = r.in_system.integral() / r.end_s;
  EXPECT_NEAR(L, a.rate_per_s * r.all.e2e.mean, 0.05 * L);
}

// Dynamic batching takes class 0 first: a more urgent request that was waiting when
// a less urgent one was dispatched went in the same batch or an earlier one. The
// same holds for admission in continuous batching.
// The time averages run from the first arrival: a trace shifted by Unix time gives the
// same queue, occupancy and Little's law figures (they were divided by the time since
// 0, about 1.7e9 s), and its buckets span the run.
TEST(Serve, TimeSeriesStartAtTheFirstArrival) {
  std::vector<Request> base = generate_requests(stream(20.0, 300, 3));
  std::vector<Request> shifted = base;
  for (Request& q : shifted) q.arrival_s += 1.7e9;
  ServeOptions o;
  ServeResult a = serve(base, o), b = serve(shifted, o);
  EXPECT_GT(a.little_L, 1.0);
  EXPECT_NEAR(b.little_L, a.little_L, 1e-3 * a.little_L);
  EXPECT_NEAR(b.queue.time_average(), a.queue.time_average(), 1e-3 * (a.queue.time_average() + 1e-9));
  EXPECT_NEAR(b.running.time_average(), a.running.time_average(), 1e-3 * a.running.time_average());
  EXPECT_EQ(b.running.origin(), shifted.front().arrival_s);
  EXPECT_LE(b.running.bucket_mean().size(), 2u * 400);
  EXPECT_GE(b.running.bucket_mean().size(), 400u);
}

// Requests that all arrive at once (an arrival span of 0) keep the series small: the
// buckets (1/400 of a millisecond then) merge as the run drains (it held 8.9 million
// buckets a series, 1.2 GB of JSON).
TEST(Serve, TimeSeriesStayBoundedForABurst) {
  std::vector<Request> burst(64);
  for (Request& q : burst) q.prompt = 500, q.output = 2000;
  ServeResult r = serve(burst, ServeOptions{});
  EXPECT_GT(r.end_s, 1.0);
  for (const TimeSeries* s : {&r.queue, &r.running, &r.kv_tokens, &r.in_system}) {
    EXPECT_LE(s->bucket_mean().size(), 2u * 400);
    EXPECT_LE(s->bucket_max().size(), 2u * 400);
    double area = 0;
    for (double m : s->bucket_mean()) area += m * s->dt();
    // The buckets still hold the whole integral (the last one may be partial).
    EXPECT_NEAR(area, s->integral(), 0.01 * s->integral() + s->peak() * s->dt());
  }
  EXPECT_NEAR(r.little_L, r.little_lambda_W, 1e-9 * r.little_L);
}

// A segment that starts on a bucket edge the division rounds down to the bucket before
// went whole into that bucket: `serve-sim --batching static` showed a running mean of
// 95.27 beside a bucket max of 64 (and a KV occupancy of 134%). Each bucket's mean lies
// within [0, its max] and the buckets hold the integral.
TEST(Serve, TimeSeriesBucketsKeepTheirEdges) {
  for (double origin : {0.0, 0.3, 1.7e9}) {
    TimeSeries s(origin, 0.1);  // unbounded: merged buckets would hide a misplaced segment
    double t = origin;
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 5000; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      // Steps of whole and fractional buckets, so segments start and end on edges.
      t += (x % 3 == 0) ? 0.1 : (x % 3 == 1) ? 0.3 : 0.05 * double(x % 7);
      s.set(t, double(x % 64));
    }
    s.finish(t + 0.1);
    ASSERT_EQ(s.bucket_mean().size(), s.bucket_max().size());
    double area = 0;
    for (size_t i = 0; i < s.bucket_mean().size(); ++i) {
      EXPECT_GE(s.bucket_mean()[i], 0.0) << i;
      // Times near 1.7e9 s are exact to 2.4e-7 s: a 0.1 s bucket's width to 2.4e-6.
      EXPECT_LE(s.bucket_mean()[i], s.bucket_max()[i] * (1 + 1e-5) + 1e-9) << "origin " << origin << " bucket " << i;
      area += s.bucket_mean()[i] * s.dt();
    }
    EXPECT_NEAR(area, s.integral(), 1e-6 * s.integral() + s.peak() * s.dt());
  }
}

// Activations are sized from the steps a policy runs, which matters once attention
// materializes its scores (no fusion: they grow with the square of a sequence's
// length). A padded batch of 8 x 1024 tokens is what `simulate --batch 8` sizes, not
// one 8192-token sequence (eight times the scores: the run was refused as needing
// 1.1 TB); packed whole prompts are bounded without that square; a chunk of
// token_budget tokens at the longest context is covered.
TEST(Serve, ActivationsComeFromTheStepsThePolicyRuns) {
  static const Plan p = [] {
    Plan x;
    x.built = testing::build_plan_graphs("llama-3-8b", "h100-sxm", {8, 1024, 16});
    x.lowered = testing::lower_plan(x.built, testing::no_passes());
    return x;
  }();
  const Graph &pre = p.lowered.prefill, &dec = p.lowered.decode;
  std::vector<Request> reqs(4);
  for (Request& q : reqs) q.prompt = 1024, q.output = 16;
  ServeOptions o;
  o.max_batch = 8;
  o.batching = BatchingKind::static_batch;
  double padded = PreparedPlan(pre, dec).activation_bytes({8, 1024, 16});
  EXPECT_NEAR(serve_activation_bytes(pre, dec, o, reqs), padded, 1e-3 * padded);
  // Continuous: 8192 prompt tokens a step, at most 8 sequences of 1040 (a recompute
  // of prompt + output): the bound lies between 7 such sequences and the old figure.
  o.batching = BatchingKind::continuous;
  double packed = serve_activation_bytes(pre, dec, o, reqs);
  EXPECT_GE(packed, peak_live_bytes(pre, {7, 1040, 1040}));
  EXPECT_LE(packed, peak_live_bytes(pre, {8, 1040, 1040}));
  EXPECT_LT(packed, 0.2 * peak_live_bytes(pre, {1, 8192, 8192}));
  // Chunked: a 512-token chunk at context 1040 (what the old {1, 512, 512} missed).
  o.batching = BatchingKind::chunked;
  EXPECT_GE(serve_activation_bytes(pre, dec, o, reqs), peak_live_bytes(pre, {1, 512, 1040}));
  EXPECT_GT(peak_live_bytes(pre, {1, 512, 1040}), 1.5 * peak_live_bytes(pre, {1, 512, 512}));
  // Decode at the longest context, for every policy.
  EXPECT_GE(serve_activation_bytes(pre, dec, o, reqs), peak_live_bytes(dec, {8, 1, 1040}));
  // The run that was refused now fits, with the padded batch's activations.
  o.batching = BatchingKind::static_batch;
  ServeResult r = simulate_serving(pre, dec, p.built.target, reqs, o);
  EXPECT_NEAR(r.activation_bytes, padded, 1e-3 * padded);
}

// A request that arrives to an idle replica is dispatched at the same instant: the
// queue never holds it for any time, so its peak stays 0 (it said 1).
TEST(Serve, QueuePeakIgnoresInstantaneousWaits) {
  std::vector<Request> reqs(2);
  reqs[1].arrival_s = 10.0;
  for (BatchingKind b : {BatchingKind::continuous, BatchingKind::chunked}) {
    ServeOptions o;
    o.batching = b;
    ServeResult r = serve(reqs, o);
    EXPECT_EQ(r.queue.peak(), 0.0);
    for (double m : r.queue.bucket_max()) EXPECT_EQ(m, 0.0);
    EXPECT_GT(r.running.peak(), 0.0);
  }
  // Two requests at once on a batch of one: the second waits a whole step.
  std::vector<Request> two(2);
  ServeOptions one;
  one.max_batch = 1;
  ServeResult r = serve(two, one);
  EXPECT_EQ(r.queue.peak(), 1.0);
}

// Integers over spans wider than a double's 53 bits (sweeps of 2^58 points sampled
// with --samples) reach every value: scaling a 53-bit uniform reached one in 32 of
// them, all multiples of 32 from the low end (68% of 2000 draws; no odd one).
TEST(Random, WideSpansReachEveryValue) {
  Random rng(5);
  const int64_t hi = (int64_t(1) << 58) - 1;
  int odd = 0, residues[32] = {};
  for (int i = 0; i < 4000; ++i) {
    int64_t x = rng.integer(0, hi);
    ASSERT_GE(x, 0);
    ASSERT_LE(x, hi);
    odd += int(x & 1);
    ++residues[x & 31];
  }
  EXPECT_GT(odd, 1800);
  EXPECT_LT(odd, 2200);
  for (int r : residues) EXPECT_GT(r, 70);  // 125 expected each
  // The whole int64 range, and spans at the 53-bit boundary, stay in range.
  for (int i = 0; i < 1000; ++i) {
    int64_t x = rng.integer(INT64_MIN, INT64_MAX);
    (void)x;
    int64_t y = rng.integer(-5, (int64_t(1) << 53) - 6);
    ASSERT_GE(y, -5);
    ASSERT_LE(y, (int64_t(1) << 53) - 6);
    int64_t z = rng.integer(INT64_MAX - 3, INT64_MAX);
    ASSERT_GE(z, INT64_MAX - 3);
  }
}

// A dynamic batcher cannot know that the stream has ended: the last requests wait for
// the timeout as any others would. A static batcher takes what is left at the end (or
// it would wait forever).
TEST(Serve, DynamicBatcherWaitsForItsTimeoutAtTheEndOfTheStream) {
  std::vector<Request> reqs(3);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].arrival_s = 0.01 * double(i), reqs[i].prompt = 64, reqs[i].output = 4;
  ServeOptions o;
  o.max_batch = 8;
  o.batch_timeout_s = 0.05;
  o.batching = BatchingKind::dynamic_batch;
  ServeResult d = serve(reqs, o);
  for (const RequestRecord& rec : d.records) EXPECT_DOUBLE_EQ(rec.dispatch_s, 0.05);  // the oldest's timeout
  o.batching = BatchingKind::static_batch;
  ServeResult s = serve(reqs, o);
  for (const RequestRecord& rec : s.records) EXPECT_DOUBLE_EQ(rec.dispatch_s, 0.02);  // the last arrival
}

TEST(Serve, UrgentRequestsNeverWaitBehindLessUrgentOnes) {
  for (BatchingKind k : {BatchingKind::dynamic_batch, BatchingKind::continuous}) {
    ServeOptions o;
    o.batching = k;
    o.max_batch = 8;
    o.batch_timeout_s = 0.05;
    // Overloaded so that queues form and the order matters.
    ServeResult r = serve(generate_requests(stream(12.0, 1500, 11, {0.2, 0.3, 0.5})), o);
    int64_t checked = 0, inversions = 0;
    for (size_t a = 0; a < r.requests.size(); ++a)
      for (size_t b = 0; b < r.requests.size(); ++b) {
        if (r.requests[a].priority >= r.requests[b].priority) continue;
        if (r.requests[a].arrival_s > r.records[b].dispatch_s) continue;  // a was not waiting yet
        ++checked;
        if (r.records[a].dispatch_s > r.records[b].dispatch_s) ++inversions;
      }
    EXPECT_GT(checked, 10000) << batching_name(k);
    EXPECT_EQ(inversions, 0) << batching_name(k);
    ASSERT_EQ(r.classes.size(), 3u);
    EXPECT_LT(r.classes[0].queue.mean, r.classes[2].queue.mean) << batching_name(k);
  }
}

// Continuous batching admits and retires every step; request-level batching pads and
// waits for the longest member. At the same load it is faster.
TEST(Serve, ContinuousBatchingBeatsStaticBatching) {
  auto reqs = generate_requests(stream(8.0, 2000, 5));
  ServeOptions st, cont;
  st.batching = BatchingKind::static_batch;
  ServeResult a = serve(reqs, st), b = serve(reqs, cont);
  EXPECT_LT(b.all.e2e.p50, a.all.e2e.p50);
  EXPECT_LT(b.all.ttft.p90, a.all.ttft.p90);
  EXPECT_GE(b.requests_per_s, a.requests_per_s * 0.999);
}

// When the KV cache runs short, sequences are preempted and recomputed; every request
// still finishes with all its tokens, and occupancy never exceeds the capacity.
TEST(Serve, KvPressurePreemptsAndEveryRequestFinishes) {
  for (BatchingKind k : {BatchingKind::continuous, BatchingKind::chunked}) {
    ServeOptions o;
    o.batching = k;
    o.max_batch = 256;
    o.token_budget = 1024;
    o.memory_fraction = 0.215;  // about 1,300 tokens of KV left after the weights
    ArrivalOptions a = stream(50.0, 400, 2);
    a.prompt = {Distribution::Kind::uniform, 100, 400};
    a.output = {Distribution::Kind::uniform, 100, 600};
    ServeResult r = serve(generate_requests(a), o);
    EXPECT_GT(r.preemptions, 0) << batching_name(k);
    EXPECT_LE(r.kv_tokens.peak(), double(r.kv_capacity_tokens)) << batching_name(k);
    for (size_t i = 0; i < r.requests.size(); ++i) {
      EXPECT_GT(r.records[i].finish_s, r.records[i].first_token_s - 1e-12);
      EXPECT_GE(r.records[i].first_token_s, r.requests[i].arrival_s);
    }
  }
}

TEST(Serve, RequestsLargerThanTheKvCacheAreRejected) {
  ServeOptions o;
  o.memory_fraction = 0.21;
  EXPECT_THROW(serve({{0.0, 100000, 10, 0}}, o), Error);
}

TEST(Serve, RoundRobinAlternatesAndLeastLoadedBalances) {
  auto reqs = generate_requests(stream(20.0, 400, 9));
  ServeOptions o;
  o.replicas = 3;
  ServeResult r = serve(reqs, o);
  for (size_t i = 0; i < r.records.size(); ++i) EXPECT_EQ(r.records[i].replica, int(i % 3));
  o.router = RouterKind::least_loaded;
  ServeResult l = serve(reqs, o);
  int count[3] = {0, 0, 0};
  for (const RequestRecord& rec : l.records) ++count[rec.replica];
  for (int c : count) EXPECT_GT(c, 100);
  EXPECT_LE(l.all.e2e.mean, r.all.e2e.mean * 1.05);
}

TEST(Requests, PoissonStreamIsSeededAndHasTheRate) {
  ArrivalOptions a = stream(5.0, 0, 42);
  a.duration_s = 2000;
  auto x = generate_requests(a), y = generate_requests(a);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].arrival_s, y[i].arrival_s);
  double n = double(x.size()), expected = a.rate_per_s * a.duration_s;
  EXPECT_NEAR(n, expected, 4 * std::sqrt(expected));
  a.seed = 43;
  EXPECT_NE(generate_requests(a)[0].arrival_s, x[0].arrival_s);
  // A stream larger than one run simulates is an error before anything is generated
  // (it ran out of memory instead).
  a.rate_per_s = 1e6;
  a.duration_s = 100;
  try {
    generate_requests(a);
    FAIL() << "1e8 requests should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than one run simulates"), std::string::npos) << e.what();
  }
  // So is a mean just under the cap, which a draw could exceed after generating
  // gigabytes of requests (within six standard deviations, sqrt(2^26) = 8192 each).
  a.rate_per_s = 1;
  a.duration_s = double(int64_t(1) << 26) - 6 * 8192 + 100;
  EXPECT_THROW(generate_requests(a), Error);
}

// A drawn length above 2^24 tokens (the CSV trace's cap) is an error; it was cast to
// int64 (1e19 became a negative count, 1e30 an internal error in step costing).
TEST(Requests, HugeDrawnLengthsAreRefused) {
  ArrivalOptions a = stream(1.0, 3, 1);
  a.prompt = *parse_distribution("fixed:100");
  a.output = *parse_distribution("fixed:1e19");
  EXPECT_THROW(generate_requests(a), Error);
  a.output = *parse_distribution("fixed:16777216");
  EXPECT_EQ(generate_requests(a)[0].output, int64_t(1) << 24);
}

TEST(Requests, TraceCsvParsesAndLocatesErrors) {
  auto r = parse_trace_csv(
      "# a trace\narrival_s,prompt_tokens,output_tokens,priority\n0.5,100,20,1\n0.25, 50 ,5\n",
      "t.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].prompt, 50);  // sorted by arrival
  EXPECT_EQ(r[1].priority, 1);
  try {
    parse_trace_csv("0.1,10,5\n0.2,x,5\n", "bad.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:2: prompt_tokens"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_trace_csv("0.1,10,0\n", "z.csv"), Error);
  EXPECT_THROW(parse_trace_csv("", "e.csv"), Error);
  // A spreadsheet's UTF-8 byte order mark before the header is not part of it.
  EXPECT_EQ(parse_trace_csv("\xEF\xBB\xBF" "arrival_s,prompt_tokens,output_tokens\n0.5,100,20\n", "bom.csv").size(), 1u);
}

// Token-count distributions are whole numbers of at least 1 (fixed:0.4 ran as 1 token).
TEST(Requests, TokenDistributionsAreWholeCounts) {
  EXPECT_TRUE(parse_token_distribution("fixed:512"));
  EXPECT_TRUE(parse_token_distribution("uniform:1,4096"));
  EXPECT_TRUE(parse_token_distribution("lognormal:300,0.8"));
  for (const char* bad : {"fixed:0.4", "fixed:1e-300", "uniform:0,10", "uniform:2,10.5", "fixed:16777217"}) {
    std::string why;
    EXPECT_FALSE(parse_token_distribution(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

}  // namespace
}  // namespace lathe
