// lathe compile: run the pass pipeline and write a plan directory (plan.json, the
// lowered IR of both phases, a per-pass report).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "cli/common.h"
#include "cli/emit.h"
#include "cli/planning.h"
#include "frontend/builder.h"
#include "frontend/specs.h"
#include "frontend/sweep.h"
#include "codegen/cuda/emit_cuda.h"
#include "codegen/plan.h"
#include "ir/assert.h"
#include "ir/text.h"

namespace lathe::cli {

namespace {

struct CompileArgs {
  std::string model, hardware, out;
  WorkloadFlags workload;
  PlanFlags plan;
  std::vector<std::string> sets, print_after, tuning;
  bool print_after_change = false, report = false;
  std::string dump_dir, emit;
  bool nvrtc = false;
  std::string format = "text";
};

std::string md_table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows) {
  std::string s = "|";
  for (const auto& h : headers) s += " " + h + " |";
  s += "\n|";
  for (size_t i = 0; i < headers.size(); ++i) s += i == 0 ? "---|" : "---:|";
  s += "\n";
  for (const auto& r : rows) {
    s += "|";
    for (const auto& c : r) s += " " + c + " |";
    s += "\n";
  }
  return s;
}

}  // namespace

std::string pass_report_md(const Planned& p) {
  const Graph& d = p.lowered.decode;
  std::string s = "# lathe plan: " + p.model.name + " on " + p.target.name + "\n\n";
  s += "- target: " + describe_target(p.target) + "\n";
  s += "- workload: batch " + std::to_string(p.workload.batch) + ", prompt " + std::to_string(p.workload.prompt) +
       ", generate " + std::to_string(p.workload.gen) + "\n";
  s += "- plan: " + describe_options(p) + "\n";
  std::string pipe;
  for (const std::string& x : p.lowered.pipeline) pipe += (pipe.empty() ? "" : ", ") + x;
  s += "- pipeline: " + (pipe.empty() ? std::string("(none)") : pipe) + "\n";
  if (p.ideal) s += "- costed: ideal roofline (no efficiency factors, no launch overhead), as the sweep ranked it\n";
  s += "- KV layout: " + d.attrs.s("kv_layout") + " (" + d.attrs.s("kv_layout_reason", "not chosen by a pass") + ")\n\n";
  s += "## What each pass bought (simulated, cumulative)\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const PassRecord& r : p.lowered.records)
    rows.push_back({r.pass, r.pass == "input" ? "" : (r.changed ? "yes" : "no"), std::to_string(r.prefill_kernels),
                    std::to_string(r.decode_kernels), fmt_double(r.prefill_bytes / 1e9, 3),
                    fmt_double(r.decode_bytes_per_step / 1e6, 2), fmt_double(r.prefill_s * 1e3, 2),
                    fmt_double(r.tpot_s * 1e3, 3), fmt_double(r.weight_bytes / 1e9, 3), fmt_double(r.kv_bytes / 1e9, 3),
                    fmt_double(r.activation_bytes / 1e6, 2), r.note});
  s += md_table({"pass", "changed", "prefill kernels", "decode kernels/step", "prefill GB moved", "decode MB/step",
                 "prefill ms", "TPOT ms", "weights GB", "KV GB", "activations MB", "note"},
                rows);
  // Kernel mix of the final plan.
  s += "\n## Kernels of the final plan\n\n";
  struct Agg {
    int count = 0;
    double time = 0;
  };
  for (Phase ph : {Phase::prefill, Phase::decode}) {
    std::map<std::string, Agg> agg;
    double total = 0;
    for (const OpRow& o : p.sim.ops)
      if (o.phase == ph) {
        agg[o.kernel].count++;
        agg[o.kernel].time += o.time_s;
        total += o.time_s;
      }
    std::vector<std::pair<std::string, Agg>> v(agg.begin(), agg.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.time > b.second.time; });
    std::vector<std::vector<std::string>> kr;
    for (auto& [k, a] : v)
      kr.push_back({k, std::to_string(a.count), fmt_double(a.time * 1e3, 3),
                    fmt_double(total > 0 ? 100 * a.time / total : 0, 1) + "%"});
    s += std::string("### ") + (ph == Phase::prefill ? "prefill" : "decode (all steps)") + "\n\n";
    s += md_table({"kernel", "count", "ms", "share"}, kr) + "\n";
  }
  return s;
}

namespace {
// --dump-dir: NN_pass.phase.ir files and this marker.
constexpr const char* kDumpMarker = "lathe-dumps.txt";
OutputDir dump_output_dir() {
  return {kDumpMarker,
          [](const std::string& e) {
            return e.size() > 6 && std::isdigit((unsigned char)e[0]) && std::isdigit((unsigned char)e[1]) &&
                   e[2] == '_' && e.ends_with(".ir");
          },
          "lathe's IR dumps", " (dumps of an earlier lathe, marked by a plan.json: remove them)"};
}
}  // namespace


