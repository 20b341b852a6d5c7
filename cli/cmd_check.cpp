// lathe check: validate a model, hardware or plan spec and summarize it.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "frontend/hf_config.h"
#include "frontend/scenario.h"
#include "frontend/specs.h"
#include "frontend/sweep.h"
#include "checkpoint/gguf_file.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/tokenizer.h"
#include "codegen/kernels_id.h"
#include "ir/assert.h"
#include "sweep/sweep.h"

namespace lathe::cli {

namespace {
struct CheckArgs {
  std::string file;
  std::string format = "text";
};

nlohmann::json model_json(const ModelSpec& m, const std::string& src) {
  double wbytes = double(m.param_count()) * dtype_bits(m.dtype) / 8.0;
  double kv = m.kv_bytes_per_token(dtype_bits(m.dtype));
  double f1 = m.flops_per_token(1), fmax = m.flops_per_token(m.max_context);
  nlohmann::json j = {{"kind", "model"},
                      {"name", m.name},
                      {"source", src},
                      {"params", m.param_count()},
                      {"active_params", m.active_param_count()},
                      {"weight_bytes", wbytes},
                      {"kv_bytes_per_token", kv},
                      {"flops_per_token", f1},
                      {"flops_per_token_at_max_context", fmax},
                      {"description", m.description},
                      {"arch", m.arch},
                      {"dtype", std::string(dtype_name(m.dtype))},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"head_dim", m.head_dim},
                      {"ffn", m.ffn},
                      {"vocab", m.vocab},
                      {"max_context", m.max_context},
                      {"tie_embeddings", m.tie_embeddings},
                      {"rope_theta", m.rope_theta}};
  if (m.is_moe())
    j["moe"] = {{"experts", m.moe->experts}, {"top_k", m.moe->top_k}, {"expert_ffn", m.moe->expert_ffn}};
  if (m.rope_scaling) {
    const RopeScaling& sc = *m.rope_scaling;
    nlohmann::json r = {{"type", sc.type},
                        {"divisors", rope_divisors(sc, m.rope_theta, m.head_dim)}};
    if (sc.type != "factors") r["factor"] = sc.factor;
    if (sc.type == "llama3") {
      r["low_freq_factor"] = sc.low_freq_factor;
      r["high_freq_factor"] = sc.high_freq_factor;
      r["original_max_context"] = sc.original_max_context;
    }
    j["rope_scaling"] = r;
  }
  return j;
}

int summarize_model(const ModelSpec& m, const std::string& src, const std::string& format) {
  double wbytes = double(m.param_count()) * dtype_bits(m.dtype) / 8.0;
  double kv = m.kv_bytes_per_token(dtype_bits(m.dtype));
  double f1 = m.flops_per_token(1), fmax = m.flops_per_token(m.max_context);
  if (format == "json") {
    std::cout << model_json(m, src).dump(2) << "\n";
    return 0;
  }
  std::cout << "model " << m.name << " (" << src << "): OK\n";
  std::cout << "  architecture      " << m.arch << (m.is_moe() ? " (MoE)" : " (dense)") << ", " << m.layers
            << " layers, hidden " << m.hidden << ", heads " << m.heads << " (kv " << m.kv_heads << ") x "
            << m.head_dim << ", vocab " << m.vocab << ", context " << m.max_context << "\n";
  if (m.is_moe())
    std::cout << "  experts           " << m.moe->experts << " x ffn " << m.moe->expert_ffn << ", top-" << m.moe->top_k
              << " per token\n";
  else
    std::cout << "  ffn               " << m.ffn << "\n";
  std::cout << "  RoPE              theta " << fmt_double(m.rope_theta, 0);
  if (m.rope_scaling) {
    const RopeScaling& sc = *m.rope_scaling;
    if (sc.type == "linear") std::cout << ", linear scaling x" << sc.factor;
    else if (sc.type == "llama3")
      std::cout << ", llama3 scaling x" << sc.factor << " (original context "
                << sc.original_max_context << ", low/high freq factors " << sc.low_freq_factor << "/"
                << sc.high_freq_factor << ")";
    else std::cout << ", per-pair frequency divisors (rope_freqs)";
  }
  std::cout << "\n";
  std::cout << "  parameters        " << with_commas(m.param_count()) << " (" << human_count(double(m.param_count()))
            << ")\n";
  if (m.is_moe())
    std::cout << "  active per token  " << with_commas(m.active_param_count()) << " ("
              << human_count(double(m.active_param_count())) << ")\n";
  std::cout << "  weights           " << human_bytes(wbytes) << " at " << dtype_name(m.dtype) << "\n";
  std::cout << "  KV per token      " << with_commas(int64_t(kv)) << " bytes at " << dtype_name(m.dtype)
            << " (2 x layers x kv_heads x head_dim x " << dtype_bits(m.dtype) / 8 << " B)\n";
  std::cout << "  FLOPs per token   " << human_flops(f1) << " at context 1, " << human_flops(fmax)
            << " at context " << m.max_context << " (2 x matmul params + 4 x context x head_dim x heads x layers)\n";
  return 0;
}

int summarize_target(const Target& t, const std::string& src, const std::string& format) {
  DType mat = t.peak_bf16 > 0 ? DType::bf16 : (t.peak_fp16 > 0 ? DType::f16 : DType::f32);
  double ridge = t.matrix_peak_flops(mat) / t.bandwidth_bytes_per_s();
  for (const std::string& w : check_target(t)) std::cerr << "lathe: warning: " << w << "\n";
  warn_if_measured_by_another_build(t);
  if (format == "json") {
    nlohmann::json j = {{"kind", "hardware"},
                        {"name", t.name},
                        {"source", src},
                        {"description", t.description},
                        {"target_kind", t.is_gpu() ? "gpu" : "cpu"},
                        {"measured_with", t.measured_with.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.measured_with)},
                        {"ridge_flops_per_byte", ridge}};
    if (t.is_gpu()) j["compute_capability"] = t.compute_capability;
    for (const TargetField& f : target_fields()) j["fields"][std::string(f.key)] = get_field(t, f);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "hardware " << t.name << " (" << src << "): OK\n";
  std::cout << "  " << t.description << "\n";
  if (!t.measured_with.empty()) std::cout << "  measured with     " << t.measured_with << " (this lathe "
                                          << (t.is_gpu() ? cuda_kernels_id() : cpu_kernels_id()) << ")\n";
  std::cout << "  kind              " << (t.is_gpu() ? "gpu" : "cpu");
  if (t.is_gpu()) std::cout << ", sm_" << t.compute_capability;
  std::cout << ", " << t.sm_count << (t.is_gpu() ? " SMs" : " cores") << " at " << t.clock_mhz << " MHz\n";
  std::cout << "  memory            " << t.memory_gb << " GB at " << t.hbm_bandwidth_gbs << " GB/s\n";
  std::cout << "  peaks (TFLOP/s)   fp32 " << t.peak_fp32 << ", tf32 " << t.peak_tf32 << ", fp16 " << t.peak_fp16
            << ", bf16 " << t.peak_bf16 << ", fp8 " << t.peak_fp8 << ", int8 " << t.peak_int8 << "\n";
  std::cout << "  ridge point       " << fmt_double(ridge, 1) << " FLOP/byte (" << dtype_name(mat)
            << "): kernels below it are memory-bound\n";
  std::cout << "  efficiency        gemm " << t.eff.gemm << ", attention " << t.eff.attention << ", memory "
            << t.eff.memory << ", elementwise " << t.eff.elementwise << "\n";
  if (!t.is_gpu()) {
    // The CPU cost model's own figures (lathe probe measures them; 0 = flat / unset).
    auto gemv = [](double v) { return v > 0 ? fmt_double(v, 3) : std::string("= GEMM"); };
    std::cout << "  CPU GEMMs         sgemm half rows " << t.gemm_half_rows << "; float GEMV " << gemv(t.eff.gemv)
              << "; int4 dot " << t.eff.int_dot
              << " (half K " << t.int_dot_half_k << ", half rows " << t.int_dot_half_rows << ", GEMV "
              << gemv(t.eff.int_dot_gemv) << ", GEMV half K " << t.int_dot_gemv_half_k << "); int8 dot "
              << t.eff.int8_dot << " (half K " << t.int8_dot_half_k << ", half rows " << t.int8_dot_half_rows
              << ", GEMV " << gemv(t.eff.int8_dot_gemv) << ", GEMV half K " << t.int8_dot_gemv_half_k << ")\n";
    std::cout << "  CPU attention     half head_dim " << t.attention_half_dim << ", half group "
              << t.attention_half_group << "\n";
  }
  return 0;
}

}  // namespace

