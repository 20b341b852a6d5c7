// lathe advise: recommended max batch, weight and KV formats, KV layout and TP degree
// for a model on a machine, from an internal sweep (sweep/advise.h).
#include <cstdio>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/common.h"
#include "cli/planning.h"
#include "frontend/sweep.h"
#include "ir/assert.h"
#include "ir/scenario.h"
#include "sweep/advise.h"

namespace lathe::cli {

namespace {

struct AdviseArgs {
  std::string model, hardware, format = "text";
  int64_t prompt = 512, gen = 128, max_batch = 4096;
  double slo_ttft = 0, slo_tpot = 0;
  std::optional<double> os_reserve;
  int threads = 0;
};

int run_advise(const AdviseArgs& a) {
  AdviseRequest r;
  r.model = a.model;
  r.hardware = a.hardware;
  r.prompt = a.prompt;
  r.gen = a.gen;
  r.max_batch = a.max_batch;
  if (a.slo_ttft > 0) r.slo_ttft_ms = a.slo_ttft;
  if (a.slo_tpot > 0) r.slo_tpot_ms = a.slo_tpot;
  if (a.slo_tpot > 0 && a.gen < 2)
    throw Error("--slo-tpot: with --gen " + std::to_string(a.gen) +
                " no decode step runs (the prefill makes the first token), so there is no TPOT to hold to an SLO; "
                "give --gen 2 or more");
  r.threads = a.threads;
  const Target spec = load_target_spec(a.hardware);
  warn_if_measured_by_another_build(spec);
  // A device whose memory the OS shares (unified memory) keeps part of it for the OS, as
  // edge-sim does: advise filled all 64 GB of a Jetson, which edge-sim then called too
  // big. The reserve is a capacity override, so the reproduce line carries it.
  const double reserve = a.os_reserve.value_or(spec.unified_memory > 0 ? EdgeOptions{}.os_reserve_gb : 0.0);
  if (a.os_reserve && spec.unified_memory <= 0 && reserve > 0)
    throw Error("--os-reserve-gb: " + spec.name + " has memory of its own (unified_memory = 0); the reserve is for a "
                "device whose memory the OS shares");
  if (reserve > 0) {
    if (reserve >= spec.memory_gb)
      throw Error("--os-reserve-gb: " + fmt_double(reserve, 1) + " GB leaves nothing of " + spec.name + "'s " +
                  fmt_double(spec.memory_gb, 1) + " GB");
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.6g", spec.memory_gb - reserve);
    r.hardware += "+memory_gb=" + std::string(gb);
  }
  Advice adv = advise(r);
  const SweepRow& best = adv.plan;
  // Paths as a shell reads them ("sp ace/my tiny.toml" came out as two words).
  auto quoted = [](const std::string& s) {
    if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:+=@%") ==
        std::string::npos)
      return s;
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string reproduce = "lathe simulate " + quoted(a.model) + " " + quoted(r.hardware) + " --batch " +
                                std::to_string(best.batch) + " --prompt " + std::to_string(a.prompt) + " --gen " +
                                std::to_string(a.gen) + " --weights " + best.weights + " --kv " + best.kv +
                                " --kv-layout " + best.kv_layout + " --tp " + std::to_string(best.tp);
  if (a.format == "json") {
    nlohmann::json j;
    j["model"] = adv.plan.model;
    j["hardware"] = adv.plan.hardware;
    j["prompt"] = a.prompt;
    j["gen"] = a.gen;
    j["slo_ttft_ms"] = r.slo_ttft_ms ? nlohmann::json(*r.slo_ttft_ms) : nlohmann::json(nullptr);
    j["slo_tpot_ms"] = r.slo_tpot_ms ? nlohmann::json(*r.slo_tpot_ms) : nlohmann::json(nullptr);
    j["recommendations"] = nlohmann::json::array();
    for (const Recommendation& x : adv.items)
      j["recommendations"].push_back({{"parameter", x.parameter},
                                      {"value", x.value},
                                      {"runner_up", x.runner_up},
                                      {"reason", x.reason}});
    j["plan"] = nlohmann::json::parse(format_row(adv.plan, RowFormat::jsonl));
    j["plans_costed"] = adv.plans;
    j["plan_shapes"] = adv.shapes;
    j["reproduce"] = reproduce;
    j["seconds"] = adv.seconds;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::string slo;
  if (r.slo_ttft_ms) slo += "TTFT <= " + fmt_double(*r.slo_ttft_ms, 1) + " ms";
  if (r.slo_tpot_ms)
    slo +=
        (slo.empty() ? "" : ", ") + std::string("TPOT <= ") + fmt_double(*r.slo_tpot_ms, 2) + " ms";
  std::cout << "lathe advise: " << adv.plan.model << " on " << adv.plan.hardware << ", prompt "
            << a.prompt << ", gen " << a.gen
            << (slo.empty() ? std::string(", no SLO") : ", SLO " + slo) << "\n";
  std::cout << "  " << with_commas(adv.plans) << " plans costed (" << adv.shapes
            << " plan shapes) in " << fmt_double(adv.seconds, 2)
            << " s; configurations scored by generated tokens/s per device at their best "
            << "feasible batch\n\n";
  Table t({"parameter", "recommended", "runner-up", "why"});
  for (const Recommendation& x : adv.items) t.add({x.parameter, x.value, x.runner_up, x.reason});
  std::cout << t.text("  ");
  const SweepRow& p = adv.plan;
  std::cout << "\n  the recommended plan at batch " << p.batch << ": TTFT "
            << fmt_double(p.ttft_ms, 1) << " ms, "
            << (p.gen < 2 ? "no decode step (gen " + std::to_string(p.gen) + ")" : "TPOT " + fmt_double(p.tpot_ms, 2) + " ms")
            << ", "
            << fmt_double(p.tokens_per_s, 0) << " generated tok/s, " << fmt_double(p.memory_gb, 1)
            << " of " << fmt_double(p.capacity_gb, 0) << " GB\n";
  std::cout << "  reproduce: " << reproduce << "\n";
  return 0;
}

}  // namespace

void register_advise(CLI::App& app, Registry& r) {
  auto a = std::make_shared<AdviseArgs>();
  CLI::App* cmd = app.add_subcommand("advise",
                                     "Recommend max batch, weight and KV formats, KV layout and TP "
                                     "degree for a model on a machine");
  cmd->add_option("MODEL", a->model, "built-in model name, model TOML, .gguf file, or Hugging Face directory / config.json")->required();
  cmd->add_option("HW", a->hardware,
                  "built-in hardware name or TOML; NAME+key=value adds overrides")
      ->required();
  cmd->add_option("--prompt", a->prompt, "prompt tokens per request (default 512)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--gen", a->gen, "generated tokens per request (default 128)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--slo-ttft", a->slo_ttft, "time-to-first-token SLO in ms")
      ->check(positive_number());
  cmd->add_option("--slo-tpot", a->slo_tpot, "time-per-output-token SLO in ms")
      ->check(positive_number());
  cmd->add_option("--os-reserve-gb", a->os_reserve,
                  "memory kept for the OS on a unified-memory device (default 8 there, as edge-sim; 0 elsewhere)")
      ->check(number_in(0.0, 1e6));
  cmd->add_option("--max-batch", a->max_batch, "top of the batch grid (default 4096)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--threads", a->threads, "worker threads (default: the CPUs this process may use: its affinity mask and cgroup quota)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, a] { r.action = [a] { return run_advise(*a); }; });
}

}  // namespace lathe::cli
