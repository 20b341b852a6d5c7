// lathe run: execute a plan for real (prefill + decode) and set the measured time of
// every kernel beside its prediction. lathe probe: measure this machine.
#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "ir/host.h"
#include "cli/common.h"
#include "cli/planning.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/tokenizer.h"
#include "codegen/kernels_id.h"
#include "frontend/sweep.h"
#include "cli/run_weights.h"
#include "ir/assert.h"
#include "runtime/cpu/probe.h"
#include "runtime/cpu/session.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_probe.h"
#include "runtime/cuda/cuda_session.h"
#include "runtime/gguf_weights.h"
#include "runtime/sampler.h"

namespace lathe::cli {

namespace {

struct RunArgs {
  std::string model, backend = "cpu", hw = "cpu-host", tokens, prompt_text, logits_out, format = "table", cache_dir, tuning;
  int64_t prompt_tokens = 16, batch = 1, gen = 16;
  // Which of --prompt-tokens, --gen, --batch and --prompt were given (a compiled plan's
  // own workload fills the others).
  bool prompt_tokens_given = false, gen_given = false, batch_given = false, prompt_text_given = false, hw_given = false;
  int repeat = 1;
  PlanFlags plan;
  std::vector<std::string> sets;
  int threads = 0;
  uint64_t seed = 1, sample_seed = 0;
  double temperature = 0, top_p = 1;
  int top_k = 0;
  bool per_op = false, no_cache = false;
};

std::vector<std::vector<int32_t>> parse_tokens(const std::string& s) {
  // Commas separate ids (blanks around them are fine); an empty id ("1,,2", "1,") is an
  // error, as in the other list flags.
  std::string packed;
  for (char c : s)
    if (c != ' ') packed += c;
  for (const char* bad : {",,", ",;", ";,"})
    if (packed.find(bad) != std::string::npos) throw Error("--tokens: empty item in '" + s + "'");
  if (!packed.empty() && (packed.front() == ',' || packed.back() == ','))
    throw Error("--tokens: empty item in '" + s + "'");
  std::vector<std::vector<int32_t>> out(1);
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    try {
      size_t used = 0;
      long long v = std::stoll(cur, &used);
      if (used != cur.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(cur);
      out.back().push_back(int32_t(v));
    } catch (...) {
      throw Error("--tokens: '" + cur + "' is not a token id");
    }
    cur.clear();
  };
  for (char c : s) {
    if (c == ',' || c == ' ') flush();
    else if (c == ';') {
      flush();
      out.emplace_back();
    } else cur += c;
  }
  flush();
  for (const auto& seq : out)
    if (seq.empty()) throw Error("--tokens: empty sequence (write ids as 1,2,3 and separate sequences with ';')");
  return out;
}


std::string ms(double s) { return fmt_double(s * 1e3, s * 1e3 < 10 ? 3 : 2); }


// The backends behind one interface for `lathe run`.
struct Backend {
  std::shared_ptr<void> keep;  // owns the session (and its JIT)
  std::function<StepResult(const std::vector<std::vector<int32_t>>&)> prefill;
  std::function<StepResult(const std::vector<int32_t>&)> decode;
  std::function<const std::vector<KernelTiming>&()> timings;
  std::string device;
  int threads = 0, compiled = 0, cached = 0;
  double compile_s = 0;
};

Backend cpu_backend(const Plan& plan, const WeightStore& weights, const RunArgs& a, int threads) {
  struct Own {
    explicit Own(const JitOptions& o) : jit(o) {}
    CpuJit jit;
    std::unique_ptr<CpuSession> s;
  };
  auto own = std::make_shared<Own>(JitOptions{a.cache_dir, !a.no_cache});
  SessionOptions so;
  so.threads = threads;
  own->s = std::make_unique<CpuSession>(plan, weights, own->jit, so);
  CpuSession* s = own->s.get();
  Backend b;
  b.keep = own;
  b.prefill = [s](const auto& p) { return s->prefill(p); };
  b.decode = [s](const auto& t) { return s->decode(t); };
  b.timings = [s]() -> const std::vector<KernelTiming>& { return s->timings(); };
  b.threads = s->threads();
  b.device = "the CPU (" + std::to_string(b.threads) + " threads)";
  b.compiled = s->kernels_compiled();
  b.cached = s->kernels_cached();
  b.compile_s = s->compile_s();
  return b;
}

Backend cuda_backend(const Plan& plan, const WeightStore& weights, const RunArgs& a) {
  CudaSessionOptions o;
  o.time_kernels = a.per_op;  // per-kernel events; otherwise decode runs as CUDA graphs
  o.nvrtc.cache_dir = a.cache_dir.empty() ? "" : a.cache_dir + "/cuda";
  o.nvrtc.disk_cache = !a.no_cache;
  auto s = std::make_shared<CudaSession>(plan, weights, o);
  Backend b;
  b.keep = s;
  CudaSession* p = s.get();
  b.prefill = [p](const auto& x) { return p->prefill(x); };
  b.decode = [p](const auto& t) { return p->decode(t); };
  b.timings = [p]() -> const std::vector<KernelTiming>& { return p->timings(); };
  b.device = p->device_name() + " (sm_" + std::to_string(p->device_arch()) + ")";
  b.compiled = p->kernels_compiled();
  b.cached = p->kernels_cached();
  b.compile_s = p->compile_s();
  return b;
}

int run_run(const RunArgs& args) {
  // MODEL from the --plan file when not given (it said "MODEL is required"), as
  // simulate and compile take it; a MODEL given wins, as flags do.
  RunArgs a = args;
  if (a.model.empty() && !a.plan.plan_file.empty()) a.model = a.plan.plan_spec().model.value_or("");
  if (a.model.empty()) throw Error("no MODEL given (as an argument or in the --plan file)");
  ReportAwayFromOutput away(a.logits_out);  // --logits /dev/stdout: the logits alone on stdout
  if (a.backend != "cpu" && a.backend != "cuda")
    throw Error("--backend: unknown backend '" + a.backend + "' (expected cpu or cuda)");
  const bool cuda = a.backend == "cuda";
  // A --plan file's hardware and workload stand where the flags are not given, as in
  // simulate and compile (run used only the flags).
  const PlanSpec file_spec = a.plan.plan_spec();
  std::string hw = a.hw;
  const bool hw_from_file = !a.hw_given && file_spec.hardware.has_value();
  if (hw_from_file) hw = *file_spec.hardware;
  if (cuda) {
    std::string why;
    if (!CudaApi::device_available(&why)) throw Error("--backend cuda: " + why);
    if (hw == "cpu-host" && !hw_from_file) hw = builtin_target_for(CudaApi(0).device());
  }
  if (!a.logits_out.empty()) {  // before the run, not after it
    PlanRequest inputs;
    inputs.model = a.model;
    inputs.hardware = hw;
    refuse_plan_inputs(a.logits_out, "--logits", inputs, a.plan.plan_file);
    refuse_input_as_output(a.logits_out, a.tuning, "--logits");
    check_output_file(a.logits_out);
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  // A directory without weights is a compiled plan; a JSON file is its plan.json when
  // it is named so or says so ("lathe_plan"), else a Hugging Face config.json (run
  // with synthetic weights, like a model spec).
  auto is_plan_json = [&] {
    if (!a.model.ends_with(".json") || !fs::exists(a.model, ec)) return false;
    if (fs::path(a.model).filename() == "plan.json") return true;
    // Unparseable JSON of another name goes to the config reader, which says where it
    // breaks (it was called a bad plan file).
    nlohmann::json j = nlohmann::json::parse(read_file(a.model), nullptr, false);
    return !j.is_discarded() && (!j.is_object() || j.contains("lathe_plan"));
  };
  // A built-in model name keeps precedence over a directory of that name (`run tiny`
  // beside a plan compiled to ./tiny ran that plan), as everywhere else.
  const bool from_plan = !is_builtin_name("models", a.model) &&
                         ((fs::is_directory(a.model, ec) && !model_has_weights(a.model)) || is_plan_json());
  std::vector<std::vector<int32_t>> prompts;
  if (!a.tokens.empty()) prompts = parse_tokens(a.tokens);
  // A GGUF file brings its weights and, usually, its vocabulary.
  std::shared_ptr<const gguf::File> gguf_file;
  std::optional<gguf::Tokenizer> tokenizer;
  if (!from_plan && gguf::is_gguf_path(a.model)) {
    gguf_file = gguf::File::open(a.model);
    for (const std::string& n : gguf::model_notes(*gguf_file)) std::cerr << "lathe: warning: " << n << "\n";
    if (gguf::has_vocab(*gguf_file)) tokenizer.emplace(gguf::read_vocab(*gguf_file));
  }
  if (a.prompt_text_given && a.prompt_text.empty()) throw Error("--prompt: the text is empty");
  if (a.temperature == 0 && (a.top_k > 0 || a.top_p < 1))
    std::cerr << "lathe: warning: --top-k and --top-p shape sampling, and decoding is greedy without "
                 "--temperature: they are not applied\n";
  if (!a.prompt_text.empty()) {
    if (!tokenizer)
      throw Error("--prompt: needs a .gguf model with a vocabulary (tokenizer.ggml.*); give token ids with --tokens");
    prompts = {tokenizer->encode(a.prompt_text, tokenizer->vocab().add_bos)};
    if (prompts[0].empty()) throw Error("--prompt: the text gives no tokens");
  }

  Plan plan;
  std::string model_name;
  // A compiled plan's workload sets the defaults of --prompt-tokens, --gen and --batch
  // (run's own defaults, 16 and 16, did not fit a plan compiled for 8 tokens).
  int64_t run_batch = a.batch, run_prompt = a.prompt_tokens, run_gen = a.gen;
  if (!from_plan) {
    const std::string& f = a.plan.plan_file;
    const PlanSpec& s = file_spec;
    run_batch = flag_or_plan_file(a.batch_given, a.batch, s.batch_given, s.workload.batch, 1, kMaxRunBatch, f, "batch", "run");
    run_prompt = flag_or_plan_file(a.prompt_tokens_given, a.prompt_tokens, s.prompt_given, s.workload.prompt, 1,
                                   kMaxRunTokens, f, "prompt", "run");
    // At least 1, as the flag (a file's gen = 0 ran as 1).
    run_gen = std::max<int64_t>(1, flag_or_plan_file(a.gen_given, a.gen, s.gen_given, s.workload.gen, 1, kMaxRunTokens,
                                                     f, "gen", "run"));
  }
  if (from_plan) {
    // Its options are fixed at compile time: flags that would change them are refused
    // rather than ignored.
    if (std::string f = a.plan.given(); !f.empty())
      throw Error(f + ": " + a.model + " is a compiled plan, whose options were fixed by `lathe compile`; "
                  "compile again with them (or run the model itself)");
    if (!a.sets.empty()) throw Error("--set: " + a.model + " is a compiled plan; its target was fixed by `lathe compile`");
    if (a.hw_given)
      throw Error("--hw: " + a.model + " is a compiled plan; its predictions are for the target it was compiled for "
                  "(compile again with another target, or run the model itself)");
    plan = load_plan_dir(a.model);
    warn_if_measured_by_another_build(plan.target);
    model_name = plan.model;
    if (!a.prompt_tokens_given) run_prompt = plan.workload.prompt;
    if (!a.gen_given) run_gen = std::max<int64_t>(1, plan.workload.gen);
    if (!a.batch_given) run_batch = plan.workload.batch;
  } else {
    const PlanSpec& spec = file_spec;
    PlanRequest req;
    req.model = a.model;
    req.hardware = hw;
    req.sets = a.sets;
    req.options = spec.options;
    if (!req.options.act_dtype)
      req.options.act_dtype = cuda ? cuda_default_act(load_target_spec(hw, a.sets)) : DType::f32;
    int64_t sequences = prompts.empty() ? run_batch : int64_t(prompts.size());
    int64_t longest = run_prompt;
    if (!prompts.empty()) {
      longest = 0;
      for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
    }
    req.workload = {sequences, longest, run_gen};
    LowerHooks hooks;
    hooks.record = false;
    Planned p = make_plan(req, hooks, false);
    for (const std::string& w : check_workload(p.model, p.workload)) std::cerr << "lathe: warning: " << w << "\n";
    plan = to_plan(p);
    model_name = p.model.name;
  }
  if (plan.target.is_gpu() != cuda)
    std::cerr << "lathe: warning: the kernels run on the " << a.backend << " backend but the predictions are for "
              << plan.target.name << ", a " << (plan.target.is_gpu() ? "GPU" : "CPU")
              << "; predicted and measured times describe different machines\n";
  std::string tuning_note;
  if (!a.tuning.empty()) {
    tuning_note = apply_tuning_file(plan.prefill, plan.decode, a.tuning, a.backend);
    std::cerr << "lathe run: " << tuning_note << "\n";
  }
  int64_t vocab = plan.decode.attrs.i("vocab");
  // Before a prompt id or a byte of weights is allocated (a batch of 4096 x 1M-token
  // prompts filled 6 GB before this check refused it; a bf16 plan built 2.7 GB of
  // weights before the CPU kernels refused its activations).
  if (!cuda && plan.act_dtype != "f32")
    throw Error(a.model + ": the CPU backend computes in f32 activations (the plan has " + plan.act_dtype +
                "; compile with --act f32)");
  // A checkpoint is held to its config.json first: a config whose sizes disagree with
  // the tensors is named as such, not as a plan that does not fit.
  std::string weights_from;
  WeightSource source;
  if (!gguf_file) source = run_weight_source(a.model, plan, a.seed, &weights_from);
  check_fits_in_memory(plan);
  if (from_plan && prompts.empty()) {
    // Checked before the synthetic prompts are built (a batch of 4096 x 1M-token prompts
    // took 4 GB before the runtime refused it).
    const int64_t slots = plan.prefill.attrs.i("B"), max_new = plan.prefill.attrs.i("S");
    if (run_batch > slots)
      throw Error("--batch " + std::to_string(run_batch) + ": " + a.model + " was compiled for " +
                  std::to_string(slots) + " sequences; recompile the plan with --batch " + std::to_string(run_batch));
    if (run_prompt > max_new)
      throw Error("--prompt-tokens " + std::to_string(run_prompt) + ": " + a.model + " was compiled for prompts of " +
                  std::to_string(max_new) + " tokens; recompile the plan with a longer --prompt");
  }
  if (prompts.empty())
    for (int64_t s = 0; s < run_batch; ++s) {
      std::vector<int32_t> t;
      for (int64_t i = 0; i < run_prompt; ++i) t.push_back(int32_t((i * 7919 + 13 + s * 101) % vocab));
      prompts.push_back(t);
    }
  if (from_plan) {  // before a kernel runs: the cache holds each prompt and gen - 1 decode inputs
    const int64_t capacity = plan.decode.attrs.i("final_context");
    for (size_t s = 0; s < prompts.size(); ++s)
      if (int64_t need = int64_t(prompts[s].size()) + run_gen - 1; need > capacity)
        throw Error("gen " + std::to_string(run_gen) + ": sequence " + std::to_string(s) + " needs " +
                    std::to_string(need) + " positions (" + std::to_string(prompts[s].size()) + " prompt + " +
                    std::to_string(run_gen - 1) + " decode), but " + a.model + "'s KV cache holds " +
                    std::to_string(capacity) + " a sequence; recompile the plan with a larger --gen, or run " +
                    "fewer tokens");
  }
  for (const auto& p : prompts)
    for (int32_t t : p)
      if (t >= vocab) throw Error("--tokens: id " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(vocab) + ")");

  auto t_weights = std::chrono::steady_clock::now();
  int threads = a.threads > 0 ? a.threads : available_cpus();
  if (!cuda && threads > available_cpus())
    std::cerr << "lathe: warning: --threads " << threads << " is more than the " << available_cpus()
              << " CPUs this process may use: the workers take turns, and the kernels run slower than at "
              << available_cpus() << "\n";
  WeightStore weights;
  if (gguf_file) {
    weights = load_gguf_weights({&plan.prefill, &plan.decode}, gguf_file, threads);
    weights_from = "from " + a.model;
  } else {
    weights = WeightStore::build({&plan.prefill, &plan.decode}, source, threads);
    source = {};  // unmaps a checkpoint's files: the store holds the packed weights
  }
  double weights_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_weights).count();
  Backend session = cuda ? cuda_backend(plan, weights, a) : cpu_backend(plan, weights, a, threads);

  // One pass: prefill, then decode steps. --repeat runs the pass again (prefill starts
  // the sequences afresh, the samplers restart from their seeds) and keeps each phase's
  // fastest pass: best of N, as benchmarks report it on a shared machine.
  struct Pass {
    double prefill_s = 0, prefill_pred = 0, decode_s = 0, decode_pred = 0, ttft = 0, e2e = 0;
    int steps = 0;
    std::vector<std::vector<int32_t>> generated;
    std::vector<KernelTiming> timings;  // this pass's calls only
  };
  // --logits: every step's logits (first pass), sequence after sequence, as f32 rows.
  std::string logits_bytes;
  std::vector<KernelTiming> before = session.timings();
  auto one_pass = [&](bool keep) {
    Pass ps;
    std::vector<Sampler> samplers;
    for (size_t s = 0; s < prompts.size(); ++s)
      samplers.emplace_back(SamplerOptions{a.temperature, a.top_k, a.top_p, a.sample_seed + s});
    ps.generated.assign(prompts.size(), {});
    // A NaN in the logits names the model and the step (the message named neither).
    auto sample = [&](size_t s, const std::vector<float>& logits, int64_t step) {
      try {
        return samplers[s].sample(logits);
      } catch (const Error& e) {
        throw Error(a.model + " (weights " + weights_from + "), sequence " + std::to_string(s) + ", " +
                    (step == 0 ? std::string("prefill") : "decode step " + std::to_string(step)) + ": " + e.what());
      }
    };
    auto keep_logits = [&](const StepResult& step) {
      if (!keep || a.logits_out.empty()) return;
      for (const auto& row : step.logits)
        logits_bytes.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
    };
    auto t0 = std::chrono::steady_clock::now();
    StepResult r = session.prefill(prompts);
    keep_logits(r);
    std::vector<int32_t> next;
    for (size_t s = 0; s < prompts.size(); ++s) next.push_back(sample(s, r.logits[s], 0));
    ps.ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ps.prefill_s = r.seconds;
    ps.prefill_pred = r.predicted_s;
    for (size_t s = 0; s < prompts.size(); ++s) ps.generated[s].push_back(next[s]);
    for (int64_t i = 1; i < run_gen; ++i) {
      r = session.decode(next);
      keep_logits(r);
      ps.decode_s += r.seconds;
      ps.decode_pred += r.predicted_s;
      ++ps.steps;
      for (size_t s = 0; s < prompts.size(); ++s) {
        next[s] = sample(s, r.logits[s], i);
        ps.generated[s].push_back(next[s]);
      }
    }
    ps.e2e = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<KernelTiming>& now = session.timings();
    ps.timings = now;
    for (size_t i = 0; i < ps.timings.size() && i < before.size(); ++i) {
      KernelTiming& k = ps.timings[i];
      k.calls -= before[i].calls;
      k.measured_s -= before[i].measured_s;
      k.predicted_s -= before[i].predicted_s;
      k.flops -= before[i].flops;
      k.bytes -= before[i].bytes;
    }
    before = now;
    return ps;
  };
  std::vector<Pass> passes;
  for (int rep = 0; rep < a.repeat; ++rep) {
    passes.push_back(one_pass(rep == 0));
    if (a.repeat > 1 && a.format != "json")
      std::cerr << "lathe run: pass " << rep + 1 << "/" << a.repeat << ": prefill " << ms(passes.back().prefill_s)
                << " ms, decode " << ms(passes.back().decode_s) << " ms\n";
  }
  size_t best_prefill = 0, best_decode = 0;
  for (size_t i = 1; i < passes.size(); ++i) {
    if (passes[i].prefill_s < passes[best_prefill].prefill_s) best_prefill = i;
    if (passes[i].decode_s < passes[best_decode].decode_s) best_decode = i;
  }
  const Pass& bp = passes[best_prefill];
  const Pass& bd = passes[best_decode];
  const std::vector<std::vector<int32_t>>& generated = passes[0].generated;
  const double ttft = bp.ttft, prefill_s = bp.prefill_s, prefill_pred = bp.prefill_pred;
  const double decode_s = bd.decode_s, decode_pred = bd.decode_pred;
  const double e2e = bp.ttft + (bd.e2e - bd.ttft);
  const int steps = bd.steps;
  std::vector<KernelTiming> timings;  // prefill kernels of the fastest prefill, decode kernels of the fastest decode
  for (const KernelTiming& k : bp.timings)
    if (k.phase == Phase::prefill) timings.push_back(k);
  for (const KernelTiming& k : bd.timings)
    if (k.phase == Phase::decode) timings.push_back(k);
  if (!a.logits_out.empty()) write_file_atomic(a.logits_out, logits_bytes);
  int64_t prompt_total = 0;
  for (const auto& p : prompts) prompt_total += int64_t(p.size());
  double tpot = steps ? decode_s / steps : 0, tpot_pred = steps ? decode_pred / steps : 0;
  double batch = double(prompts.size());

  if (a.format == "json") {
    nlohmann::json j;
    std::vector<int32_t> flat;
    for (const auto& g : generated) flat.insert(flat.end(), g.begin(), g.end());
    j["backend"] = a.backend;
    // The kernel build that ran (lathe calibrate stamps the spec it fits with it).
    j["measured_with"] = std::string(a.backend == "cuda" ? cuda_kernels_id() : cpu_kernels_id());
    j["model"] = model_name;
    j["target"] = plan.target.name;
    j["threads"] = session.threads;
    j["device"] = session.device;
    // Whether this CPU has VNNI 8-bit dot products, which its int8 and int4 kernels then
    // use (lathe calibrate reads it).
    if (a.backend == "cpu") j["cpu_int8_dot"] = cpu_has_int8_dot();
    j["tokens"] = flat;
    j["generated"] = generated;
    if (tokenizer) {
      std::vector<std::string> texts;
      for (const auto& g : generated) texts.push_back(tokenizer->decode(g));
      j["text"] = texts;
      j["prompt_ids"] = prompts;
    }
    j["batch"] = prompts.size();
    j["prompt_tokens"] = prompt_total;
    size_t longest_prompt = 0;
    for (const auto& p : prompts) longest_prompt = std::max(longest_prompt, p.size());
    j["prompt_length"] = longest_prompt;  // the prefill step's S (the longest prompt)
    j["decode_steps"] = steps;
    if (a.repeat > 1) {
      nlohmann::json pre = nlohmann::json::array(), dec = nlohmann::json::array();
      for (const Pass& ps : passes) {
        pre.push_back(ps.prefill_s * 1e3);
        dec.push_back(ps.decode_s * 1e3);
      }
      j["repeat"] = {{"passes", a.repeat}, {"prefill_ms", pre}, {"decode_ms", dec}};
    }
    j["ttft_ms"] = ttft * 1e3;
    j["tpot_ms"] = tpot * 1e3;
    j["e2e_ms"] = e2e * 1e3;
    j["prefill_ms"] = prefill_s * 1e3;
    j["decode_ms"] = decode_s * 1e3;
    j["prefill_tokens_per_s"] = prefill_s > 0 ? double(prompt_total) / prefill_s : 0;
    j["decode_tokens_per_s"] = tpot > 0 ? batch / tpot : 0;
    j["predicted"] = {{"target", plan.target.name},
                      {"prefill_ms", prefill_pred * 1e3},
                      {"decode_ms", decode_pred * 1e3},
                      {"tpot_ms", tpot_pred * 1e3},
                      {"simulated", true}};
    // What `lathe calibrate` needs to rebuild the plan's graphs and cost each kernel. It
    // rebuilds the plan from model_source: the model's file or the compiled
    // plan (absolute), with a hash of its bytes, or the built-in's name. A custom model
    // was looked up by its name, and one named like a built-in was silently replaced.
    std::string model_source = a.model, model_hash;
    if (from_plan || !is_builtin_name("models", a.model)) {
      std::error_code aec;
      const fs::path abs = fs::absolute(a.model, aec);
      if (!aec) model_source = abs.lexically_normal().string();
      model_hash = model_content_hash(model_source);
    }
    j["plan"] = {{"model", plan.model},
                 {"model_source", model_source},
                 {"model_hash", model_hash.empty() ? nlohmann::json(nullptr) : nlohmann::json(model_hash)},
                 {"weights", plan.weights_format},
                 {"kv", plan.kv_dtype},
                 {"kv_layout", plan.kv_layout},
                 {"act", plan.act_dtype},
                 {"tp", plan.tp},
                 {"pipeline", plan.pipeline},
                 {"batch", plan.workload.batch},
                 {"prompt", plan.workload.prompt},
                 {"gen", plan.workload.gen}};
    j["jit"] = {{"compiled", session.compiled}, {"cached", session.cached}, {"compile_s", session.compile_s}};
    j["weights_init_s"] = weights_s;
    j["weights_bytes"] = weights.bytes();
    if (!a.tuning.empty()) j["tuning"] = {{"file", a.tuning}, {"note", tuning_note}};
    j["weights_from"] = weights_from;
    if (a.per_op) {
      const double bw = plan.target.bandwidth_bytes_per_s();
      j["kernels"] = nlohmann::json::array();
      for (const KernelTiming& t : timings)
        j["kernels"].push_back({{"phase", std::string(phase_name(t.phase))},
                                {"name", t.name},
                                {"kernel", t.label},
                                {"calls", t.calls},
                                {"measured_ms", t.measured_s * 1e3},
                                {"predicted_ms", t.predicted_s * 1e3},
                                {"flops", t.flops},
                                {"bytes", t.bytes},
                                {"achieved_gflops", t.measured_s > 0 ? t.flops / t.measured_s / 1e9 : 0},
                                {"achieved_gbs", t.measured_s > 0 ? t.bytes / t.measured_s / 1e9 : 0},
                                {"bandwidth_util", t.measured_s > 0 && bw > 0 ? t.bytes / t.measured_s / bw : 0}});
    }
    // Generated text may hold partial UTF-8 sequences: those bytes become U+FFFD.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "lathe run: " << model_name << " on " << session.device << ", predictions for "
            << describe_target(plan.target) << "\n";
  std::cout << "  " << (cuda ? "NVRTC: " : "JIT: ") << session.compiled << " kernels compiled, " << session.cached
            << " from the cache, " << fmt_double(session.compile_s, 2) << " s; weights (" << weights_from << ") "
            << human_bytes(weights.bytes()) << " in " << fmt_double(weights_s, 2) << " s\n";
  for (size_t s = 0; s < generated.size() && s < 8; ++s) {
    std::cout << "  sequence " << s << " (" << prompts[s].size() << " prompt tokens): ";
    for (int32_t t : generated[s]) std::cout << t << " ";
    std::cout << "\n";
    if (tokenizer)
      std::cout << "    text: \"" << printable(tokenizer->decode(prompts[s])) << "\" -> \""
                << printable(tokenizer->decode(generated[s])) << "\"\n";
  }
  Table t({"phase", "tokens", "measured ms", "predicted ms", "measured/predicted", "tokens/s"});
  t.add({"prefill", std::to_string(prompt_total), ms(prefill_s), ms(prefill_pred),
         fmt_double(prefill_pred > 0 ? prefill_s / prefill_pred : 0, 2),
         fmt_double(prefill_s > 0 ? double(prompt_total) / prefill_s : 0, 1)});
  t.add({"decode", std::to_string(steps) + " steps", ms(decode_s), ms(decode_pred),
         fmt_double(decode_pred > 0 ? decode_s / decode_pred : 0, 2), fmt_double(tpot > 0 ? batch / tpot : 0, 1)});
  std::cout << "\n" << t.text("  ");
  if (a.repeat > 1) {
    double plo = prefill_s, phi = 0, dlo = decode_s, dhi = 0;
    for (const Pass& ps : passes) phi = std::max(phi, ps.prefill_s), dhi = std::max(dhi, ps.decode_s);
    std::cout << "  best of " << a.repeat << " passes (prefill " << ms(plo) << "-" << ms(phi) << " ms, decode "
              << ms(dlo) << "-" << ms(dhi) << " ms)\n";
  }
  std::cout << "  TTFT " << ms(ttft) << " ms, TPOT " << ms(tpot) << " ms (predicted " << ms(tpot_pred) << "), E2E "
            << ms(e2e) << " ms\n";
  if (a.per_op) {
    // Measured profile: the simulator's FLOPs and bytes for each call over the measured
    // time, beside the target's peak bandwidth.
    const double bw = plan.target.bandwidth_bytes_per_s();
    Table k({"phase", "kernel", "node", "calls", "measured ms", "predicted ms", "ratio", "GFLOP/s", "GB/s", "of BW"});
    for (const KernelTiming& x : timings) {
      double gfs = x.measured_s > 0 ? x.flops / x.measured_s / 1e9 : 0, gbs = x.measured_s > 0 ? x.bytes / x.measured_s / 1e9 : 0;
      k.add({std::string(phase_name(x.phase)), x.label, x.name, std::to_string(x.calls), fmt_double(x.measured_s * 1e3, 4),
             fmt_double(x.predicted_s * 1e3, 4), fmt_double(x.predicted_s > 0 ? x.measured_s / x.predicted_s : 0, 2),
             fmt_double(gfs, 1), fmt_double(gbs, 1), fmt_double(bw > 0 ? 100 * gbs * 1e9 / bw : 0, 0) + "%"});
    }
    std::cout << "\nPer kernel (totals over all calls; GFLOP/s and GB/s: the simulator's work count over the measured time)\n"
              << k.text("  ");
  }
  return 0;
}

struct ProbeArgs {
  std::string out, name, backend = "cpu", format = "text";
  int threads = 0;
  std::optional<int> device;  // CUDA only (it was ignored on the CPU)
  double buffer_mb = 0;  // 0: 512 MB on CPUs, 2048 MB on GPUs
};

// lathe probe --backend cuda: the GPU's copy bandwidth and cuBLAS GEMM rate.
int run_probe_cuda(const ProbeArgs& a) {
  std::string why;
  if (!CudaApi::device_available(&why)) throw Error("--backend cuda: " + why);
  std::cerr << "lathe probe: measuring device copy bandwidth and cuBLAS GEMM rate...\n";
  CudaProbeResult p = probe_cuda(a.device.value_or(0), a.buffer_mb > 0 ? a.buffer_mb : 2048);
  Target base = load_target(builtin_target_for(p.device));
  std::string name = a.name.empty() ? "probe-" + base.name : a.name;
  if (a.format == "json") {
    nlohmann::json j = {{"device", p.device.name},
                        {"compute_capability", p.device.compute_capability},
                        {"sm_count", p.device.sm_count},
                        {"memory_gb", p.device.memory_gb},
                        {"copy_gbs", p.copy_gbs},
                        {"copy_mb", p.copy_mb},
                        {"gemm_n", p.gemm_n},
                        {"gemm_tflops_bf16", p.gemm_tflops_bf16},
                        {"gemm_tflops_f16", p.gemm_tflops_f16},
                        {"datasheet", base.name},
                        {"datasheet_bandwidth_gbs", base.hbm_bandwidth_gbs},
                        {"datasheet_bf16_tflops", base.peak_bf16}};
    report_stream(a.out) << j.dump(2) << "\n";  // stderr when -o is stdout
    if (!a.out.empty()) write_file_atomic(a.out, cuda_probe_to_toml(p, base, name));
    return 0;
  }
  std::string toml = cuda_probe_to_toml(p, base, name);
  if (a.out.empty()) std::cout << toml;
  else {
    write_file_atomic(a.out, toml);
    report_stream(a.out) << "wrote " << a.out << ": " << p.device.name << " copy " << fmt_double(p.copy_gbs, 1)
              << " GB/s (datasheet " << fmt_double(base.hbm_bandwidth_gbs, 0) << "), cuBLAS bf16 "
              << fmt_double(p.gemm_tflops_bf16, 1) << " TFLOP/s (datasheet " << fmt_double(base.peak_bf16, 1)
              << ")\n";
  }
  return 0;
}

int run_probe(const ProbeArgs& a) {
  // What the measurement is written under is checked before measuring.
  if (!a.name.empty())
    if (std::string why = name_problem(a.name); !why.empty()) throw Error("--name: " + why);
  if (!a.out.empty()) check_output_file(a.out);
  if (a.backend == "cuda") return run_probe_cuda(a);
  if (a.device) throw Error("--device: a CUDA device; with the CPU backend there is none (give --backend cuda)");
  CpuJit jit;
  int threads = a.threads > 0 ? a.threads : available_cpus();
  std::cerr << "lathe probe: measuring memory bandwidth, FMA and 8-bit dot-product throughput on " << threads << " threads...\n";
  ProbeResult p = probe_machine(jit, threads, a.buffer_mb > 0 ? a.buffer_mb : 512);
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  std::string name = a.name.empty() ? safe_name("probe-" + std::string(host)) : a.name;
  std::string toml = probe_to_toml(p, name);
  const std::vector<std::string> warnings = probe_warnings(p);
  for (const std::string& w : warnings)
    std::cerr << "lathe: warning: probe: " << w << "; the host was busy: run lathe probe again on a quiet machine\n";
  if (a.format == "json") {
    nlohmann::json j = {{"cpu", p.cpu_model},           {"isa", p.isa},
                        {"threads", p.threads},         {"read_gbs", p.read_gbs},
                        {"read_gbs_one", p.read_gbs_one}, {"fma_gflops", p.fma_gflops_all},
                        {"fma_gflops_one", p.fma_gflops_one}, {"sgemm_gflops", p.gemm_gflops},
                        {"sgemm_gflops_32_rows", p.gemm_gflops_small}, {"gemm_efficiency", p.gemm_efficiency},
                        {"gemm_half_rows", p.gemm_half_rows}, {"gemv_gflops_8_rows", p.gemv_gflops},
                        {"gemv_efficiency", p.gemv_efficiency}, {"int_gemv_gops_8_rows", p.int_gemv_gops},
                        {"int8_gemv_gops_8_rows", p.int8_gemv_gops}, {"int_dot_gemv_efficiency", p.int_dot_gemv_efficiency},
                        {"int8_dot_gemv_efficiency", p.int8_dot_gemv_efficiency},
                        {"int_gemv_gops_8_rows_k512", p.int_gemv_gops_short},
                        {"int8_gemv_gops_8_rows_k512", p.int8_gemv_gops_short},
                        {"int_dot_gemv_half_k", p.int_dot_gemv_half_k}, {"int8_dot_gemv_half_k", p.int8_dot_gemv_half_k},
                        {"int_gemm_gops", p.int_gemm_gops},
                        {"int_gemm_gops_k512", p.int_gemm_gops_short}, {"int_dot_efficiency", p.int_dot_efficiency},
                        {"int_dot_half_k", p.int_dot_half_k}, {"int8_gemm_gops", p.int8_gemm_gops},
                        {"int8_gemm_gops_k512", p.int8_gemm_gops_short}, {"int8_dot_efficiency", p.int8_dot_efficiency},
                        {"int8_dot_half_k", p.int8_dot_half_k}, {"int_gemm_gops_32_rows", p.int_gemm_gops_rows},
                        {"int_dot_half_rows", p.int_dot_half_rows}, {"int8_gemm_gops_32_rows", p.int8_gemm_gops_rows},
                        {"int8_dot_half_rows", p.int8_dot_half_rows},
                        {"attention_gflops", p.attention_gflops}, {"attention_gflops_d64", p.attention_gflops_short},
                        {"attention_gflops_group1", p.attention_gflops_group1},
                        {"attention_efficiency", p.attention_efficiency}, {"attention_half_dim", p.attention_half_dim},
                        {"attention_half_group", p.attention_half_group},
                        {"loop_overhead_us", p.loop_overhead_us}, {"memory_gb", p.memory_gb},
                        {"clock_mhz", p.clock_mhz}, {"l3_mb", p.l3_mb}, {"name", name},
                        {"int8_gops", p.int8_gops_all}, {"warnings", warnings}};
    report_stream(a.out) << j.dump(2) << "\n";  // stderr when -o is stdout
    if (!a.out.empty()) write_file_atomic(a.out, toml);
    return 0;
  }
  if (a.out.empty()) std::cout << toml;
  else {
    write_file_atomic(a.out, toml);
    report_stream(a.out) << "wrote " << a.out << ": read " << fmt_double(p.read_gbs, 1) << " GB/s, FMA "
              << fmt_double(p.fma_gflops_all, 1) << " GFLOP/s (" << fmt_double(p.fma_gflops_one, 1)
              << " one thread), sgemm " << fmt_double(p.gemm_gflops, 1) << " GFLOP/s ("
              << fmt_double(p.gemm_gflops_small, 1) << " at 32 rows), f32 GEMV " << fmt_double(p.gemv_gflops, 1)
              << " GFLOP/s at 8 rows, "
              << (p.int8_gops_all > 0 ? "int8 dot " + fmt_double(p.int8_gops_all, 1) + " GOP/s, " : std::string())
              << (p.int_gemm_gops > 0 ? "int4 GEMM " + fmt_double(p.int_gemm_gops, 1) + " GOP/s, " : std::string())
              << "flash attention " << fmt_double(p.attention_gflops, 1) << " GFLOP/s, loop overhead "
              << fmt_double(p.loop_overhead_us, 2) << " us\n";
  }
  return 0;
}

}  // namespace

void register_run(CLI::App& app, Registry& r) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run prefill and decode for real; measured beside predicted, per kernel");
  cmd->add_option("MODEL", a->model,
                  "built-in model, model TOML, .gguf file (its weights and vocabulary), Hugging Face directory "
                  "(config.json + *.safetensors: its weights), or a plan directory from `lathe compile`; default: the --plan "
                  "file's model");
  cmd->add_option("--backend", a->backend,
                  "cpu (JIT-compiled C++) or cuda (NVRTC kernels; predictions for the matching built-in GPU unless --hw)");
  cmd->add_option("--hw", a->hw, "target the predictions are made for (default cpu-host; use `lathe probe -o f.toml`)");
  CLI::Option* synth_len = cmd->add_option("--prompt-tokens", a->prompt_tokens, "synthetic prompt length (default 16)")
                              ->check(CLI::Range(int64_t(1), kMaxRunTokens));
  CLI::Option* ids = cmd->add_option("--tokens", a->tokens, "prompt token ids, e.g. 1,2,3 (';' separates sequences)")
                         ->check(CLI::Validator(
                             [](std::string& s) -> std::string {
                               return s.find_first_not_of(" ,;") == std::string::npos ? "no token ids given" : "";
                             },
                             "IDS"));
  CLI::Option* text = cmd->add_option("--prompt", a->prompt_text,
                                      "prompt text, tokenized with the .gguf file's vocabulary (BOS added when the "
                                      "file asks); the output shows the generated text");
  CLI::Option* synth_batch = cmd->add_option("--batch", a->batch, "synthetic prompts in the batch (default 1)")
                                 ->check(CLI::Range(int64_t(1), kMaxRunBatch));
  // The prompts come from one place: ids, text, or synthetic (length x batch).
  ids->excludes(text)->excludes(synth_len)->excludes(synth_batch);
  text->excludes(synth_len)->excludes(synth_batch);
  cmd->add_option("--gen", a->gen, "tokens to generate per sequence, the prefill's included (default 16; a compiled plan's own)")
      ->check(CLI::Range(int64_t(1), kMaxRunTokens));
  a->plan.add_to(cmd);
  // Runs pick the activation dtype by backend (the kernels' own), not by target.
  cmd->get_option("--act")->description(
      "activation dtype: f32, f16, bf16 (default: f32 with --backend cpu, bf16 with --backend cuda)");
  cmd->add_option("--set", a->sets, "override a field of the prediction target (repeatable)");
  cmd->add_option("--threads", a->threads, "worker threads (default: the CPUs this process may use: its affinity mask and cgroup quota)")->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", a->seed, "seed of the synthetic weights (not used with a .gguf file)")->check(non_negative_integer());
  cmd->add_option("--temperature", a->temperature, "sampling temperature (0 = greedy)")->check(number_in(0.0, 100.0));
  cmd->add_option("--top-k", a->top_k, "sample among the k most likely tokens")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", a->top_p, "nucleus sampling mass")->check(number_in(1e-6, 1.0));
  cmd->add_option("--sample-seed", a->sample_seed, "seed of the sampler");
  cmd->add_option("--logits", a->logits_out,
                  "write the logits of every step (prefill's last position, then each decode step; all sequences) "
                  "to this file as f32 rows of vocab values (the first pass's with --repeat)")
      ->check(non_empty());
  cmd->add_flag("--per-op", a->per_op, "measured and predicted time of every kernel");
  cmd->add_option("--repeat", a->repeat,
                  "run prefill and decode N times and report each phase's fastest pass (and its kernels); "
                  "the JSON lists every pass")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--tuning", a->tuning, "kernel parameters from `lathe tune -o FILE` (tuned for the same --backend)")
      ->check(non_empty());
  cmd->add_option("--format", a->format, "table (or text) or json")->check(CLI::IsMember({"table", "text", "json"}));
  cmd->add_option("--cache-dir", a->cache_dir, kCacheDirHelp);
  cmd->add_flag("--no-cache", a->no_cache, "compile every kernel, read and write no cache");
  cmd->footer(
      "Profiling the CPU kernels: LATHE_PERF_MAP=1 writes /tmp/perf-PID.map (the kernels' functions by name) and "
      "compiles them with frame pointers, for `perf record -g` / `perf report`.");
  cmd->callback([&r, a, synth_len, text, cmd] {
    a->prompt_tokens_given = synth_len->count() > 0;
    a->prompt_text_given = text->count() > 0;
    a->gen_given = cmd->get_option("--gen")->count() > 0;
    a->batch_given = cmd->get_option("--batch")->count() > 0;
    a->hw_given = cmd->get_option("--hw")->count() > 0;
    r.action = [a] { return run_run(*a); };
  });

