#include "cli/planning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>

#include "frontend/builder.h"
#include "frontend/sweep.h"
#include "checkpoint/gguf_model.h"
#include "codegen/kernels_id.h"
#include "ir/assert.h"
#include "runtime/cuda/cuda_api.h"

namespace lathe::cli {

void WorkloadFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--batch", batch, "sequences per batch (default 1)")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--prompt", prompt, "prompt tokens per sequence (default 512)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--gen", gen, "generated tokens per sequence (default 128)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
}

Workload WorkloadFlags::resolve(Workload base) const {
  if (batch > 0) base.batch = batch;
  if (prompt > 0) base.prompt = prompt;
  if (gen >= 0) base.gen = gen;
  return base;
}

std::vector<std::string> check_workload(const ModelSpec& m, const Workload& w) {
  std::vector<std::string> warn;
  if (w.final_context() > m.max_context)
    warn.push_back("prompt + gen = " + std::to_string(w.final_context()) + " exceeds " + m.name + "'s max_context (" +
                   std::to_string(m.max_context) + "); figures are extrapolated");
  return warn;
}

std::vector<std::string> check_target(const Target& t) {
  std::vector<std::string> warn;
  for (const TargetField& f : target_fields()) {
    if (!is_peak_fraction(f)) continue;
    const double v = get_field(t, f);
    if (v > 1)
      warn.push_back(t.name + ": " + std::string(f.key) + " = " + fmt_double(v, 3) +
                     " is above 1 (faster than the peak it scales): predictions can beat the roofline floors");
  }
  return warn;
}

namespace {
std::string fmt_elements(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", n);
  return buf;
}

}  // namespace

void warn_if_measured_by_another_build(const Target& t) {
  if (t.measured_with.empty()) return;
  const std::string_view now = t.is_gpu() ? cuda_kernels_id() : cpu_kernels_id();
  // Once per spec (whatif lists several; a sweep's what-if variants add "+key=value").
  static std::set<std::string> said;
  if (t.measured_with == now || !said.insert(t.measured_with + " " + t.name.substr(0, t.name.find('+'))).second)
    return;
  std::cerr << "lathe: warning: " << t.name << " was measured with another build of lathe's "
            << (t.is_gpu() ? "CUDA" : "CPU") << " kernels or cost model (measured_with " << t.measured_with
            << ", this lathe " << now << "); its efficiencies may not describe the kernels this lathe runs: "
            << "measure it again (`lathe probe` or `lathe calibrate`)\n";
}

void warn_if_descriptive_override(const std::string& overrides) {
  static std::set<std::string_view> said;
  // "key", "key=value" or "target+key=value+key=value": every '+'-separated part's key.
  for (size_t at = 0; at <= overrides.size();) {
    size_t end = std::min(overrides.find('+', at), overrides.size());
    std::string_view part = std::string_view(overrides).substr(at, end - at);
    const TargetField* f = find_target_field(part.substr(0, part.find('=')));
    if (f && !f->untimed.empty() && said.insert(f->key).second)
      std::cerr << "lathe: warning: " << f->key << " " << f->untimed << "\n";
    at = end + 1;
  }
}

void warn_if_tp_spans_boards(const Target& t, int64_t tp) {
  if (tp <= 8 || !(t.nvlink_switch > 0) || !(t.nvlink_gbs > 0)) return;
  static std::set<std::string> said;
  const std::string base = t.name.substr(0, t.name.find('+'));  // a sweep's what-if variants: once
  if (!said.insert(base + " " + std::to_string(tp)).second) return;
  std::cerr << "lathe: warning: tp " << tp << " spans more than one 8-GPU NVSwitch board of " << base
            << "; every collective is costed over one NVLink domain at " << fmt_double(t.nvlink_gbs, 0)
            << " GB/s, without the slower links between nodes: the figures are optimistic\n";
}

int64_t flag_or_plan_file(bool flag_given, int64_t flag, bool file_sets, int64_t file_value, int64_t lo,
                          int64_t hi, const std::string& plan_file, const char* key, const char* command) {
  if (flag_given || !file_sets) return flag;
  if (file_value < lo || file_value > hi)
    throw Error(plan_file + ": plan.workload." + key + " = " + std::to_string(file_value) + " is outside what `lathe " +
                command + "` takes (" + std::to_string(lo) + ".." + std::to_string(hi) + "); give the flag");
  return file_value;
}

DType cuda_default_act(const Target& t) {
  return t.supports(DType::bf16) || !t.supports(DType::f16) ? DType::bf16 : DType::f16;
}

void refuse_plan_inputs(const std::string& out, const std::string& flag, const PlanRequest& req,
                        const std::string& plan_file) {
  refuse_input_as_output(out, req.model, flag, "models");
  refuse_input_as_output(out, target_spec_base(req.hardware), flag, "hardware");
  refuse_input_as_output(out, plan_file, flag, "plans");
}

