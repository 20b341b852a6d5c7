// lathe specs: the built-in model and hardware library, one line each.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "frontend/scenario.h"
#include "frontend/specs.h"
#include "frontend/sweep.h"

namespace lathe::cli {

namespace {
struct SpecsArgs {
  std::string format = "text";
};

int run_specs(const SpecsArgs& a) {
  nlohmann::json j;
  Table models({"model", "params", "active", "layers", "hidden", "heads/kv", "ffn", "vocab", "context", "dtype",
                "description"});
  for (const BuiltinSpec& b : builtin_specs("models")) {
    ModelSpec m = parse_model_toml(b.text, b.path);
    std::string ffn = m.is_moe() ? std::to_string(m.moe->experts) + "x" + std::to_string(m.moe->expert_ffn) +
                                       " top" + std::to_string(m.moe->top_k)
                                 : std::to_string(m.ffn);
    models.add({m.name, human_count(double(m.param_count())), human_count(double(m.active_param_count())),
                std::to_string(m.layers), std::to_string(m.hidden),
                std::to_string(m.heads) + "/" + std::to_string(m.kv_heads), ffn, std::to_string(m.vocab),
                std::to_string(m.max_context), std::string(dtype_name(m.dtype)), m.description});
    j["models"].push_back({{"name", m.name},
                           {"params", m.param_count()},
                           {"active_params", m.active_param_count()},
                           {"layers", m.layers},
                           {"hidden", m.hidden},
                           {"heads", m.heads},
                           {"kv_heads", m.kv_heads},
                           {"head_dim", m.head_dim},
                           {"ffn", m.is_moe() ? m.moe->expert_ffn : m.ffn},
                           {"experts", m.is_moe() ? m.moe->experts : 0},
                           {"top_k", m.is_moe() ? m.moe->top_k : 0},
                           {"vocab", m.vocab},
                           {"max_context", m.max_context},
                           {"dtype", std::string(dtype_name(m.dtype))},
                           {"description", m.description}});
  }
  Table hw({"hardware", "kind", "memory", "bandwidth", "bf16/fp16", "fp8", "int8", "fp32", "SMs/cores",
            "description"});
  for (const BuiltinSpec& b : builtin_specs("hardware")) {
    Target t = parse_target_toml(b.text, b.path);
    auto tf = [](double v) { return v > 0 ? fmt_double(v, 1) + " TF" : std::string("-"); };
    hw.add({t.name, t.is_gpu() ? "gpu" : "cpu", fmt_double(t.memory_gb, 0) + " GB",
            fmt_double(t.hbm_bandwidth_gbs, 0) + " GB/s", tf(std::max(t.peak_bf16, t.peak_fp16)), tf(t.peak_fp8),
            tf(t.peak_int8), tf(t.peak_fp32), fmt_double(t.sm_count, 0), t.description});
    j["hardware"].push_back({{"name", t.name},
                             {"kind", t.is_gpu() ? "gpu" : "cpu"},
                             {"memory_gb", t.memory_gb},
                             {"hbm_bandwidth_gbs", t.hbm_bandwidth_gbs},
                             {"peak_tflops", {{"fp32", t.peak_fp32}, {"tf32", t.peak_tf32}, {"fp16", t.peak_fp16},
                                              {"bf16", t.peak_bf16}, {"fp8", t.peak_fp8}, {"int8", t.peak_int8}}},
                             {"sm_count", t.sm_count},
                             {"description", t.description}});
  }
  Table sc({"scenario", "kind", "model", "hardware", "description"});
  j["scenarios"] = nlohmann::json::array();
  for (const BuiltinSpec& b : builtin_specs("scenarios")) {
    ScenarioSpec s = parse_scenario_toml(b.text, b.path);
    std::string kind(scenario_kind_name(s.kind));
    sc.add({s.name, kind, s.model.value_or("-"), s.hardware.value_or("-"), s.description});
    j["scenarios"].push_back({{"name", s.name},
                              {"kind", kind},
                              {"model", s.model.value_or("")},
                              {"hardware", s.hardware.value_or("")},
                              {"description", s.description}});
  }
  Table sw({"sweep", "points", "objectives", "description"});
  j["sweeps"] = nlohmann::json::array();
  for (const BuiltinSpec& b : builtin_specs("sweeps")) {
    SweepSpec s = parse_sweep_toml(b.text, b.path);
    uint64_t points = sweep_point_count(s);
    std::string objs;
    for (const Objective& o : s.objectives) objs += (objs.empty() ? "" : ", ") + o.text();
    sw.add({s.name, with_commas(int64_t(points)), objs, s.description});
    std::vector<std::string> obj_list;
    for (const Objective& o : s.objectives) obj_list.push_back(o.text());
    j["sweeps"].push_back(
        {{"name", s.name}, {"points", points}, {"objectives", obj_list}, {"description", s.description}});
  }
  Table pl({"plan", "model", "hardware", "weights", "kv", "tp", "batch", "prompt", "gen"});
  j["plans"] = nlohmann::json::array();
  for (const BuiltinSpec& b : builtin_specs("plans")) {
    PlanSpec p = parse_plan_toml(b.text, b.path);
    nlohmann::json f = plan_spec_json(p);  // as `lathe check --format json` shows a plan
    pl.add({b.name, p.model.value_or("-"), p.hardware.value_or("-"), f["weights"], f["kv"],
            std::to_string(p.options.tp), std::to_string(p.workload.batch), std::to_string(p.workload.prompt),
            std::to_string(p.workload.gen)});
    f["name"] = b.name;
    j["plans"].push_back(f);
  }
  if (a.format == "json") {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "Models (" << models.size() << ")\n" << models.text("  ") << "\n";
  std::cout << "Hardware (" << hw.size() << ")\n" << hw.text("  ") << "\n";
  std::cout << "Scenarios (" << sc.size() << "; run with `lathe KIND-sim --scenario NAME`)\n" << sc.text("  ") << "\n";
  std::cout << "Sweeps (" << sw.size() << "; run with `lathe sweep NAME -o rows.csv`)\n" << sw.text("  ") << "\n";
  std::cout << "Plans (" << pl.size() << "; use with `lathe simulate --plan NAME`, `compile`, `whatif`)\n"
            << pl.text("  ");
  std::cout << "\nUse a name wherever a MODEL or HW argument is taken, or give a path to your own TOML file.\n";
  return 0;
}
}  // namespace

void register_specs(CLI::App& app, Registry& r) {
  auto args = std::make_shared<SpecsArgs>();
  CLI::App* cmd = app.add_subcommand("specs", "List the built-in models, hardware targets, scenarios, sweeps and plans");
  cmd->add_option("--format", args->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, args] { r.action = [args] { return run_specs(*args); }; });
}

}  // namespace lathe::cli
