// lathe tune: time candidate kernel parameters on the real backend and store the
// best per (kernel kind, shape) in a tuning file that `lathe compile --tuning` and
// `lathe run --tuning` read (codegen/tuning.h, runtime/tune.h).
#include <iostream>
#include <nlohmann/json.hpp>

#include "ir/host.h"
#include "cli/common.h"
#include "cli/planning.h"
#include "cli/scenario_args.h"
#include "ir/assert.h"
#include "runtime/cpu/probe.h"
#include "runtime/cpu/session.h"
#include "runtime/tune.h"
#include "runtime/cuda/cuda_api.h"

namespace lathe::cli {

namespace {

struct TuneArgs {
  std::string model, hardware = "cpu-host", backend = "cpu", out, format = "text", cache_dir;
  int64_t batch = 1, prompt = 128, gen = 16;
  bool hw_given = false, batch_given = false, prompt_given = false, gen_given = false;
  PlanFlags plan;
  int threads = 0, reps = 3, steps = 8;
};

std::string params_text(const std::map<std::string, int64_t>& p) {
  if (p.empty()) return "default";
  std::string s;
  for (const auto& [k, v] : p) s += (s.empty() ? "" : " ") + k.substr(5) + "=" + std::to_string(v);
  return s;
}

int run_tune(const TuneArgs& args) {
  TuneArgs a = args;  // MODEL from the --plan file when not given, as in run
  if (a.model.empty() && !a.plan.plan_file.empty()) a.model = a.plan.plan_spec().model.value_or("");
  if (a.model.empty()) throw Error("no MODEL given (as an argument or in the --plan file)");
  if (a.backend != "cpu" && a.backend != "cuda")
    throw Error("--backend: expected cpu or cuda, got '" + a.backend + "'");
  const bool cuda = a.backend == "cuda";
  if (a.out.empty()) throw Error("-o FILE is required (the tuning file to write)");
  check_output_file(a.out);
  // A --plan file's hardware and workload stand where HW and the flags are not given.
  PlanSpec spec = a.plan.plan_spec();
  std::string hw = a.hardware;
  const bool hw_from_file = !a.hw_given && spec.hardware.has_value();
  if (hw_from_file) hw = *spec.hardware;
  {
    PlanRequest inputs;
    inputs.model = a.model;
    inputs.hardware = hw;  // the plan file's where HW is not given
    refuse_plan_inputs(a.out, "-o", inputs, a.plan.plan_file);
  }
  if (cuda) {
    std::string why;
    if (!CudaApi::device_available(&why)) throw Error("--backend cuda: " + why);
    if (hw == "cpu-host" && !hw_from_file) hw = builtin_target_for(CudaApi(0).device());
  } else if (!CpuJit::available()) {
    throw Error("this lathe was built without Clang/LLVM: the CPU backend cannot run");
  }
  const std::string& f = a.plan.plan_file;
  const int64_t batch =
      flag_or_plan_file(a.batch_given, a.batch, spec.batch_given, spec.workload.batch, 1, 256, f, "batch", "tune");
  const int64_t prompt = flag_or_plan_file(a.prompt_given, a.prompt, spec.prompt_given, spec.workload.prompt, 1,
                                           int64_t(1) << 16, f, "prompt", "tune");
  const int64_t gen = flag_or_plan_file(a.gen_given, a.gen, spec.gen_given, spec.workload.gen, 2, int64_t(1) << 16, f,
                                        "gen", "tune");
  PlanRequest req;
  req.model = a.model;
  req.hardware = hw;
  req.options = spec.options;
  if (!req.options.act_dtype) req.options.act_dtype = cuda ? DType::bf16 : DType::f32;
  if (cuda && *req.options.act_dtype != DType::bf16 && *req.options.act_dtype != DType::f16)
    throw Error("--act: the CUDA backend computes in bf16 or f16 activations (got " +
                std::string(dtype_name(*req.options.act_dtype)) + ")");
  req.workload = {batch, prompt, gen};  // gen >= 2: a decode step to time
  LowerHooks hooks;
  hooks.record = false;
  Planned p = make_plan(req, hooks, false);
  for (const std::string& w : check_workload(p.model, p.workload)) std::cerr << "lathe: warning: " << w << "\n";
  if (const int64_t room = p.workload.gen - 1; a.steps > room)
    std::cerr << "lathe tune: warning: --steps " << a.steps << " is more than the " << room << " decode step"
              << (room == 1 ? "" : "s") << " of a " << p.workload.gen << "-token generation (--gen); timing " << room
              << "\n";
  Plan plan = to_plan(p);
  check_fits_in_memory(plan);
  int threads = a.threads > 0 ? a.threads : available_cpus();
  WeightStore weights =
      WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(1), threads);
  TuneOptions o;
  o.threads = threads;
  o.reps = a.reps;
  o.decode_steps = a.steps;
  if (a.format != "json")
    std::cerr << "lathe tune: timing candidate kernel parameters of " << p.model.name << " on "
              << (cuda ? "the GPU" : "the CPU (" + std::to_string(threads) + " threads)") << "...\n";
  TuneResult r;
  {
    Progress progress("lathe tune: sessions");  // on a terminal; cleared before the report
    o.progress = [&](int done, int total) { progress.update(double(done) / total); };
    if (cuda) {
      r = tune_cuda(plan, weights, a.cache_dir.empty() ? "" : a.cache_dir + "/cuda", o);
    } else {
      CpuJit jit(JitOptions{a.cache_dir, true});
      r = tune_cpu(plan, weights, jit, o);
    }
  }
  write_file_atomic(a.out, tuning_to_json(r.file));
  auto gain = [](double d, double t) { return t > 0 ? d / t : 0.0; };
  std::ostream& os = report_stream(a.out);  // stderr when -o is stdout
  if (a.format == "json") {
    nlohmann::json j = nlohmann::json::parse(tuning_to_json(r.file));
    j["all"] = nlohmann::json::array();
    for (const TuningEntry& e : r.all) {
      nlohmann::json cands = nlohmann::json::array();
      for (const auto& [params, us] : e.candidates) cands.push_back({{"params", params}, {"us", us}});
      j["all"].push_back({{"kind", e.kind},
                          {"shape", e.shape},
                          {"params", e.params},
                          {"default_us", e.default_us},
                          {"best_us", e.best_us},
                          {"candidates", cands}});
    }
    j["compile_s"] = r.compile_s;
    j["margin"] = o.margin;
    j["options"] = describe_options(p);
    if (r.file.entries.empty() && r.discarded.empty())
      j["plan"] = nullptr;  // nothing tuned: the plan is unchanged
    else
      j["plan"] = {{"prefill_default_ms", r.prefill_default_s * 1e3},
                   {"prefill_tuned_ms", r.prefill_tuned_s * 1e3},
                   {"decode_default_ms", r.decode_default_s * 1e3},
                   {"decode_tuned_ms", r.decode_tuned_s * 1e3},
                   {"prefill_gain", gain(r.prefill_default_s, r.prefill_tuned_s)},
                   {"decode_gain", gain(r.decode_default_s, r.decode_tuned_s)}};
    // Winners the whole-plan comparison rejected (the file has no entries then).
    j["discarded"] = nlohmann::json::array();
    for (const TuningEntry& e : r.discarded)
      j["discarded"].push_back({{"kind", e.kind}, {"shape", e.shape}, {"params", e.params}});
    j["sessions"] = r.sessions;
    j["kernels_compiled"] = r.kernels_compiled;
    j["output"] = a.out;
    os << j.dump(2) << "\n";
    return 0;
  }
  os << "lathe tune: " << p.model.name << " (" << describe_options(p) << "), batch "
            << batch << ", prompt " << prompt << " on " << r.file.machine << "\n";
  os << "  " << r.sessions << " sessions, " << r.kernels_compiled << " kernel variants compiled ("
            << fmt_double(r.compile_s, 1) << (cuda ? " s of NVRTC)\n\n" : " s of JIT)\n\n");
  Table t({"kernel", "shape", "default us", "best us", "best", "gain", "candidates (us)"});
  for (const TuningEntry& e : r.all) {
    std::string cands;
    for (const auto& [params, us] : e.candidates)
      cands += (cands.empty() ? "" : ", ") + params_text(params) + " " + fmt_double(us, 0);
    t.add({e.kind, e.shape, fmt_double(e.default_us, 1), fmt_double(e.best_us, 1),
           params_text(e.params), fmt_double(gain(e.default_us, e.best_us), 2) + "x", cands});
  }
  os << t.text("  ");
  if (r.file.entries.empty() && r.discarded.empty())
    os << "\n  no candidate beat the defaults by more than " << fmt_double(o.margin * 100, 0)
              << "% on this machine: the tuning file has no entries and leaves plans as they are\n";
  else
    os << "\n  whole plan, default vs tuned (medians of alternating runs): prefill "
              << fmt_double(r.prefill_default_s * 1e3, 2) << " -> "
              << fmt_double(r.prefill_tuned_s * 1e3, 2) << " ms ("
              << fmt_double(gain(r.prefill_default_s, r.prefill_tuned_s), 2) << "x), decode step "
              << fmt_double(r.decode_default_s * 1e3, 3) << " -> "
              << fmt_double(r.decode_tuned_s * 1e3, 3) << " ms ("
              << fmt_double(gain(r.decode_default_s, r.decode_tuned_s), 2) << "x)\n";
  if (!r.discarded.empty())
    os << "  the " << r.discarded.size() << " per-kernel winner" << (r.discarded.size() == 1 ? "" : "s")
              << " made the plan slower as a whole (by more than " << fmt_double(o.margin * 100, 0)
              << "% over a prefill and its decode steps), so the tuning file keeps the defaults; on a busy or "
                 "throttling machine, rerun with more --reps\n";
  os << "  wrote " << a.out << " (" << r.file.entries.size() << " tuned kernel"
            << (r.file.entries.size() == 1 ? "" : "s")
            << "); use it with `lathe compile ... --tuning " << a.out
            << "` or `lathe run ... --tuning " << a.out << "`\n";
  return 0;
}

}  // namespace