Planned make_plan(const PlanRequest& req, const LowerHooks& hooks, bool per_op) {
  Planned p;
  p.model = load_model(req.model);
  p.target = load_target_spec(req.hardware, req.sets);
  warn_if_measured_by_another_build(p.target);
  warn_if_tp_spans_boards(p.target, req.options.tp);
  warn_if_descriptive_override(req.hardware);
  for (const std::string& s : req.sets) warn_if_descriptive_override(s);
  p.workload = req.workload;
  p.options = req.options;
  // A GGUF file runs in the format its matrices are stored in unless --weights says
  // otherwise (Q8_0 -> int8:g32, Q4_0 -> int4:g32; see docs/gguf.md).
  if (!p.options.weights && gguf::is_gguf_path(req.model)) p.options.weights = gguf::stored_weight_format(req.model);
  if (req.cuda_act && !p.options.act_dtype &&
      build_options(p.model, p.target, p.options, p.workload, Phase::prefill).act == DType::f32)
    p.options.act_dtype = cuda_default_act(p.target);
  BuildOptions pre = build_options(p.model, p.target, p.options, p.workload, Phase::prefill);
  BuildOptions dec = build_options(p.model, p.target, p.options, p.workload, Phase::decode);
  // Checked here as well as in the quantize passes, as UnsupportedOnTarget (whatif's n/a
  // columns); the messages are the passes'.
  const Target& t = p.target;
  auto unsupported = [&](const std::string& why) { throw UnsupportedOnTarget(t.name, why); };
  auto lacks = [&](DType d) { return " has no " + std::string(dtype_name(d)) + " support" + unsupported_reason(t, d); };
  if (!t.supports(pre.act))
    unsupported(std::string("activation dtype ") + std::string(dtype_name(pre.act)) + " is not supported on " + t.name +
                unsupported_reason(t, pre.act));
  if (std::string why = tp_problem(t, p.options.tp); !why.empty()) unsupported(t.name + ": " + why);
  if (const auto& w = p.options.weights; w && !t.supports(w->dtype))
    unsupported("weights " + format_name(*w) + ": " + t.name + lacks(w->dtype));
  if (const auto& k = p.options.kv_dtype; k && !t.supports(*k))
    unsupported("KV " + std::string(dtype_name(*k)) + ": " + t.name + lacks(*k));
  LowerHooks h = hooks;
  h.ideal = req.ideal;
  p.ideal = req.ideal;
  p.prefill_chunk = req.prefill_chunk > 0 && req.prefill_chunk < req.workload.prompt ? req.prefill_chunk : 0;
  p.lowered = lower(build_graph(p.model, pre), build_graph(p.model, dec), p.options, p.target, p.workload, h);
  // Sizes are 64-bit integers: a workload whose tensors would overflow them (a batch of
  // 2^20 at 2^24 tokens) gave negative bytes and "fits". Checked in floating point on
  // the lowered graphs (the largest tensors: the KV state, attention scores where flash
  // attention is off).
  {
    const Bindings x{p.workload.batch, std::max<int64_t>(1, p.workload.prompt),
                     std::max<int64_t>(1, p.workload.final_context())};
    auto too_large = [&](const std::string& what, double n) {
      if (n > 0x1p62)
        throw Error("batch " + std::to_string(p.workload.batch) + ", prompt " + std::to_string(p.workload.prompt) +
                    ", gen " + std::to_string(p.workload.gen) + " is too large to cost: " + what + " would hold " +
                    fmt_elements(n) + " elements (lathe counts sizes in 64-bit integers)");
    };
    for (const Graph* g : {&p.lowered.prefill, &p.lowered.decode})
      for (ValueKind k : {ValueKind::input, ValueKind::weight, ValueKind::state, ValueKind::activation})
        for (ValueId v : g->values_of(k)) {
          double n = 1;
          for (const Dim& d : g->value(v).shape)
            n *= double(d.coef) * std::pow(double(x.B), d.b) * std::pow(double(x.S), d.s) * std::pow(double(x.T), d.t);
          too_large(g->value(v).name, n);
        }
    // The whole cache, every layer's (the footprint's KV term).
    too_large("the KV cache", double(x.B) * double(x.T) * double(p.model.layers) * 2 * double(p.model.kv_heads) *
                                  double(p.model.head_dim));
  }
  // Formats and layouts are applied by passes: asked for with their pass left out of the
  // pipeline, they would be dropped without a word (the plan keeps the model's).
  auto needs = [&](const std::string& what, const std::string& want, const std::string& got, const char* pass) {
    const std::vector<std::string>& pl = p.lowered.pipeline;
    if (want != got && std::find(pl.begin(), pl.end(), pass) == pl.end())
      throw Error(what + " " + want + " needs the " + pass + " pass, which the pass pipeline leaves out (the plan " +
                  "would keep " + got + "); add it to --passes, or drop --no-pass " + pass + " (a plan file's [plan.passes] " +
                  pass + " = false)");
  };
  if (req.options.weights) needs("weights", format_name(*req.options.weights), weights_format(p), "quantize-weights");
  if (req.options.kv_dtype)
    needs("KV dtype", std::string(dtype_name(*req.options.kv_dtype)), p.lowered.decode.attrs.s("kv_dtype"),
          "quantize-kv");
  if (req.options.kv_layout)
    needs("KV layout", kv_layout_name(*req.options.kv_layout), p.lowered.decode.attrs.s("kv_layout"), "kv-layout");
  SimOptions so;
  so.ideal = req.ideal;
  so.per_op = per_op;
  so.prefill_chunk = req.prefill_chunk;
  p.sim = simulate(p.lowered.prefill, p.lowered.decode, p.target, p.workload, so);
  return p;
}

