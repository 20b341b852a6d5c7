// lathe rag-sim: latency of a retrieval-augmented request in four pipeline modes,
// and how the split of CPU cores between the runtime and retrieval moves it.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "cli/scenario_args.h"
#include "ir/assert.h"
#include "simulator/rag.h"

namespace lathe::cli {

namespace {

struct RagArgs {
  ScenarioArgs common;
  std::optional<std::string> modes, retrieval_ms;
  std::optional<double> preprocess_ms, assembly_ms, timeout_ms, prefetch_lead_ms, prefetch_hit,
      parallel_fraction;
  std::optional<int64_t> base_tokens, context_tokens, output_tokens, cpu_cores, runtime_threads,
      ref_threads, samples;
  std::optional<uint64_t> seed;
  bool allow_oom = false;
};

void apply_flags(const RagArgs& a, RagOptions& o) {
  if (a.modes) {
    o.modes.clear();
    std::vector<std::string> items = split_commas(*a.modes, "--modes");
    for (const std::string& m : items) {
      auto k = parse_rag_mode(m);
      if (!k)
        throw Error("--modes: unknown mode '" + m +
                    "' (expected sequential, overlapped, prefetch, timeout)");
      o.modes.push_back(*k);
    }
    if (o.modes.empty()) throw Error("--modes: empty list");
    refuse_repeats(items, items, "--modes");
  }
  if (a.retrieval_ms) {
    std::string why;
    auto d = parse_distribution(*a.retrieval_ms, &why, 1e7);  // ms, as the other ms flags
    if (!d) throw Error("--retrieval-ms: " + why);
    o.retrieval_ms = *d;
  }
  if (a.preprocess_ms) o.preprocess_ms = *a.preprocess_ms;
  if (a.assembly_ms) o.assembly_ms = *a.assembly_ms;
  // A flag only a mode that does not run reads is refused (it was accepted and changed
  // nothing), as serve-sim refuses another policy's flags.
  auto runs = [&](RagMode m) { return std::find(o.modes.begin(), o.modes.end(), m) != o.modes.end(); };
  auto only = [&](bool given, const char* flag, RagMode m) {
    if (given && !runs(m))
      throw Error(std::string(flag) + ": only the " + std::string(rag_mode_name(m)) +
                  " mode reads it, and --modes leaves it out; drop it or add the mode");
  };
  only(bool(a.timeout_ms), "--timeout-ms", RagMode::timeout);
  only(bool(a.prefetch_lead_ms), "--prefetch-lead-ms", RagMode::prefetch);
  only(bool(a.prefetch_hit), "--prefetch-hit", RagMode::prefetch);
  if (a.timeout_ms) o.timeout_ms = *a.timeout_ms;
  if (a.prefetch_lead_ms) o.prefetch_lead_ms = *a.prefetch_lead_ms;
  if (a.prefetch_hit) o.prefetch_hit = *a.prefetch_hit;
  if (a.parallel_fraction) o.retrieval_parallel_fraction = *a.parallel_fraction;
  if (a.base_tokens) o.base_tokens = *a.base_tokens;
  if (a.context_tokens) o.context_tokens = *a.context_tokens;
  if (a.output_tokens) o.output_tokens = *a.output_tokens;
  if (a.cpu_cores) o.cpu_cores = *a.cpu_cores;
  if (a.runtime_threads) o.runtime_threads = *a.runtime_threads;
  if (a.ref_threads) o.retrieval_ref_threads = *a.ref_threads;
  if (a.samples) o.samples = *a.samples;
  if (a.seed) o.seed = *a.seed;
}

std::string mode_note(const RagModeResult& m, const RagOptions& o) {
  switch (m.mode) {
    case RagMode::sequential:
      return "";
    case RagMode::overlapped:
      return "base prefill abandoned for " + fmt_double(100 * m.abandoned_share, 1) + "%";
    case RagMode::prefetch:
      return "prefetched " + fmt_double(o.prefetch_lead_ms, 0) + " ms ahead, used by " +
             fmt_double(100 * m.prefetch_used_share, 1) + "%";
    case RagMode::timeout:
      return "timeout " + fmt_double(o.timeout_ms, 0) +
             " ms: " + fmt_double(100 * m.fallback_share, 1) + "% answered without context";
  }
  return "";
}

nlohmann::json pct(const Percentiles& p) {
  return {{"mean_ms", p.mean * 1e3},
          {"p50_ms", p.p50 * 1e3},
          {"p90_ms", p.p90 * 1e3},
          {"p99_ms", p.p99 * 1e3},
          {"max_ms", p.max * 1e3}};
}

int run_rag(const RagArgs& a) {
  PlanRequest req;
  ScenarioSpec s = a.common.resolve(ScenarioKind::rag, Workload{1, 512, 128}, req);
  apply_flags(a, s.rag);
  RagOptions& o = s.rag;
  req.workload = Workload{1, o.base_tokens + o.context_tokens, o.output_tokens};
  Planned p = make_plan(req, {}, false);
  for (const std::string& w : check_workload(p.model, p.workload)) std::cerr << "lathe: warning: " << w << "\n";
  // One request: base prompt + retrieved context + output tokens at batch 1.
  if (!p.sim.mem.fits && !a.allow_oom) throw Error(oom_message(p) + " (--allow-oom prints the figures anyway)");
  RagResult r = simulate_rag(p.lowered.prefill, p.lowered.decode, p.target, o, a.common.ideal);
  const RagModeResult* seq = nullptr;
  for (const RagModeResult& m : r.modes)
    if (m.mode == RagMode::sequential) seq = &m;
  if (a.common.format == "json") {
    nlohmann::json j = {{"model", p.model.name},
                        {"hardware", p.target.name},
                        {"plan", describe_options(p)},
                        {"scenario", s.name},
                        {"cores", r.cores},
                        {"runtime_threads", r.runtime_threads},
                        {"retrieval_threads", r.retrieval_threads},
                        {"retrieval_scale", r.retrieval_scale},
                        {"base_prefill_ms", r.base_prefill_s * 1e3},
                        {"appended_prefill_ms", r.appended_prefill_s * 1e3},
                        {"full_prefill_ms", r.full_prefill_s * 1e3},
                        {"decode_ms", r.decode_s * 1e3},
                        {"memory_bytes", p.sim.mem.total},
                        {"capacity_bytes", p.sim.mem.capacity},
                        {"fits", p.sim.mem.fits},
                        {"samples", o.samples},
                        {"ideal", a.common.ideal},
                        {"request",
                         {{"base_tokens", o.base_tokens},
                          {"context_tokens", o.context_tokens},
                          {"output_tokens", o.output_tokens},
                          {"seed", o.seed}}},
                        {"cpu",
                         {{"retrieval_ms", distribution_json(o.retrieval_ms)},
                          {"retrieval_ref_threads", o.retrieval_ref_threads},
                          {"retrieval_parallel_fraction", o.retrieval_parallel_fraction},
                          {"preprocess_ms", o.preprocess_ms},
                          {"assembly_ms", o.assembly_ms},
                          {"timeout_ms", o.timeout_ms},
                          {"prefetch_lead_ms", o.prefetch_lead_ms},
                          {"prefetch_hit", o.prefetch_hit}}}};
    for (const RagModeResult& m : r.modes)
      j["modes"].push_back({{"mode", std::string(rag_mode_name(m.mode))},
                            {"ttft", pct(m.ttft)},
                            {"e2e", pct(m.e2e)},
                            {"fallback_share", m.fallback_share},
                            {"abandoned_share", m.abandoned_share},
                            {"prefetch_used_share", m.prefetch_used_share}});
    for (const RagThreadRow& t : r.threads)
      j["threads"].push_back({{"runtime_threads", t.runtime_threads},
                              {"retrieval_threads", t.retrieval_threads},
                              {"advised", t.advised},
                              {"retrieval_p50_ms", t.retrieval_p50_s * 1e3},
                              {"sequential_e2e_p50_ms", t.sequential_e2e_p50_s * 1e3},
                              {"overlapped_e2e_p50_ms", t.overlapped_e2e_p50_s * 1e3}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  double share = double(r.runtime_threads) / double(r.cores);
  std::cout << "lathe rag-sim: " << p.model.name << " on " << describe_target(p.target)
            << (s.name.empty() ? "" : "; scenario " + s.name) << "\n";
  std::cout << "  plan       " << describe_options(p) << "\n";
  std::cout << "  memory     " << fmt_double(p.sim.mem.total / 1e9, 2) << " of " << fmt_double(p.sim.mem.capacity / 1e9, 1)
            << " GB for the request" << (p.sim.mem.fits ? "" : ": DOES NOT FIT") << "\n";
  std::cout << "  request    base prompt " << o.base_tokens << " + retrieved context "
            << o.context_tokens << " tokens, " << o.output_tokens << " output tokens; "
            << with_commas(o.samples) << " draws, seed " << o.seed << "\n";
  std::cout << "  CPU side   retrieval " << distribution_name(o.retrieval_ms) << " ms at "
            << o.retrieval_ref_threads << " threads, preprocess " << fmt_double(o.preprocess_ms, 1)
            << " ms, assembly " << fmt_double(o.assembly_ms, 1) << " ms\n";
  std::cout << "  threads    " << r.cores << " cores: runtime " << r.runtime_threads << " ("
            << fmt_double(100 * share, 0) << "%, "
            << (share >= 0.5 && share <= 0.7 ? "within" : "outside")
            << " the article's advised 50-70%), retrieval " << r.retrieval_threads << " (latency x"
            << fmt_double(r.retrieval_scale, 2) << ")\n";
  std::cout << "  model      prefill base " << ms_text(r.base_prefill_s) << " ms, appended context "
            << ms_text(r.appended_prefill_s) << " ms, both at once " << ms_text(r.full_prefill_s)
            << " ms; decode " << o.output_tokens - 1 << " steps " << ms_text(r.decode_s)
            << " ms\n\n";
  Table t(
      {"mode", "TTFT p50", "p90", "p99", "E2E p50", "p90", "p99", "mean vs sequential", "note"});
  for (const RagModeResult& m : r.modes) {
    std::string vs =
        seq && m.mode != RagMode::sequential
            ? (m.e2e.mean <= seq->e2e.mean ? "-" : "+") +
                  fmt_double(100 * std::fabs(m.e2e.mean - seq->e2e.mean) / seq->e2e.mean, 1) + "%"
            : "";
    t.add({std::string(rag_mode_name(m.mode)), ms_text(m.ttft.p50), ms_text(m.ttft.p90),
           ms_text(m.ttft.p99), ms_text(m.e2e.p50), ms_text(m.e2e.p90), ms_text(m.e2e.p99), vs,
           mode_note(m, o)});
  }
  std::cout << "  latency (ms, one request at a time)\n" << t.text("  ") << "\n";
  Table th({"runtime threads", "retrieval threads", "share", "advised", "retrieval p50 ms",
            "sequential E2E p50", "overlapped E2E p50"});
  for (const RagThreadRow& row : r.threads)
    th.add({std::to_string(row.runtime_threads), std::to_string(row.retrieval_threads),
            fmt_double(100.0 * double(row.runtime_threads) / double(r.cores), 0) + "%",
            row.advised ? "yes" : "", ms_text(row.retrieval_p50_s),
            ms_text(row.sequential_e2e_p50_s), ms_text(row.overlapped_e2e_p50_s)});
  std::cout << "  CPU cores split between the runtime and retrieval"
            << (p.target.is_gpu()
                    ? " (the model runs on the GPU: only retrieval changes)"
                    : " (CPU target: the model's compute peak scales with its threads)")
            << "\n"
            << th.text("  ");
  return 0;
}

}  // namespace

void register_rag(CLI::App& app, Registry& r) {
  auto a = std::make_shared<RagArgs>();
  CLI::App* cmd = app.add_subcommand(
      "rag-sim", "Simulate a RAG request: CPU retrieval + accelerator generation");
  a->common.add_to(cmd, {"text", "json"});
  cmd->add_option("--modes", a->modes,
                  "comma list of sequential, overlapped, prefetch, timeout (all)");
  cmd->add_option("--retrieval-ms", a->retrieval_ms,
                  "retrieval latency distribution in ms (uniform:50,200)");
  cmd->add_option("--preprocess-ms", a->preprocess_ms,
                  "CPU preprocessing of the retrieved chunks (5)")
      ->check(number_in(0.0, 1e7));
  cmd->add_option("--assembly-ms", a->assembly_ms, "prompt assembly and tokenization (1)")
      ->check(number_in(0.0, 1e7));
  cmd->add_option("--base-tokens", a->base_tokens, "the user's prompt tokens (256)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--context-tokens", a->context_tokens, "retrieved context tokens (1024)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  cmd->add_option("--output-tokens", a->output_tokens, "generated tokens (128)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--timeout-ms", a->timeout_ms, "timeout mode: retrieval deadline (150)")
      ->check(number_in(0.0, 1e7));
  cmd->add_option("--prefetch-lead-ms", a->prefetch_lead_ms,
                  "prefetch: retrieval starts this early (100)")
      ->check(number_in(0.0, 1e7));
  cmd->add_option("--prefetch-hit", a->prefetch_hit,
                  "prefetch: share of requests whose prefetch is usable (0.5)")
      ->check(number_in(0.0, 1.0));
  cmd->add_option("--cpu-cores", a->cpu_cores, "host CPU cores beside a GPU target (16); on a CPU target, its own cores")
      ->check(CLI::Range(int64_t(2), int64_t(4096)));
  cmd->add_option("--runtime-threads", a->runtime_threads,
                  "threads the inference runtime uses (60% of the cores)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--retrieval-ref-threads", a->ref_threads,
                  "threads the retrieval latency was measured with (4)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--parallel-fraction", a->parallel_fraction,
                  "Amdahl fraction of retrieval that scales with threads (0.9)")
      ->check(number_in(0.0, 1.0));
  cmd->add_option("--samples", a->samples, "requests drawn (2000)")
      ->check(CLI::Range(int64_t(1), int64_t(10000000)));
  cmd->add_option("--seed", a->seed, "seed of the draws (1)")->check(non_negative_integer());
  cmd->add_flag("--allow-oom", a->allow_oom, "print the figures even when the request does not fit in memory");
  cmd->callback([&r, a] { r.action = [a] { return run_rag(*a); }; });
}

}  // namespace lathe::cli