// Applies a tuning file to a lowered plan (compile, run); returns a note for the user.
std::string apply_tuning_file(Graph& prefill, Graph& decode, const std::string& path,
                              const std::string& backend, std::string* file_backend) {
  TuningFile t = tuning_from_json(read_file(path), path);
  if (file_backend) *file_backend = t.backend;
  if (!backend.empty() && t.backend != backend)
    throw Error(path + ": tuning for the " + t.backend + " backend; this run uses --backend " + backend);
  int n = 0;
  std::vector<std::string> unmatched;
  for (const TuningEntry& e : t.entries) {
    int m = apply_params(prefill, e.kind, e.shape, e.params, t.backend) +
            apply_params(decode, e.kind, e.shape, e.params, t.backend);
    if (m == 0) unmatched.push_back(e.kind + " '" + e.shape + "'");
    n += m;
  }
  std::string note = "applied " + std::to_string(n) + " tuned " + t.backend + " kernel" + (n == 1 ? "" : "s") +
                     " from " + path;
  if (t.backend == "cpu") {
    std::string host = cpu_model_name();
    if (!host.empty() && t.machine.rfind(host, 0) != 0)
      note += " (tuned on " + (t.machine.empty() ? std::string("a machine the file does not name") : t.machine) +
              ", this machine is " + host + ")";
  } else if (!t.machine.empty()) {
    note += " (tuned on " + t.machine + ")";
  }
  if (!unmatched.empty()) {
    note += "; " + std::to_string(unmatched.size()) + " entr" + (unmatched.size() == 1 ? "y" : "ies") +
            " matched no kernel of this plan (another shape, weight format, KV dtype or layout";
    note += t.backend == "cuda" ? "; CUDA decode attention also needs the same KV capacity, cap = prompt + gen): "
                                : "): ";
    for (size_t i = 0; i < unmatched.size() && i < 3; ++i) note += (i ? ", " : "") + unmatched[i];
    if (unmatched.size() > 3) note += ", ...";
  }
  return note;
}

