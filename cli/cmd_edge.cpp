// lathe edge-sim: an edge device with unified memory (Jetson AGX Orin by default):
// ms/token and memory per weight format, the KV-compression trade-off and the cost
// of beam width, each printed beside the figures the seed article claims when they
// are supplied (scenario [[scenario.edge.claims]]); lathe never invents them.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "cli/scenario_args.h"
#include "frontend/sweep.h"
#include "ir/assert.h"
#include "simulator/edge.h"

namespace lathe::cli {

namespace {

struct EdgeArgs {
  ScenarioArgs common;
  std::optional<std::string> formats, kv_dtypes, beams;
  std::optional<int64_t> prompt, gen, kv_context;
  std::optional<double> os_reserve, cpu_share;
};

void apply_flags(const EdgeArgs& a, EdgeOptions& o) {
  if (a.formats) {
    o.weights = split_commas(*a.formats, "--formats");
    std::vector<std::string> keys;
    for (const std::string& w : o.weights) {
      std::string why;
      auto f = parse_weight_format(w, &why);
      if (!f) throw Error("--formats: " + why);
      keys.push_back(format_name(*f));
    }
    if (o.weights.empty()) throw Error("--formats: empty list");
    refuse_repeats(o.weights, keys, "--formats");
  }
  if (a.kv_dtypes) {
    o.kv_dtypes = split_commas(*a.kv_dtypes, "--kv-dtypes");
    std::vector<std::string> keys;
    for (const std::string& k : o.kv_dtypes) {
      std::string why;
      auto d = parse_kv_dtype(k, &why);
      if (!d) throw Error("--kv-dtypes: " + why);
      keys.emplace_back(dtype_name(*d));
    }
    if (o.kv_dtypes.empty()) throw Error("--kv-dtypes: empty list");
    refuse_repeats(o.kv_dtypes, keys, "--kv-dtypes");
  }
  if (a.beams) {
    o.beams.clear();
    for (int64_t b : int_list(*a.beams, "--beams", 1, 64)) o.beams.push_back(int(b));
  }
  if (a.prompt) o.prompt = *a.prompt;
  if (a.gen) o.gen = *a.gen;
  if (a.kv_context) o.kv_context = *a.kv_context;
  if (a.os_reserve) o.os_reserve_gb = *a.os_reserve;
  if (a.cpu_share) o.cpu_bandwidth_share = *a.cpu_share;
}

// The claim for a row's label; every label asked for is remembered, so that claims no
// row matches can be named.
const Claim* find_claim(const EdgeOptions& o, const std::string& label, std::vector<std::string>& labels) {
  labels.push_back(label);
  for (const Claim& c : o.claims)
    if (c.label == label) return &c;
  return nullptr;
}

// "12.3 (lathe +4.1, +33%)" or "not supplied".
std::string versus(std::optional<double> claimed, double ours, int digits) {
  if (!claimed) return "not supplied";
  double diff = ours - *claimed;
  std::string s =
      fmt_double(*claimed, digits) + " (lathe " + (diff >= 0 ? "+" : "") + fmt_double(diff, digits);
  if (*claimed != 0)
    s += ", " + std::string(diff >= 0 ? "+" : "") + fmt_double(100 * diff / std::fabs(*claimed), 0) + "%";
  return s + ")";
}

nlohmann::json claim_json(const Claim* c) {
  if (!c) return nullptr;
  nlohmann::json j = {{"label", c->label}, {"source", c->source}};
  auto put = [&](const char* k, const std::optional<double>& v) {
    j[k] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  put("ms_per_token", c->ms_per_token);
  put("memory_gb", c->memory_gb);
  put("memory_saved_pct", c->memory_saved_pct);
  put("time_saved_pct", c->time_saved_pct);
  return j;
}

int run_edge(const EdgeArgs& a) {
  PlanRequest base;
  ScenarioSpec s =
      a.common.resolve(ScenarioKind::edge, Workload{1, 512, 128}, base, "jetson-agx-orin-64g");
  apply_flags(a, s.edge);
  const EdgeOptions& o = s.edge;
  {
    Target probe = load_target_spec(base.hardware, base.sets);
    if (probe.unified_memory > 0 && o.cpu_bandwidth_share > 0)
      base.sets.push_back(
          "hbm_bandwidth_gbs=" +
          fmt_double(unified_bandwidth_target(probe, o.cpu_bandwidth_share).hbm_bandwidth_gbs, 6));
    // The OS reserve and the CPU's bandwidth share are the unified-memory model: a
    // discrete GPU has its own memory, and given explicitly they would silently do nothing.
    // A reserve of the whole memory leaves nothing to fit: every row would say NO.
    if (probe.unified_memory > 0 && o.os_reserve_gb * 1e9 >= probe.capacity_bytes())
      throw Error("the OS reserve (--os-reserve-gb, os_reserve_gb) of " + fmt_double(o.os_reserve_gb, 1) +
                  " GB leaves nothing of " + probe.name + "'s " + fmt_double(probe.capacity_bytes() / 1e9, 1) +
                  " GB for the model");
    if (probe.unified_memory <= 0 && (a.os_reserve || (a.cpu_share && *a.cpu_share > 0)))
      std::cerr << "lathe: warning: --os-reserve-gb and --cpu-bandwidth-share model a device whose memory the "
                   "CPU shares (unified_memory = 1); "
                << probe.name << " has its own memory, so they are not applied\n";
  }
  auto plan_with = [&](std::optional<Format> w, std::optional<DType> kv, Workload wl) {
    PlanRequest r = base;
    if (w) r.options.weights = w;
    if (kv) r.options.kv_dtype = kv;
    r.workload = wl;
    return make_plan(r, {}, false);
  };
  nlohmann::json j;
  std::vector<std::string> labels;  // rows' claim labels
  // ---- weight formats ----
  Table ft({"weights", "ms/token", "tok/s", "TTFT ms", "weights GB", "KV GB", "act GB", "model GB",
            "+OS/CPU GB", "total GB", "fits", "article ms/token (diff)",
            "article GB vs model GB (diff)"});
  std::string target_line;
  for (const std::string& wname : o.weights) {
    Planned p = plan_with(parse_weight_format(wname), std::nullopt, {1, o.prompt, o.gen});
    target_line = describe_target(p.target);
    EdgeMemory m = edge_memory(p.sim.mem, p.target, o.os_reserve_gb);
    const Claim* c = find_claim(o, wname, labels);
    double ms = p.sim.tpot_s * 1e3;
    double model_gb = (m.weights + m.kv + m.activations) / 1e9;
    ft.add({wname, fmt_double(ms, 2), fmt_double(1e3 / ms, 1), ms_text(p.sim.ttft_s),
            fmt_double(m.weights / 1e9, 2), fmt_double(m.kv / 1e9, 3),
            fmt_double(m.activations / 1e9, 3), fmt_double(model_gb, 2),
            fmt_double(m.os_reserve / 1e9, 1), fmt_double(m.total / 1e9, 2), m.fits ? "yes" : "NO",
            versus(c ? c->ms_per_token : std::nullopt, ms, 2),
            versus(c ? c->memory_gb : std::nullopt, model_gb, 2)});
    j["formats"].push_back({{"weights", wname},
                            {"ms_per_token", ms},
                            {"ttft_ms", p.sim.ttft_s * 1e3},
                            {"memory_gb",
                             {{"weights", m.weights / 1e9},
                              {"kv", m.kv / 1e9},
                              {"activations", m.activations / 1e9},
                              {"os_reserve", m.os_reserve / 1e9},
                              {"total", m.total / 1e9},
                              {"capacity", m.capacity / 1e9}}},
                            {"fits", m.fits},
                            {"claim", claim_json(c)}});
  }
  // ---- KV compression at a long context ----
  Table kt({"KV dtype", "KV GB", "memory saved", "ms/token", "time saved", "total GB", "fits",
            "article memory saved (diff)", "article time saved (diff)"});
  double kv0 = 0, ms0 = 0;
  for (const std::string& kname : o.kv_dtypes) {
    Planned p = plan_with(std::nullopt, parse_kv_dtype(kname), {1, o.kv_context, o.gen});
    double kv = p.sim.mem.kv, ms = p.sim.tpot_s * 1e3;
    if (kv0 == 0) kv0 = kv, ms0 = ms;
    double mem_saved = 100 * (1 - kv / kv0), time_saved = 100 * (1 - ms / ms0);
    const Claim* c = find_claim(o, "kv " + kname, labels);
    EdgeMemory km = edge_memory(p.sim.mem, p.target, o.os_reserve_gb);
    kt.add({kname, fmt_double(kv / 1e9, 3), fmt_double(mem_saved, 1) + "%", fmt_double(ms, 2),
            fmt_double(time_saved, 1) + "%", fmt_double(km.total / 1e9, 2), km.fits ? "yes" : "NO",
            versus(c ? c->memory_saved_pct : std::nullopt, mem_saved, 1),
            versus(c ? c->time_saved_pct : std::nullopt, time_saved, 1)});
    j["kv"].push_back({{"kv", kname},
                       {"kv_gb", kv / 1e9},
                       {"memory_saved_pct", mem_saved},
                       {"ms_per_token", ms},
                       {"time_saved_pct", time_saved},
                       {"total_gb", km.total / 1e9},
                       {"fits", km.fits},
                       {"claim", claim_json(c)}});
  }
  // ---- beam width ----
  Planned bp = plan_with(std::nullopt, std::nullopt, {1, o.prompt, o.gen});
  // As the other simulators: past max_context the figures are extrapolated (the
  // prompt + gen of the first and last tables, the KV table's context + gen).
  for (const std::string& w : check_workload(bp.model, {1, o.prompt, o.gen}))
    std::cerr << "lathe: warning: " << w << "\n";
  if (o.kv_context + o.gen > bp.model.max_context)
    std::cerr << "lathe: warning: the KV-compression table's context + gen = " << o.kv_context + o.gen << " exceeds "
              << bp.model.name << "'s max_context (" << bp.model.max_context << "); its figures are extrapolated\n";
  StepCoster coster(bp.lowered.prefill, bp.lowered.decode, bp.target, CostOptions{a.common.ideal});
  Table bt({"beams", "KV GB (own)", "KV GB (shared prompt)", "ms/token", "x beam 1", "total GB", "fits",
            "article ms/token (diff)", "article GB vs model GB (diff)"});
  const double beam1 = beam_cost(coster, o.prompt, o.gen, 1).ms_per_token;  // the column's reference
  for (int64_t w : o.beams) {
    BeamCost b = beam_cost(coster, o.prompt, o.gen, w);
    const Claim* c = find_claim(o, "beam " + std::to_string(w), labels);
    MemoryFootprint with_beams = bp.sim.mem;  // each beam holding its own prompt's KV
    with_beams.kv = b.kv_bytes;
    EdgeMemory bm = edge_memory(with_beams, bp.target, o.os_reserve_gb);
    // A claim's memory_gb is the model's (weights + KV + activations), as in the
    // weight-format table.
    const double model_gb = (bm.weights + bm.kv + bm.activations) / 1e9;
    bt.add({std::to_string(w), fmt_double(b.kv_bytes / 1e9, 3),
            fmt_double(b.kv_bytes_shared / 1e9, 3), fmt_double(b.ms_per_token, 2),
            "x" + fmt_double(b.ms_per_token / beam1, 2), fmt_double(bm.total / 1e9, 2), bm.fits ? "yes" : "NO",
            versus(c ? c->ms_per_token : std::nullopt, b.ms_per_token, 2),
            versus(c ? c->memory_gb : std::nullopt, model_gb, 2)});
    j["beams"].push_back({{"beams", w},
                          {"kv_gb", b.kv_bytes / 1e9},
                          {"kv_gb_shared_prompt", b.kv_bytes_shared / 1e9},
                          {"ms_per_token", b.ms_per_token},
                          {"model_gb", model_gb},
                          {"total_gb", bm.total / 1e9},
                          {"fits", bm.fits},
                          {"claim", claim_json(c)}});
  }
  std::string rows;
  for (const std::string& l : labels) rows += (rows.empty() ? "" : ", ") + l;
  for (const Claim& c : o.claims)
    if (std::find(labels.begin(), labels.end(), c.label) == labels.end())
      std::cerr << "lathe: warning: the article figure labelled '" << c.label
                << "' matches no row of this run (rows: " << rows << ")\n";
  bool any_claim = false;  // a figure printed beside a row (unmatched claims were warned about)
  for (const Claim& c : o.claims)
    any_claim = any_claim || (std::find(labels.begin(), labels.end(), c.label) != labels.end() &&
                              (c.ms_per_token || c.memory_gb || c.memory_saved_pct || c.time_saved_pct));
  if (a.common.format == "json") {
    j["model"] = bp.model.name;
    j["hardware"] = bp.target.name;
    j["scenario"] = s.name;
    j["plan"] = describe_options(bp);
    j["prompt"] = o.prompt;
    j["gen"] = o.gen;
    j["kv_context"] = o.kv_context;
    j["unified_memory"] = bp.target.unified_memory > 0;
    j["ideal"] = a.common.ideal;
    j["os_reserve_gb"] = o.os_reserve_gb;
    j["cpu_bandwidth_share"] = o.cpu_bandwidth_share;
    j["claims_supplied"] = any_claim;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "lathe edge-sim: " << bp.model.name << " on " << target_line
            << (s.name.empty() ? "" : "; scenario " + s.name) << "\n";
  if (bp.target.unified_memory > 0)
    std::cout << "  unified memory: " << fmt_double(o.os_reserve_gb, 1)
              << " GB kept for the OS and the CPU side; the CPU side uses "
              << fmt_double(100 * o.cpu_bandwidth_share, 0)
              << "% of the memory bandwidth meanwhile\n";
  std::cout << "  plan      " << describe_options(bp) << "\n\n";
  std::cout << "  Weight formats (batch 1, prompt " << o.prompt << ", " << o.gen << " tokens)\n"
            << ft.text("  ") << "\n";
  std::cout << "  KV compression (batch 1, context " << o.kv_context
            << ", savings against the first row)\n"
            << kt.text("  ") << "\n";
  std::cout << "  Beam width (prompt " << o.prompt << ", " << o.gen
            << " tokens; every beam decodes each step)\n"
            << bt.text("  ");
  if (!any_claim)
    std::cout << "\n  No article figures supplied: they are not in lathe. Fill in the placeholders "
                 "of a scenario's\n"
                 "  [[scenario.edge.claims]] (see specs/scenarios/edge-orin.toml) to print them "
                 "beside lathe's.\n";
  return 0;
}

}  // namespace

void register_edge(CLI::App& app, Registry& r) {
  auto a = std::make_shared<EdgeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "edge-sim", "Simulate an edge device: weight formats, KV compression, beam width");
  a->common.add_to(cmd, {"text", "json"});
  cmd->add_option("--formats", a->formats, "weight formats to compare (f16,int8,int4:g128)");
  cmd->add_option("--kv-dtypes", a->kv_dtypes, "KV dtypes to compare (f16,int8,int4)");
  cmd->add_option("--beams", a->beams, "beam widths to compare (1,2,3,4)");
  cmd->add_option("--prompt", a->prompt, "prompt tokens (512)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--gen", a->gen, "generated tokens (128)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--kv-context", a->kv_context, "context for the KV comparison (4096)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--os-reserve-gb", a->os_reserve,
                  "unified memory kept for the OS and CPU side (8)")
      ->check(number_in(0.0, 1e6));
  cmd->add_option("--cpu-bandwidth-share", a->cpu_share,
                  "share of memory bandwidth the CPU side uses (0)")
      ->check(number_in(0.0, 0.95));
  cmd->callback([&r, a] { r.action = [a] { return run_edge(*a); }; });
}

}  // namespace lathe::cli