Plan to_plan(const Planned& p) {
  Plan plan;
  plan.model = p.model.name;
  plan.target = p.target;
  plan.workload = p.workload;
  plan.weights_format = p.options.weights ? format_name(*p.options.weights) : "";
  plan.kv_dtype = p.lowered.decode.attrs.s("kv_dtype");
  plan.kv_layout = p.lowered.decode.attrs.s("kv_layout");
  plan.kv_layout_reason = p.lowered.decode.attrs.s("kv_layout_reason");
  plan.act_dtype = p.lowered.decode.attrs.s("act_dtype");
  plan.tp = p.options.tp;
  plan.pipeline = p.lowered.pipeline;
  plan.records = p.lowered.records;
  plan.prefill = p.lowered.prefill;
  plan.decode = p.lowered.decode;
  return plan;
}

std::string describe_target(const Target& t) {
  char buf[256];
  bool bf16 = t.peak_bf16 > 0;  // the 16-bit peak the plan uses by default
  if (t.is_gpu())
    std::snprintf(buf, sizeof buf, "%s (sm_%d, %.0f GB at %.0f GB/s, %.0f TFLOP/s %s)", t.name.c_str(),
                  t.compute_capability, t.memory_gb, t.hbm_bandwidth_gbs, bf16 ? t.peak_bf16 : t.peak_fp16,
                  bf16 ? "bf16" : "fp16");
  else
    std::snprintf(buf, sizeof buf, "%s (%.0f cores, %.0f GB at %.1f GB/s, %.3f TFLOP/s fp32)", t.name.c_str(),
                  t.sm_count, t.memory_gb, t.hbm_bandwidth_gbs, t.peak_fp32);
  return buf;
}

std::string weights_format(const Planned& p) {
  const std::optional<Format> f = layer_weight_format(p.lowered.decode);
  return f ? format_name(*f) : "?";
}

std::string describe_options(const Planned& p) {
  const Graph& d = p.lowered.decode;
  std::string weights = weights_format(p);
  return "weights " + weights + ", KV " + d.attrs.s("kv_dtype") + " " + d.attrs.s("kv_layout") + ", act " +
         d.attrs.s("act_dtype") + ", tp " + std::to_string(p.options.tp) + "; " +
         std::to_string(p.lowered.pipeline.size()) + (p.lowered.pipeline.size() == 1 ? " pass" : " passes");
}

std::string oom_message(const Planned& p) {
  const MemoryFootprint& m = p.sim.mem;
  // What could help when not even batch 1 fits: a smaller weight format only where the
  // weights are not 4-bit already; where the activations of a long prompt outweigh the
  // KV cache, a shorter prompt (prefill runs in one pass).
  const std::optional<Format> wf = layer_weight_format(p.lowered.decode);
  const bool four_bit = wf && wf->dtype == DType::int4;
  const std::string weights_hint = four_bit ? " (even the weights do not fit: try --tp)"
                                            : " (even the weights do not fit: try int4 weights or --tp)";
  const std::string batch1_hint = m.activations > m.kv && m.activations > m.weights
                                      ? " (not even batch 1: the prefill's activations are the largest part; "
                                        "try a shorter prompt or --tp)"
                                      : " (not even batch 1: try a shorter context, a smaller KV dtype or --tp)";
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "batch %lld does not fit on %s: needs %s of %s, %s too much (weights %s, KV %s, activations %s); "
                "the largest batch that fits at this context is %lld%s",
                (long long)p.workload.batch, p.target.name.c_str(), human_bytes(m.total).c_str(),
                human_bytes(m.capacity).c_str(), human_bytes(m.total - m.capacity).c_str(),
                human_bytes(m.weights).c_str(), human_bytes(m.kv).c_str(),
                human_bytes(m.activations).c_str(), (long long)m.max_batch,
                m.max_batch > 0 ? "" : m.weights >= m.capacity ? weights_hint.c_str() : batch1_hint.c_str());
  return buf;
}

// The built-in hardware spec that describes a detected GPU (for predictions).
std::string builtin_target_for(const CudaDeviceInfo& d) {
  std::string n = d.name;
  if (n.find("H200") != std::string::npos) return "h200";
  if (n.find("H100") != std::string::npos) return "h100-sxm";
  if (n.find("A100") != std::string::npos) return d.memory_gb > 50 ? "a100-80g" : "a100-40g";
  if (n.find("L4") != std::string::npos) return "l4";
  if (n.find("4090") != std::string::npos) return "rtx-4090";
  if (n.find("Orin") != std::string::npos) return "jetson-agx-orin-64g";
  std::cerr << "lathe: warning: no built-in spec for " << n << "; predictions use h100-sxm (pass --hw)\n";
  return "h100-sxm";
}

}  // namespace lathe::cli