  auto p = std::make_shared<ProbeArgs>();
  CLI::App* pr = app.add_subcommand("probe", "Measure this machine (bandwidth, FMA and 8-bit dot-product peaks, sgemm, f32 GEMV and integer GEMM rates) and write a hardware spec");
  pr->add_option("-o,--out", p->out, "write the hardware spec TOML here (default: stdout)");
  pr->add_option("--name", p->name, "target name (default probe-HOSTNAME)")->check(non_empty());
  pr->add_option("--threads", p->threads, "threads (default: the CPUs this process may use: its affinity mask and cgroup quota)")->check(CLI::Range(1, 1024));
  pr->add_option("--buffer-mb", p->buffer_mb, "streaming buffer size (default 512 on CPUs, 2048 on GPUs)")
      ->check(number_in(64.0, 65536.0));
  pr->add_option("--backend", p->backend, "cpu (this machine) or cuda (the GPU: copy bandwidth, cuBLAS GEMM rate)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  pr->add_option("--device", p->device, "CUDA device ordinal (with --backend cuda)")->check(CLI::Range(0, 63));
  pr->add_option("--format", p->format, "text (the TOML, or a summary with -o) or json (the measurements; -o still writes the TOML)")
      ->check(CLI::IsMember({"text", "json"}));
  pr->callback([&r, p] { r.action = [p] { return run_probe(*p); }; });
}

}  // namespace lathe::cli