std::map<std::string, std::string> plan_files(const Planned& p) {
  std::map<std::string, std::string> files;
  files["plan.json"] = plan_to_json(to_plan(p));
  files["prefill.ir"] = print_graph(p.lowered.prefill);
  files["decode.ir"] = print_graph(p.lowered.decode);
  files["report.md"] = pass_report_md(p);
  return files;
}

namespace {

int run_compile(const CompileArgs& a) {
  PlanSpec spec = a.plan.plan_spec();
  PlanRequest req;
  req.model = !a.model.empty() ? a.model : spec.model.value_or("");
  req.hardware = !a.hardware.empty() ? a.hardware : spec.hardware.value_or("");
  if (req.model.empty() || req.hardware.empty()) throw Error("compile needs MODEL and HW (arguments or the plan file)");
  req.sets = a.sets;
  req.workload = a.workload.resolve(spec.workload);
  req.options = spec.options;
  if (a.out.empty()) throw Error("-o DIR is required");
  check_output_dir(a.out, plan_dir_entries());
  if (!a.dump_dir.empty()) {
    std::error_code ec;
    if (std::filesystem::weakly_canonical(output_dir_path(a.dump_dir), ec) ==
        std::filesystem::weakly_canonical(output_dir_path(a.out), ec))
      throw Error("--dump-dir " + a.dump_dir + ": the same directory as -o (the dumps would replace the plan)");
    check_output_dir(a.dump_dir, {kDumpMarker}, dump_output_dir());
  }
  for (const std::string& pa : a.print_after)
    if (pa != "all" && pa != "input" && !find_pass(pa)) throw Error("--print-ir-after: unknown pass '" + pa + "'");
  if (!a.emit.empty() && a.emit != "cpu" && a.emit != "cuda" && a.emit != "none")
    throw Error("--emit: expected cpu or cuda, got '" + a.emit + "'");

  req.cuda_act = a.emit == "cuda";  // CUDA kernels compute in bf16 or f16 activations
  std::map<std::string, std::string> dumps;
  LowerHooks hooks;
  hooks.after_pass = [&](const std::string& pass, int index, const Graph& g, bool changed) {
    bool want = std::find(a.print_after.begin(), a.print_after.end(), pass) != a.print_after.end() ||
                std::find(a.print_after.begin(), a.print_after.end(), "all") != a.print_after.end() ||
                (a.print_after_change && changed && pass != "input");
    if (want)
      std::cout << "# ---- IR after " << pass << " (" << phase_name(g.phase) << ") ----\n" << print_graph(g);
    if (!a.dump_dir.empty()) {
      char name[128];
      std::snprintf(name, sizeof name, "%02d_%s.%s.ir", index, pass.c_str(), std::string(phase_name(g.phase)).c_str());
      dumps[name] = print_graph(g);
    }
  };
  if (a.format == "json" && (a.report || !a.print_after.empty() || a.print_after_change))
    throw Error("--format json prints one JSON object; --report and --print-ir-after* print text (report.md and "
                "--dump-dir keep them as files)");
  // A pass that does not run in this pipeline prints nothing: said rather than exit 0.
  {
    const std::vector<std::string> runs = pipeline_for(req.options);
    std::string list;
    for (const std::string& r : runs) list += (list.empty() ? "" : ",") + r;
    for (const std::string& pa : a.print_after)
      if (pa != "all" && pa != "input" && std::find(runs.begin(), runs.end(), pa) == runs.end())
        throw Error("--print-ir-after " + pa + ": the pass does not run in this pipeline (" +
                    (runs.empty() ? std::string("no passes") : list) + ")");
  }
  Planned p = make_plan(req, hooks, true);
  for (const std::string& w : check_workload(p.model, p.workload)) std::cerr << "lathe: warning: " << w << "\n";
  if (!p.sim.mem.fits) std::cerr << "lathe: warning: " << oom_message(p) << "\n";
  // One file per backend at most: a CPU and a CUDA file never touch each other's kernels.
  std::string tuned;
  std::set<std::string> backends;
  for (const std::string& f : a.tuning) {
    std::string be;
    std::string note = apply_tuning_file(p.lowered.prefill, p.lowered.decode, f, "", &be);
    if (!backends.insert(be).second)
      throw Error("--tuning " + f + ": a second " + be + " tuning file (give at most one per backend)");
    tuned += (tuned.empty() ? "" : "\n  ") + note;
  }

  Plan plan = to_plan(p);
  std::map<std::string, std::string> files = plan_files(p);
  const std::string& report = files["report.md"];
  if (a.nvrtc && a.emit != "cuda") throw Error("--nvrtc goes with --emit cuda");
  if (!a.emit.empty() && a.emit != "none")
    add_emitted_kernels(plan, a.emit, files, a.nvrtc ? p.target.compute_capability : 0);  // validated by the emitter
  if (!a.dump_dir.empty()) {  // the dumps' names are known now: checked before the plan is written
    std::vector<std::string> names{kDumpMarker};
    for (const auto& [name, text] : dumps) names.push_back(name);
    check_output_dir(a.dump_dir, names, dump_output_dir());
  }
  write_dir_atomic(a.out, files);
  if (!a.dump_dir.empty()) write_dir_atomic(a.dump_dir, [&] {
      auto d = dumps;
      // Marks the folder as lathe's, so a rerun may replace the dumps in it.
      d[kDumpMarker] = "IR after every pass, written by `lathe compile --dump-dir` (NN_pass.phase.ir)\n";
      return d;
    }(), dump_output_dir());
  int kernels = 0;
  for (const auto& [name, text] : files)
    kernels += name.starts_with("kernels/") && (name.ends_with(".cpp") || name.ends_with(".cu"));  // sources only
  if (a.format == "json") {
    nlohmann::json j = {{"output", a.out},
                        {"model", p.model.name},
                        {"hardware", p.target.name},
                        {"options", describe_options(p)},
                        {"kernel_sources", kernels},
                        {"prefill_kernels", p.sim.prefill.kernels},
                        {"decode_kernels_per_step", p.sim.decode.kernels},
                        {"predicted", {{"ttft_ms", p.sim.ttft_s * 1e3}, {"tpot_ms", p.sim.tpot_s * 1e3}}},
                        {"fits", p.sim.mem.fits}};
    j["files"] = nlohmann::json::array();
    for (const auto& [name, text] : files) j["files"].push_back(name);
    j["tuning"] = nlohmann::json::array();
    if (!tuned.empty()) {
      size_t start = 0;
      while (start <= tuned.size()) {
        size_t nl = std::min(tuned.find("\n  ", start), tuned.size());
        j["tuning"].push_back(tuned.substr(start, nl - start));
        start = nl + 3;
      }
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (a.report) std::cout << report << "\n";
  std::cout << "wrote " << a.out << (a.out.ends_with('/') ? "" : "/") << ": plan.json, prefill.ir, decode.ir, report.md";
  if (kernels) std::cout << ", " << kernels << " kernel sources in kernels/";
  if (!tuned.empty()) std::cout << "\n  " << tuned;
  std::cout << "\n  " << p.sim.prefill.kernels << " prefill kernels, " << p.sim.decode.kernels
            << " per decode step; predicted TTFT " << fmt_double(p.sim.ttft_s * 1e3, 2) << " ms, TPOT "
            << fmt_double(p.sim.tpot_s * 1e3, 3) << " ms on " << p.target.name << "\n";
  return 0;
}

}  // namespace

void register_compile(CLI::App& app, Registry& r) {
  auto a = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "Lower a model to a plan directory (plan.json, IR, report, kernels)");
  cmd->add_option("MODEL", a->model, "built-in model name, model TOML, .gguf file, or Hugging Face directory / config.json (or set in --plan)");
  cmd->add_option("HW", a->hardware, "built-in hardware name or hardware TOML; NAME+key=value adds overrides");
  cmd->add_option("-o,--out", a->out, "plan directory to write (replaced atomically)");
  a->workload.add_to(cmd);
  a->plan.add_to(cmd);
  cmd->add_option("--set", a->sets, "override a hardware field: key=value or key=x1.5 (repeatable)");
  cmd->add_option("--tuning", a->tuning,
                  "kernel parameters from `lathe tune -o FILE` (a CPU and/or a CUDA file: repeat the flag)")
      ->check(non_empty());
  cmd->add_flag("--report", a->report, "print the per-pass report (also written to DIR/report.md)");
  cmd->add_option("--print-ir-after", a->print_after, "print the IR after PASS (repeatable; 'all', 'input')");
  cmd->add_flag("--print-ir-after-change", a->print_after_change, "print the IR after every pass that changed it");
  cmd->add_option("--dump-dir", a->dump_dir, "write NN_pass.phase.ir after every pass into DIR")->check(non_empty());
  cmd->add_option("--emit", a->emit, "also write kernel sources: cpu (C++) or cuda (.cu; f32 activations become bf16 unless --act says)")
      ->check(non_empty());
  cmd->add_flag("--nvrtc", a->nvrtc,
                "with --emit cuda: compile every kernel with NVRTC for the target's sm_XX and report registers, "
                "shared memory and spills (kernels/cuda/nvrtc_report.md)");
  cmd->add_option("--format", a->format, "text or json (what was written and the predicted TTFT/TPOT)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, a] { r.action = [a] { return run_compile(*a); }; });
}

}  // namespace lathe::cli