nlohmann::json plan_spec_json(const PlanSpec& p) {
  const PlanOptions& o = p.options;
  return {{"model", p.model.value_or("")},
          {"hardware", p.hardware.value_or("")},
          {"batch", p.workload.batch},
          {"prompt", p.workload.prompt},
          {"gen", p.workload.gen},
          {"weights", o.weights ? format_name(*o.weights) : "model dtype"},
          {"kv", o.kv_dtype ? std::string(dtype_name(*o.kv_dtype)) : "activation dtype"},
          {"kv_layout", o.kv_layout ? kv_layout_name(*o.kv_layout) : "auto"},
          {"act", o.act_dtype ? std::string(dtype_name(*o.act_dtype)) : std::string("default")},
          {"tp", o.tp}};
}

namespace {
int summarize_plan(const PlanSpec& p, const std::string& src, const std::string& format) {
  try {
    if (p.model) load_model(*p.model);  // throws when unknown
    if (p.hardware)  // "h100-sxm+memory_gb=40" as the commands take it
      warn_if_measured_by_another_build(load_target_spec(*p.hardware));
    if (p.model && p.hardware) {
      // Lowered as `simulate --plan` would: what the commands refuse (tp that does not
      // divide the heads, a format the target lacks) is refused here too.
      PlanRequest req;
      req.model = *p.model;
      req.hardware = *p.hardware;
      req.workload = p.workload;
      req.options = p.options;
      LowerHooks hooks;
      hooks.record = false;
      hooks.verify_each_pass = false;
      Planned planned = make_plan(req, hooks, false);
      for (const std::string& w : check_workload(planned.model, planned.workload))
        std::cerr << "lathe: warning: " << w << "\n";
      if (!planned.sim.mem.fits) std::cerr << "lathe: warning: " << oom_message(planned) << "\n";
    }
  } catch (const Error& e) {
    throw Error(src + ": " + e.what());
  }
  const PlanOptions& o = p.options;
  const nlohmann::json fields = plan_spec_json(p);
  const std::string weights = fields["weights"], kv = fields["kv"], layout = fields["kv_layout"];
  if (format == "json") {
    nlohmann::json j = {{"kind", "plan"}, {"source", src}};
    j.update(fields);
    if (o.passes) j["pipeline"] = *o.passes;
    for (const auto& [k, v] : o.pass_enabled) j["passes"][k] = v;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "plan (" << src << "): OK\n";
  if (p.model) std::cout << "  model             " << *p.model << "\n";
  if (p.hardware) std::cout << "  hardware          " << *p.hardware << "\n";
  std::cout << "  workload          batch " << p.workload.batch << ", prompt " << p.workload.prompt << ", gen "
            << p.workload.gen << "\n";
  std::cout << "  weights " << weights << ", KV " << kv << " in " << layout << ", tp " << o.tp << "\n";
  // The activations and the pipeline, as the JSON says them (the text left both out).
  std::cout << "  act               " << (o.act_dtype ? std::string(dtype_name(*o.act_dtype)) : std::string("auto"))
            << "\n";
  std::cout << "  pipeline          "
            << (!o.passes || *o.passes == "default" ? std::string("default (every pass)")
                : *o.passes == "none"                ? std::string("none (no optimization pass)")
                                                     : *o.passes)
            << "\n";
  for (const auto& [k, v] : o.pass_enabled) std::cout << "  pass " << k << ": " << (v ? "on" : "off") << "\n";
  return 0;
}

int summarize_scenario(const ScenarioSpec& s, const std::string& src, const std::string& format) {
  try {
    if (s.model) load_model(*s.model);  // throws when unknown
    if (s.hardware) warn_if_measured_by_another_build(load_target_spec(*s.hardware));
  } catch (const Error& e) {
    throw Error(src + ": " + e.what());
  }
  std::string command = "lathe " + std::string(scenario_kind_name(s.kind)) + "-sim --scenario " + src;
  if (format == "json") {
    nlohmann::json j = {{"kind", "scenario"},
                        {"name", s.name},
                        {"scenario_kind", std::string(scenario_kind_name(s.kind))},
                        {"description", s.description},
                        {"source", src},
                        {"model", s.model.value_or("")},
                        {"hardware", s.hardware.value_or("")},
                        {"command", command}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "scenario (" << src << "): OK\n";
  std::cout << "  name              " << s.name << "\n";
  std::cout << "  kind              " << scenario_kind_name(s.kind) << "\n";
  if (!s.description.empty()) std::cout << "  description       " << s.description << "\n";
  if (s.model) std::cout << "  model             " << *s.model << "\n";
  if (s.hardware) std::cout << "  hardware          " << *s.hardware << "\n";
  std::cout << "  run it with       " << command << "\n";
  return 0;
}

int summarize_sweep(const SweepSpec& s, const std::string& src, const std::string& format) {
  check_sweep_spec(s);  // what `lathe sweep` refuses before it costs anything (it printed 2^63 - 1 points, "OK")
  for (const std::string& h : s.hardware) {
    try {  // only for the warning: `lathe sweep` reports a target it cannot load
      warn_if_measured_by_another_build(load_target_spec(h));
    } catch (const Error&) {
    }
  }
  uint64_t points = sweep_point_count(s);
  std::vector<std::string> objs, cons;
  for (const Objective& o : s.objectives) objs.push_back(o.text());
  if (s.fits) cons.push_back("fits in memory");
  for (const Constraint& c : s.constraints) cons.push_back(c.text());
  std::string command = "lathe sweep " + src + " -o rows.csv";
  if (format == "json") {
    nlohmann::json j = {{"kind", "sweep"}, {"name", s.name},       {"source", src},          {"points", points},
                        {"objectives", objs}, {"constraints", cons}, {"models", s.models}, {"hardware", s.hardware},
                        {"command", command}, {"description", s.description}};
    j["axes"] = {{"batch", s.batch.size()},   {"prompt", s.prompt.size()}, {"gen", s.gen.size()},
                 {"weights", s.weights.size()}, {"kv", s.kv.size()},       {"kv_layout", s.kv_layout.size()},
                 {"fusion", s.fusion.size()},   {"tp", s.tp.size()},       {"act", s.act.size()}};
    for (const WhatifAxis& w : s.whatif) j["whatif"][w.field] = w.values;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string o;
    for (const std::string& x : v) o += (o.empty() ? "" : ", ") + x;
    return o;
  };
  uint64_t hw = s.hardware.size();
  for (const WhatifAxis& w : s.whatif) hw *= w.values.size();
  std::cout << "sweep (" << src << "): OK\n";
  std::cout << "  name              " << s.name << "\n";
  if (!s.description.empty()) std::cout << "  description       " << s.description << "\n";
  std::cout << "  models            " << join(s.models) << "\n";
  std::cout << "  hardware          " << join(s.hardware) << " (" << hw << " with what-if values)\n";
  std::cout << "  axes              batch " << s.batch.size() << ", prompt " << s.prompt.size() << ", gen " << s.gen.size()
            << ", weights " << s.weights.size() << ", kv " << s.kv.size() << ", kv_layout " << s.kv_layout.size()
            << ", fusion " << s.fusion.size() << ", tp " << s.tp.size() << ", act " << s.act.size() << "\n";
  std::cout << "  points            " << with_commas(int64_t(std::min<uint64_t>(points, INT64_MAX))) << "\n";
  std::cout << "  constraints       " << (cons.empty() ? std::string("none") : join(cons)) << "\n";
  std::cout << "  objectives        " << join(objs) << "\n";
  std::cout << "  run it with       " << command << "\n";
  return 0;
}

int run_check(const CheckArgs& a) {
  // A built-in name first, then a file.
  for (const BuiltinSpec& b : builtin_specs("models"))
    if (b.name == a.file) return summarize_model(parse_model_toml(b.text, b.path), "built-in " + b.path, a.format);
  for (const BuiltinSpec& b : builtin_specs("hardware"))
    if (b.name == a.file) return summarize_target(parse_target_toml(b.text, b.path), "built-in " + b.path, a.format);
  for (const BuiltinSpec& b : builtin_specs("scenarios"))
    if (b.name == a.file) return summarize_scenario(parse_scenario_toml(b.text, b.path), b.name, a.format);
  for (const BuiltinSpec& b : builtin_specs("sweeps"))
    if (b.name == a.file) return summarize_sweep(parse_sweep_toml(b.text, b.path), b.name, a.format);
  for (const BuiltinSpec& b : builtin_specs("plans"))
    if (b.name == a.file) return summarize_plan(parse_plan_toml(b.text, b.path), "built-in " + b.path, a.format);
  if (is_hf_model_path(a.file)) return summarize_model(load_model(a.file), a.file, a.format);  // config.json or its dir
  std::error_code ec;
  if (gguf::is_gguf_path(a.file)) {
    // Its vocabulary is checked as run and weights info check it (a BOS id past the
    // vocabulary was OK here and refused there).
    if (auto f = gguf::File::open(a.file); gguf::has_vocab(*f)) (void)gguf::read_vocab(*f);
    if (a.format == "json") {  // the stored matrix format joins the model's fields
      nlohmann::json j = model_json(load_model(a.file), a.file);
      j["stored_matrices"] = format_name(*gguf::stored_weight_format(a.file));
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    int rc = summarize_model(load_model(a.file), a.file, a.format);
    if (a.format != "json")
      std::cout << "  stored matrices   " << format_name(*gguf::stored_weight_format(a.file))
                << " (the format plans use without --weights)\n";
    return rc;
  }
  if (!std::filesystem::exists(a.file, ec))
    throw Error(a.file +
                ": no such file, and not a built-in model, hardware, plan, scenario or sweep name (see `lathe specs`)");
  std::string text = read_file(a.file);
  switch (detect_spec_kind(text, a.file)) {
    case SpecKind::model: return summarize_model(parse_model_toml(text, a.file), a.file, a.format);
    case SpecKind::hardware: return summarize_target(parse_target_toml(text, a.file), a.file, a.format);
    case SpecKind::plan: return summarize_plan(parse_plan_toml(text, a.file), a.file, a.format);
    case SpecKind::scenario: return summarize_scenario(parse_scenario_toml(text, a.file), a.file, a.format);
    case SpecKind::sweep: return summarize_sweep(parse_sweep_toml(text, a.file), a.file, a.format);
    default:
      throw Error(a.file +
                  ":1:1: not a model, hardware, plan, scenario or sweep spec (expected a [model], [hardware], [plan], "
                  "[scenario] or [sweep] table)");
  }
}
}  // namespace

void register_check(CLI::App& app, Registry& r) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "Validate a model, hardware, plan, scenario or sweep spec and summarize it");
  cmd->add_option("FILE", args->file, "spec TOML file, a .gguf model file, a Hugging Face directory or config.json, or a built-in model/hardware/plan/scenario/sweep name")->required();
  cmd->add_option("--format", args->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, args] { r.action = [args] { return run_check(*args); }; });
}

}  // namespace lathe::cli
