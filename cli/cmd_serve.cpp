// lathe serve-sim: discrete-event simulation of serving a request stream with a
// batching policy, every step costed by the plan's kernels.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "cli/scenario_args.h"
#include "ir/assert.h"
#include "simulator/serve.h"
#include "simulator/serve_trace.h"

namespace lathe::cli {

namespace {

struct ServeArgs {
  ScenarioArgs common;
  std::optional<std::string> batching, router, prompt, output, priority_mix, arrivals_csv;
  std::optional<int64_t> max_batch, token_budget, max_prefill_tokens, kv_block, replicas, requests;
  std::optional<double> timeout_ms, memory_fraction, rate, duration, slo_ttft_ms, slo_tpot_ms;
  std::optional<uint64_t> seed;
  std::string trace;
};

Distribution distribution_flag(const std::string& flag, const std::string& v) {
  std::string why;
  auto d = parse_token_distribution(v, &why);
  if (!d) throw Error(flag + ": " + why);
  return *d;
}

void apply_flags(const ServeArgs& a, ScenarioSpec& s) {
  ServeOptions& o = s.serve;
  ArrivalOptions& ar = s.arrivals;
  if (a.batching) {
    auto k = parse_batching(*a.batching);
    if (!k)
      throw Error("--batching: expected static, dynamic, continuous or chunked, got '" +
                  *a.batching + "'");
    o.batching = *k;
  }
  if (a.router) {
    auto k = parse_router(*a.router);
    if (!k) throw Error("--router: expected round-robin or least-loaded, got '" + *a.router + "'");
    o.router = *k;
  }
  if (a.max_batch) o.max_batch = *a.max_batch;
  if (a.token_budget) o.token_budget = *a.token_budget;
  if (a.max_prefill_tokens) o.max_prefill_tokens = *a.max_prefill_tokens;
  if (a.kv_block) o.kv_block = *a.kv_block;
  if (a.replicas) o.replicas = *a.replicas;
  if (a.timeout_ms) o.batch_timeout_s = *a.timeout_ms * 1e-3;
  if (a.memory_fraction) o.memory_fraction = *a.memory_fraction;
  if (a.slo_ttft_ms) o.slo_ttft_s = *a.slo_ttft_ms * 1e-3;
  if (a.slo_tpot_ms) o.slo_tpot_s = *a.slo_tpot_ms * 1e-3;
  // A flag only another policy reads is refused, as the generator's flags beside a trace
  // are (--batch-timeout-ms with static batching was accepted and ignored).
  auto only = [&](bool given, const char* flag, bool applies, const std::string& who) {
    if (given && !applies)
      throw Error(std::string(flag) + ": only " + who + " reads it (batching is " +
                  std::string(batching_name(o.batching)) + ", " + std::to_string(o.replicas) + " replica" +
                  (o.replicas == 1 ? "" : "s") + "); drop it");
  };
  const std::map<std::string_view, bool> given = {{"batch_timeout_ms", bool(a.timeout_ms)},
                                                   {"token_budget", bool(a.token_budget)},
                                                   {"max_prefill_tokens", bool(a.max_prefill_tokens)}};
  for (const PolicyOnlyKey& k : kPolicyOnlyKeys) {
    std::string flag = "--" + std::string(k.key);
    std::replace(flag.begin(), flag.end(), '_', '-');
    const auto g = given.find(k.key);
    LATHE_ASSERT(g != given.end(), "serve-sim: a policy-only key without its flag");
    only(g->second, flag.c_str(), o.batching == k.reader, k.who);
  }
  only(bool(a.router), "--router", o.replicas > 1, "a run of more than one replica (--replicas)");
  if (a.duration && a.requests) throw Error("give --duration or --requests, not both");
  // A trace is the whole stream: the generator's flags would be ignored beside one, given
  // here or by the scenario file (whose generator keys --arrivals-csv replaces).
  std::string ignored;
  auto note = [&](bool given, const char* flag) {
    if (given) ignored += (ignored.empty() ? "" : ", ") + std::string(flag);
  };
  note(bool(a.rate), "--rate"), note(bool(a.duration), "--duration"), note(bool(a.requests), "--requests");
  note(bool(a.prompt), "--prompt"), note(bool(a.output), "--output"), note(bool(a.priority_mix), "--priority-mix");
  note(bool(a.seed), "--seed");
  const std::string drop = ignored.find(',') == std::string::npos ? "it" : "them";
  if (a.arrivals_csv && !ignored.empty())
    throw Error("--arrivals-csv gives every request (arrival, prompt, output, priority); " + ignored +
                " would be ignored: drop " + drop);
  if (!a.arrivals_csv && s.arrivals_csv && !ignored.empty())
    throw Error("the scenario's requests come from its csv trace (" + *s.arrivals_csv + "); " + ignored +
                " would be ignored: drop " + drop + ", or use a scenario without a trace");
  if (a.rate) ar.rate_per_s = *a.rate;
  if (a.duration) ar.duration_s = *a.duration, ar.requests = a.requests.value_or(0);
  if (a.requests) ar.requests = *a.requests;
  if (a.prompt) ar.prompt = distribution_flag("--prompt", *a.prompt);
  if (a.output) ar.output = distribution_flag("--output", *a.output);
  if (a.seed) ar.seed = *a.seed;
  if (a.priority_mix) {
    ar.priority_mix.clear();
    for (const std::string& x : split_commas(*a.priority_mix, "--priority-mix")) {
      try {
        size_t used = 0;
        double v = std::stod(x, &used);
        // Bounded as in scenario files: an infinite share (or shares whose sum overflows)
        // put every request in the last class.
        if (used != x.size() || !(v >= 0 && v <= 1e12) ||
            x.find_first_not_of("0123456789.eE+-") != std::string::npos)  // no hex, no spaces
          throw std::invalid_argument(x);
        ar.priority_mix.push_back(v);
      } catch (...) {
        throw Error("--priority-mix: '" + x + "' is not a share in [0, 1e12]");
      }
    }
    double sum = 0;
    for (double v : ar.priority_mix) sum += v;
    if (ar.priority_mix.empty() || !(sum > 0))
      throw Error("--priority-mix: give at least one positive share");
  }
  if (a.arrivals_csv) s.arrivals_csv = *a.arrivals_csv;
}

std::string stream_text(const ScenarioSpec& s, const std::vector<Request>& reqs) {
  if (s.arrivals_csv)
    return with_commas(int64_t(reqs.size())) + (reqs.size() == 1 ? " request from " : " requests from ") +
           *s.arrivals_csv;
  const ArrivalOptions& a = s.arrivals;
  std::string mix;
  double mix_sum = 0;
  for (double v : a.priority_mix) mix_sum += v;
  if (a.priority_mix.size() > 1)  // as shares of the stream
    for (size_t i = 0; i < a.priority_mix.size(); ++i)
      mix += (i ? "/" : "; priority mix ") + fmt_double(a.priority_mix[i] / mix_sum, 2);
  return with_commas(int64_t(reqs.size())) + (reqs.size() == 1 ? " request" : " requests") +
         ", Poisson " + fmt_double(a.rate_per_s, 2) + "/s" +
         (a.requests > 0 ? "" : " over " + fmt_double(a.duration_s, 0) + " s") + "; prompt " +
         distribution_name(a.prompt) + ", output " + distribution_name(a.output) + mix + "; seed " +
         std::to_string(a.seed);
}

nlohmann::json pct_json(const Percentiles& p) {
  if (p.n == 0)  // no samples (TPOT when every output is one token)
    return {{"n", 0}, {"mean_ms", nullptr}, {"p50_ms", nullptr}, {"p90_ms", nullptr},
            {"p99_ms", nullptr}, {"max_ms", nullptr}};
  return {{"n", p.n},
          {"mean_ms", p.mean * 1e3},
          {"p50_ms", p.p50 * 1e3},
          {"p90_ms", p.p90 * 1e3},
          {"p99_ms", p.p99 * 1e3},
          {"max_ms", p.max * 1e3}};
}

nlohmann::json class_json(const ClassStats& c) {
  nlohmann::json j = {{"requests", c.requests},     {"ttft", pct_json(c.ttft)},
                      {"tpot", pct_json(c.tpot)},   {"e2e", pct_json(c.e2e)},
                      {"queue", pct_json(c.queue)}, {"slo_met", c.slo_met}};
  if (c.priority >= 0) j["priority"] = c.priority;
  return j;
}

nlohmann::json series_json(const TimeSeries& s, double scale) {
  nlohmann::json mean = nlohmann::json::array(), max = nlohmann::json::array();
  for (double v : s.bucket_mean()) mean.push_back(v * scale);
  for (double v : s.bucket_max()) max.push_back(v * scale);
  return {{"start_s", s.origin()},
          {"dt_s", s.dt()},
          {"mean", mean},
          {"max", max},
          {"time_average", s.time_average() * scale},
          {"peak", s.peak() * scale}};
}

nlohmann::json result_json(const Planned& p, const ScenarioSpec& s, const ServeResult& r,
                           double wall_s, bool ideal) {
  const ServeOptions& o = s.serve;
  double cap = double(r.kv_capacity_tokens) * double(r.replicas);
  nlohmann::json j = {{"model", p.model.name},
                      {"hardware", p.target.name},
                      {"plan", describe_options(p)},
                      {"scenario", s.name},
                      {"batching", std::string(batching_name(o.batching))},
                      {"max_batch", o.max_batch},
                      {"runnable_max_batch", r.max_batch},
                      {"replicas", o.replicas},
                      {"router", std::string(router_name(o.router))},
                      {"requests", r.requests.size()},
                      {"kv_capacity_tokens", r.kv_capacity_tokens},
                      {"kv_bytes_per_token", r.kv_bytes_per_token},
                      {"weight_bytes", r.weight_bytes},
                      {"activation_bytes", r.activation_bytes},
                      {"makespan_s", r.end_s - r.start_s},
                      {"requests_per_s", r.requests_per_s},
                      {"output_tokens_per_s", r.output_tokens_per_s},
                      {"input_tokens_per_s", r.input_tokens_per_s},
                      {"goodput",
                       {{"slo_ttft_ms", o.slo_ttft_s * 1e3},
                        {"slo_tpot_ms", o.slo_tpot_s * 1e3},
                        {"requests_per_s", r.goodput_requests_per_s},
                        {"tokens_per_s", r.goodput_tokens_per_s},
                        {"fraction", r.slo_fraction}}},
                      {"all", class_json(r.all)},
                      {"steps", r.steps},
                      {"preemptions", r.preemptions},
                      {"littles_law",
                       {{"L", r.little_L},
                        {"lambda_W", r.little_lambda_W},
                        {"Lq", r.little_Lq},
                        {"lambda_Wq", r.little_lambda_Wq}}},
                      {"series",
                       {{"queue", series_json(r.queue, 1)},
                        {"running", series_json(r.running, 1)},
                        {"kv_occupancy", series_json(r.kv_tokens, cap > 0 ? 1.0 / cap : 0)},
                        {"in_system", series_json(r.in_system, 1)}}},
                      {"step_cost_entries", r.cost_entries},
                      {"kernel_evaluations", r.cost_evaluations},
                      {"wall_s", wall_s}};
  j["classes"] = nlohmann::json::array();
  for (const ClassStats& c : r.classes) j["classes"].push_back(class_json(c));
  j["ideal"] = ideal;
  // The stream and the policy as the text's "stream", "serving" and "KV cache" lines.
  if (s.arrivals_csv) {
    j["stream"] = {{"arrivals_csv", *s.arrivals_csv}};
  } else {
    const ArrivalOptions& a = s.arrivals;
    j["stream"] = {{"rate_per_s", a.rate_per_s},
                   {"duration_s", a.requests > 0 ? nlohmann::json(nullptr) : nlohmann::json(a.duration_s)},
                   {"requests", a.requests > 0 ? nlohmann::json(a.requests) : nlohmann::json(nullptr)},
                   {"prompt", distribution_json(a.prompt)},
                   {"output", distribution_json(a.output)},
                   {"priority_mix", a.priority_mix},
                   {"seed", a.seed}};
  }
  j["policy"] = {{"batch_timeout_ms", o.batch_timeout_s * 1e3},
                 {"token_budget", o.token_budget},
                 {"max_prefill_tokens", o.max_prefill_tokens},
                 {"kv_block", o.kv_block},
                 {"memory_fraction", o.memory_fraction},
                 {"capacity_bytes", p.target.capacity_bytes()}};
  return j;
}

Table request_csv(const ServeResult& r) {
  Table t({"id", "arrival_s", "priority", "prompt", "output", "replica", "queue_ms", "ttft_ms",
           "tpot_ms", "e2e_ms", "preemptions"});
  for (size_t i = 0; i < r.requests.size(); ++i) {
    const Request& q = r.requests[i];
    const RequestRecord& c = r.records[i];
    // A one-token output has no time per output token: an empty cell, as JSON's null
    // (0 would pull a column average down).
    std::string tpot =
        q.output > 1 ? fmt_double((c.finish_s - c.first_token_s) / double(q.output - 1) * 1e3, 3) : "";
    t.add({std::to_string(i), fmt_double(q.arrival_s, 6), std::to_string(q.priority),
           std::to_string(q.prompt), std::to_string(q.output), std::to_string(c.replica),
           fmt_double(c.queued_s * 1e3, 3), fmt_double((c.first_token_s - q.arrival_s) * 1e3, 3),
           tpot, fmt_double((c.finish_s - q.arrival_s) * 1e3, 3),
           std::to_string(c.preemptions)});
  }
  return t;
}

void print_text(const Planned& p, const ScenarioSpec& s, const ServeResult& r, double wall_s) {
  const ServeOptions& o = s.serve;
  std::cout << "lathe serve-sim: " << p.model.name << " on " << describe_target(p.target)
            << (s.name.empty() ? "" : "; scenario " + s.name) << "\n";
  std::cout << "  plan      " << describe_options(p) << "\n";
  std::cout << "  stream    " << stream_text(s, r.requests) << "\n";
  std::string policy = o.batching == BatchingKind::chunked
                           ? std::string("continuous batching with chunked prefill")
                           : std::string(batching_name(o.batching)) + " batching";
  policy += ", max batch " + std::to_string(o.max_batch);
  if (r.max_batch < o.max_batch)
    policy += " (" + std::to_string(r.max_batch) + " run at most: the KV cache beside more sequences' activations holds no more)";
  if (o.batching == BatchingKind::dynamic_batch)
    policy += ", timeout " + ms_text(o.batch_timeout_s) + " ms";
  if (o.batching == BatchingKind::chunked)
    policy += ", token budget " + std::to_string(o.token_budget);
  if (o.batching == BatchingKind::continuous)
    policy += ", prefill up to " + std::to_string(o.max_prefill_tokens) + " tokens";
  policy += "; " + std::to_string(o.replicas) + " replica" +
            (o.replicas > 1 ? "s (" + std::string(router_name(o.router)) + ")" : "");
  std::cout << "  serving   " << policy << "\n";
  std::cout << "  KV cache  " << with_commas(r.kv_capacity_tokens) << " tokens per replica ("
            << human_bytes(r.kv_bytes_per_token) << "/token) in "
            << fmt_double(o.memory_fraction * 100, 0) << "% of "
            << human_bytes(p.target.capacity_bytes()) << " after weights "
            << human_bytes(r.weight_bytes) << " and activations " << human_bytes(r.activation_bytes)
            << "\n\n";
  Table t({"class", "requests", "TTFT p50", "p90", "p99", "TPOT p50", "p90", "p99", "E2E p50",
           "p90", "p99", "queue p50", "p99"});
  auto row = [&](const ClassStats& c, const std::string& name) {
    // TPOT needs a second token: with none in the class there is nothing to show.
    auto tpot = [&](double v) { return c.tpot.n > 0 ? ms_text(v) : std::string("-"); };
    t.add({name, with_commas(c.requests), ms_text(c.ttft.p50), ms_text(c.ttft.p90),
           ms_text(c.ttft.p99), tpot(c.tpot.p50), tpot(c.tpot.p90), tpot(c.tpot.p99),
           ms_text(c.e2e.p50), ms_text(c.e2e.p90), ms_text(c.e2e.p99), ms_text(c.queue.p50),
           ms_text(c.queue.p99)});
  };
  row(r.all, "all");
  if (r.classes.size() > 1)
    for (const ClassStats& c : r.classes) row(c, "priority " + std::to_string(c.priority));
  std::cout << "  latency (ms)\n" << t.text("  ") << "\n";
  double cap = double(r.kv_capacity_tokens) * double(r.replicas);
  std::cout << "  throughput  " << fmt_double(r.requests_per_s, 2) << " req/s, "
            << with_commas(int64_t(std::llround(r.output_tokens_per_s))) << " output tok/s, "
            << with_commas(int64_t(std::llround(r.input_tokens_per_s))) << " prompt tok/s over "
            << fmt_double(r.end_s - r.start_s, 1) << " s\n";
  if (o.slo_ttft_s > 0 || o.slo_tpot_s > 0) {
    std::string slo;
    if (o.slo_ttft_s > 0) slo += "TTFT <= " + ms_text(o.slo_ttft_s) + " ms";
    if (o.slo_tpot_s > 0)
      slo += std::string(slo.empty() ? "" : " and ") + "TPOT <= " + ms_text(o.slo_tpot_s) + " ms";
    std::cout << "  goodput     " << fmt_double(r.goodput_requests_per_s, 2) << " req/s, "
              << with_commas(int64_t(std::llround(r.goodput_tokens_per_s))) << " tok/s ("
              << fmt_double(r.slo_fraction * 100, 1) << "% of requests meet " << slo << ")\n";
  }
  std::cout << "  queue       mean " << fmt_double(r.queue.time_average(), 2) << ", peak "
            << fmt_double(r.queue.peak(), 0) << " waiting; running mean "
            << fmt_double(r.running.time_average(), 1) << ", peak "
            << fmt_double(r.running.peak(), 0) << " sequences\n";
  std::cout << "  KV cache    mean " << fmt_double(100 * r.kv_tokens.time_average() / cap, 1)
            << "% occupied, peak " << fmt_double(100 * r.kv_tokens.peak() / cap, 1) << "%; "
            << with_commas(r.preemptions) << " preemptions\n";
  std::cout << "  Little's law  L = " << fmt_double(r.little_L, 3)
            << " in system, lambda x W = " << fmt_double(r.little_lambda_W, 3)
            << "; queue Lq = " << fmt_double(r.little_Lq, 3)
            << ", lambda x Wq = " << fmt_double(r.little_lambda_Wq, 3) << "\n";
  std::cout << "  simulated   " << with_commas(r.steps) << " steps in " << fmt_double(wall_s, 2)
            << " s (" << with_commas(r.cost_entries) << " distinct step pieces, "
            << with_commas(r.cost_evaluations) << " kernel evaluations)\n";
}

int run_serve(const ServeArgs& a) {
  ReportAwayFromOutput away(a.trace);  // --trace /dev/stdout: the trace alone on stdout
  PlanRequest req;
  ScenarioSpec probe;
  probe = a.common.resolve(ScenarioKind::serve, Workload{}, req);
  apply_flags(a, probe);
  ScenarioSpec& s = probe;
  validate_serve_options(s.serve);
  if (!a.trace.empty()) {  // checked before the simulation; never a file this command reads
    check_output_file(a.trace);
    refuse_input_as_output(a.trace, a.common.scenario, "--trace", "scenarios");
    refuse_plan_inputs(a.trace, "--trace", req, a.common.plan.plan_file);
    refuse_input_as_output(a.trace, s.arrivals_csv.value_or(""), "--trace");
  }
  std::vector<Request> reqs = s.arrivals_csv
                                  ? parse_trace_csv(read_file(*s.arrivals_csv, uint64_t(4) << 30), *s.arrivals_csv)
                                  : generate_requests(s.arrivals);
  if (reqs.empty()) throw Error("the stream has no requests (raise --rate or --duration)");
  // Lower the graphs for a representative shape (it steers the kv-layout choice);
  // the serving steps bind their own B, S and T.
  double mean_prompt = 0, mean_output = 0;
  for (const Request& q : reqs) mean_prompt += double(q.prompt), mean_output += double(q.output);
  req.workload = Workload{s.serve.max_batch,
                          std::max<int64_t>(1, std::llround(mean_prompt / double(reqs.size()))),
                          std::max<int64_t>(1, std::llround(mean_output / double(reqs.size())))};
  Planned p = make_plan(req, {}, false);
  // A paged:N plan allocates blocks of N positions: serve-sim's KV blocks are the plan's
  // (it allocated 16-token blocks beside a paged:4096 plan that simulate charged 4096 a
  // sequence). A different block asked for is refused.
  if (const int64_t paged = kv_block_of(p.lowered.decode); paged > 1 && s.serve.kv_block != paged) {
    if (a.kv_block || s.serve.kv_block != ServeOptions{}.kv_block)
      throw Error((a.kv_block ? "--kv-block " : "the scenario's kv_block ") + std::to_string(s.serve.kv_block) +
                  ": the plan's KV layout is " +
                  p.lowered.decode.attrs.s("kv_layout") + ", blocks of " + std::to_string(paged) +
                  " positions; give --kv-block " + std::to_string(paged) + " or another --kv-layout");
    if (paged > 4096) throw Error("--kv-layout " + p.lowered.decode.attrs.s("kv_layout") + ": serve-sim takes KV blocks of at most 4096 positions");
    s.serve.kv_block = paged;
  }
  for (const Request& q : reqs)
    if (q.prompt + q.output > p.model.max_context) {
      std::cerr << "lathe: warning: some requests exceed " << p.model.name << "'s max_context ("
                << p.model.max_context << "); figures are extrapolated\n";
      break;
    }
  ServeRunOptions run;
  run.ideal = a.common.ideal;
  run.record_spans = !a.trace.empty();
  Progress progress("serve-sim");
  run.progress = [&](double f) { progress.update(f); };
  auto t0 = std::chrono::steady_clock::now();
  ServeResult r = simulate_serving(p.lowered.prefill, p.lowered.decode, p.target, std::move(reqs),
                                   s.serve, run);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.update(1.0);
  if (!a.trace.empty())
    write_file_atomic(
        a.trace,
        serve_trace_json(r, p.model.name + " on " + p.target.name + ", " +
                                std::string(batching_name(s.serve.batching)) + " batching"));
  if (a.common.format == "json") {
    std::cout << result_json(p, s, r, wall, a.common.ideal).dump(2) << "\n";
    return 0;
  }
  if (a.common.format == "csv") {
    std::cout << request_csv(r).csv();
    return 0;
  }
  print_text(p, s, r, wall);
  if (!a.trace.empty())
    std::cout << "  trace (ui.perfetto.dev): " << a.trace
              << (int64_t(r.step_spans.size()) < r.steps
                      ? " (its steps track holds the first " + with_commas(int64_t(r.step_spans.size())) + " of " +
                            with_commas(r.steps) + " steps)"
                      : std::string())
              << "\n";
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, Registry& r) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve-sim",
                                     "Simulate serving a request stream: batching, queueing, SLOs");
  a->common.add_to(cmd, {"text", "json", "csv"});
  cmd->add_option("--batching", a->batching, "static, dynamic, continuous (default) or chunked");
  cmd->add_option("--max-batch", a->max_batch,
                  "sequences per batch / running sequences (default 64)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  cmd->add_option("--batch-timeout-ms", a->timeout_ms,
                  "dynamic batching: dispatch when the oldest waited this long (20)")
      ->check(number_in(0.0, 1e7));
  cmd->add_option("--token-budget", a->token_budget, "chunked prefill: tokens per step (512)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--max-prefill-tokens", a->max_prefill_tokens,
                  "continuous: prompt tokens per prefill step (8192)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--memory-fraction", a->memory_fraction,
                  "share of device memory for weights + KV + activations (0.9)")
      ->check(number_in(0.01, 1.0));
  cmd->add_option("--kv-block", a->kv_block, "KV allocation block in tokens (16)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--replicas", a->replicas, "replicas of the plan behind the router (1)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--router", a->router, "round-robin (default) or least-loaded");
  cmd->add_option("--rate", a->rate, "Poisson arrival rate, requests/s (1)")
      ->check(number_in(1e-6, 1e7));
  cmd->add_option("--duration", a->duration, "seconds of arrivals (60)")
      ->check(number_in(1e-6, 1e9));
  cmd->add_option("--requests", a->requests, "exactly N requests instead of a duration")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 26));
  cmd->add_option("--prompt", a->prompt,
                  "prompt tokens: fixed:N, uniform:LO,HI or lognormal:MEDIAN,SIGMA (uniform:128,1024)");
  cmd->add_option("--output", a->output,
                  "output tokens (first included), same forms (uniform:32,512)");
  cmd->add_option("--priority-mix", a->priority_mix,
                  "shares of priority classes 0,1,...; 0 is the most urgent (1)");
  cmd->add_option("--seed", a->seed, "seed of the generated stream (1)")->check(non_negative_integer());
  cmd->add_option("--arrivals-csv", a->arrivals_csv,
                  "request trace CSV: arrival_s,prompt_tokens,output_tokens[,priority]");
  cmd->add_option("--slo-ttft", a->slo_ttft_ms, "TTFT SLO in ms for goodput (0 = none)")
      ->check(number_in(0.0, 1e9));
  cmd->add_option("--slo-tpot", a->slo_tpot_ms, "TPOT SLO in ms for goodput (0 = none)")
      ->check(number_in(0.0, 1e9));
  cmd->add_option("--trace", a->trace,
                  "write a Perfetto timeline (JSON): one track per batch slot, the first 20,000 steps")
      ->check(non_empty());
  cmd->callback([&r, a] { r.action = [a] { return run_serve(*a); }; });
}

}  // namespace lathe::cli
