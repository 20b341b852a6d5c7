// Scenario options: what the serving, RAG, MoE-placement and edge simulations are
// asked to do. Plain data shared by the frontend (scenario TOML files), the simulator
// and the CLI flags, like Workload and PlanOptions in ir/plan_options.h. Times are in
// seconds unless a name says otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// A seeded distribution of positive values (token counts, latencies):
//   fixed:V          always V
//   uniform:LO,HI    uniform on [LO, HI] (integers inclusive when sampling tokens)
//   lognormal:M,S    median M, log-space standard deviation S (a long right tail)
struct Distribution {
  enum class Kind : uint8_t { fixed, uniform, lognormal };
  Kind kind = Kind::fixed;
  double a = 1, b = 0;  // fixed: a; uniform: [a, b]; lognormal: median a, sigma b
  double mean() const;
  double min() const;  // the smallest value it can produce (0 for lognormal)
};
// The most tokens a request's prompt or output may have (arrival files, scenario
// files, serve-sim flags; a draw of 1e19 wrapped to a negative count).
constexpr int64_t kMaxRequestTokens = int64_t(1) << 24;
// `hi` > 0 bounds the values (V, LO and HI, MEDIAN) at hi.
std::optional<Distribution> parse_distribution(std::string_view s, std::string* why = nullptr, double hi = 0);
// Token counts (prompt and output lengths): as above, bounded at kMaxRequestTokens, and a
// fixed value or uniform bounds whole numbers of at least 1 (fixed:0.4 ran as 1 token),
// as an arrival file's lengths are.
std::optional<Distribution> parse_token_distribution(std::string_view s, std::string* why = nullptr);
std::string distribution_name(const Distribution& d);

// ---- serving (lathe serve-sim) ----

// static:     wait for max_batch requests, run the batch to completion
// dynamic:    max_batch or batch_timeout, priority queue; run the batch to completion
// continuous: iteration-level batching (admit and retire sequences every step),
//             KV-capacity admission, preemption by recomputation
// chunked:    continuous + chunked prefill under a per-step token budget
enum class BatchingKind : uint8_t { static_batch, dynamic_batch, continuous, chunked };
std::string_view batching_name(BatchingKind k);
std::optional<BatchingKind> parse_batching(std::string_view s);

// The policy settings that one batching kind alone reads, by their scenario-file key
// (the flag is the key in kebab case with a leading --). serve-sim's flags and a scenario
// file's keys are both checked against this one table: a setting beside a policy that
// does not read it is an error.
struct PolicyOnlyKey {
  const char* key;      // "batch_timeout_ms"
  BatchingKind reader;  // the only policy that reads it
  const char* who;      // "the dynamic batcher", for messages
};
inline constexpr PolicyOnlyKey kPolicyOnlyKeys[] = {
    {"batch_timeout_ms", BatchingKind::dynamic_batch, "the dynamic batcher"},
    {"token_budget", BatchingKind::chunked, "chunked batching"},
    {"max_prefill_tokens", BatchingKind::continuous, "continuous batching"},
};

enum class RouterKind : uint8_t { round_robin, least_loaded };
std::string_view router_name(RouterKind k);
std::optional<RouterKind> parse_router(std::string_view s);

// A generated request stream: Poisson arrivals with seeded length distributions.
struct ArrivalOptions {
  double rate_per_s = 1.0;
  double duration_s = 60.0;  // arrivals in [0, duration); ignored when requests > 0
  int64_t requests = 0;      // exact count (0: as many as arrive in duration_s)
  Distribution prompt{Distribution::Kind::uniform, 128, 1024};
  Distribution output{Distribution::Kind::uniform, 32, 512};
  // Share of requests in each priority class; class 0 is the most urgent.
  std::vector<double> priority_mix = {1.0};
  uint64_t seed = 1;
};