void register_tune(CLI::App& app, Registry& r) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand("tune",
                                     "Time candidate kernel parameters on the real backend; write "
                                     "the best per kernel to a tuning file");
  cmd->add_option("MODEL", a->model, "built-in model name, model TOML or .gguf file (default: the --plan file's model)");
  cmd->add_option("HW", a->hardware,
                  "hardware spec the plan is made for (default cpu-host; with --backend cuda the detected GPU's)");
  cmd->add_option("--backend", a->backend,
                  "cpu (this machine's CPU, default) or cuda (GPU 0: GEMV warps and loads in flight, decode "
                  "attention splits)");
  cmd->add_option("-o,--out", a->out, "tuning file to write (JSON)")->required();
  cmd->add_option("--batch", a->batch, "sequences (default 1)")
      ->check(CLI::Range(int64_t(1), int64_t(256)));
  cmd->add_option("--prompt-tokens", a->prompt, "prompt length of the timed prefill (default 128)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd->add_option("--gen", a->gen, "plan capacity in generated tokens (default 16)")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 16));
  a->plan.add_to(cmd);
  // Runs pick the activation dtype by backend (the kernels' own), not by target.
  cmd->get_option("--act")->description(
      "activation dtype: f32, f16, bf16 (default: f32 with --backend cpu, bf16 with --backend cuda)");
  cmd->add_option("--threads", a->threads, "worker threads (default: the CPUs this process may use: its affinity mask and cgroup quota)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--reps", a->reps, "repetitions per measurement (default 3)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--steps", a->steps, "decode steps per repetition (default 8)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--cache-dir", a->cache_dir, kCacheDirHelp);
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, a, cmd] {
    a->hw_given = cmd->get_option("HW")->count() > 0;
    a->batch_given = cmd->get_option("--batch")->count() > 0;
    a->prompt_given = cmd->get_option("--prompt-tokens")->count() > 0;
    a->gen_given = cmd->get_option("--gen")->count() > 0;
    r.action = [a] { return run_tune(*a); };
  });
}

}  // namespace lathe::cli