struct ServeOptions {
  BatchingKind batching = BatchingKind::continuous;
  int64_t max_batch = 64;             // sequences per batch (running sequences, continuous)
  double batch_timeout_s = 0.020;     // dynamic: dispatch when the oldest waited this long
  int64_t token_budget = 512;         // chunked: tokens (decode + prefill chunks) per step
  int64_t max_prefill_tokens = 8192;  // continuous: prompt tokens per prefill step
  double memory_fraction = 0.90;      // of device memory for weights + KV + activations
  int64_t kv_block = 16;              // KV allocation unit in tokens (paged cache)
  int64_t replicas = 1;
  RouterKind router = RouterKind::round_robin;
  double slo_ttft_s = 0, slo_tpot_s = 0;  // 0: no SLO on that metric
};

// ---- RAG pipeline (lathe rag-sim) ----

enum class RagMode : uint8_t { sequential, overlapped, prefetch, timeout };
std::string_view rag_mode_name(RagMode m);
std::optional<RagMode> parse_rag_mode(std::string_view s);

struct RagOptions {
  std::vector<RagMode> modes = {RagMode::sequential, RagMode::overlapped, RagMode::prefetch,
                                RagMode::timeout};
  // Retrieval latency (ms) measured with `retrieval_ref_threads` CPU threads.
  Distribution retrieval_ms{Distribution::Kind::uniform, 50, 200};
  double preprocess_ms = 5.0;     // CPU: parse, rerank, truncate the retrieved chunks
  double assembly_ms = 1.0;       // CPU: build and tokenize the final prompt
  int64_t base_tokens = 256;      // the user's prompt (with the system prompt)
  int64_t context_tokens = 1024;  // retrieved context appended to it
  int64_t output_tokens = 128;
  double timeout_ms = 150;        // timeout mode: give up on retrieval after this
  double prefetch_lead_ms = 100;  // prefetch: retrieval starts this long before the request
  double prefetch_hit = 0.5;      // prefetch: share of requests whose prefetched context is used
  int64_t cpu_cores = 0;  // 0: a CPU target's own cores, 16 beside a GPU
  int64_t runtime_threads = 0;  // 0: 60% of the cores (the article's 50-70% advice)
  int64_t retrieval_ref_threads = 4;
  double retrieval_parallel_fraction =
      0.9;  // Amdahl fraction of retrieval that scales with threads
  int64_t samples = 2000;
  uint64_t seed = 1;
};

// ---- MoE expert placement (lathe moe-sim) ----

enum class ExpertLoadKind : uint8_t { uniform, zipf, histogram };
std::string_view expert_load_name(ExpertLoadKind k);

enum class PlacementKind : uint8_t { round_robin, balanced, replicated };
std::string_view placement_name(PlacementKind k);

struct MoeOptions {
  ExpertLoadKind load = ExpertLoadKind::zipf;
  double zipf_skew = 1.0;         // p(rank r) ~ 1 / r^skew
  std::vector<double> histogram;  // measured tokens per expert (load = histogram)
  int64_t gpus = 4;               // expert-parallel degree
  std::vector<int64_t> batches = {1, 64};
  int64_t context = 1024;    // decode context of every sequence
  int64_t prompt = 0;        // > 0: a prefill pass of this many tokens per sequence
  int64_t hot_replicas = -1;  // replicated: experts copied to a second GPU (-1: gpus / 2; 0: none)
  int64_t samples = 256;     // sampled routing steps per batch size
  uint64_t seed = 1;
};

// ---- edge devices (lathe edge-sim) ----

// A figure published elsewhere (the seed article). Absent values are not supplied:
// lathe never invents them.
struct Claim {
  std::string label;  // the row it belongs to: "f16", "int8", "kv int8", "beam 2"...
  std::optional<double> ms_per_token, memory_gb, memory_saved_pct, time_saved_pct;
  std::string source;  // where the figure comes from
};

struct EdgeOptions {
  std::vector<std::string> weights = {"f16", "int8", "int4:g128"};
  int64_t prompt = 512, gen = 128;
  double os_reserve_gb = 8.0;        // unified memory kept for the OS and the CPU side
  double cpu_bandwidth_share = 0.0;  // share of memory bandwidth the CPU side uses meanwhile
  std::vector<std::string> kv_dtypes = {"f16", "int8", "int4"};
  int64_t kv_context = 4096;  // context for the KV-compression comparison
  std::vector<int64_t> beams = {1, 2, 3, 4};
  std::vector<Claim> claims;
};

}  // namespace lathe
