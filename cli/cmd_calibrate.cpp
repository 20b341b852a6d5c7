// lathe calibrate: fit a hardware spec's efficiency factors to measured runs
// (`lathe run --per-op --format json`), report the per-phase prediction error on
// held-out runs before and after, write the calibrated spec (simulator/calibrate.h).
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "frontend/specs.h"
#include "frontend/sweep.h"
#include "ir/assert.h"
#include "ir/json_fields.h"
#include "simulator/calibrate.h"

namespace lathe::cli {

namespace {

struct CalibrateArgs {
  std::string runs, hw, out, name, format = "text";
  int holdout = 3;
};

// The JSON objects of a file: one per line (JSONL) or concatenated pretty-printed
// objects, as `lathe run --format json >> runs.jsonl` appends them.
std::vector<std::pair<int, nlohmann::json>> read_objects(const std::string& path) {
  std::string text = read_file(path, ~uint64_t(0));  // many runs: no size limit but memory
  std::vector<std::pair<int, nlohmann::json>> out;
  size_t i = 0;
  int line = 1;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\n') ++line;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c != '{')
      throw Error(path + ":" + std::to_string(line) + ": expected a JSON object ('{'), got " +
                  (text.compare(i, 3, "\xEF\xBB\xBF") == 0 ? std::string("a UTF-8 byte-order mark (save the file without it)")
                                                         : "'" + printable(std::string(1, c)) + "'"));
    int start_line = line, depth = 0;
    bool in_string = false, escape = false;
    size_t j = i;
    for (; j < text.size(); ++j) {
      char d = text[j];
      if (d == '\n') ++line;
      if (in_string) {
        if (escape)
          escape = false;
        else if (d == '\\')
          escape = true;
        else if (d == '"')
          in_string = false;
        continue;
      }
      if (d == '"')
        in_string = true;
      else if (d == '{')
        ++depth;
      else if (d == '}' && --depth == 0)
        break;
    }
    if (j >= text.size())
      throw Error(path + ":" + std::to_string(start_line) + ": unterminated JSON object");
    try {
      out.emplace_back(start_line, nlohmann::json::parse(text.substr(i, j - i + 1)));
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ":" + std::to_string(start_line) + ": not valid JSON: " + json_error_text(e.what()));
    }
    i = j + 1;
  }
  if (out.empty())
    throw Error(
        path +
        ": no runs (expected the output of `lathe run --per-op --format json`, one per line)");
  return out;
}

struct RunData {
  std::string label;
  std::shared_ptr<Planned> plan;
  MeasuredRun run;
  int int8_dot = -1;  // the run's "cpu_int8_dot": 1 / 0, -1 when it does not say
  bool int_weights = false;  // its plan's weights are integers (int8, int4:gN)
};

// A string field the run may leave out ("" when absent or null); present, it must be a
// string (a number there was read as absent: an int8 run fitted as the model's dtype).
std::string opt_string(const nlohmann::json& j, const char* key, const std::string& path = "") {
  if (!j.contains(key) || j[key].is_null()) return "";
  if (!j[key].is_string())
    throw Error((path.empty() ? std::string(key) : path + "." + key) + ": " + j[key].dump() + " is not a string");
  return j[key].get<std::string>();
}

RunData load_run(const nlohmann::json& j, const std::string& where, const std::string& hw,
                 std::map<std::string, std::shared_ptr<Planned>>& plans) {
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key))
      throw Error(where + ": missing '" + key +
                  "' (record runs with `lathe run MODEL --per-op --format json`)");
    return j[key];
  };
  const nlohmann::json& kernels = need("kernels");
  const nlohmann::json& pl = need("plan");
  if (!kernels.is_array() || kernels.empty())
    throw Error(where + ": no per-kernel timings (record runs with --per-op)");
  RunData d;
  try {
    std::string key = pl.dump();
    auto it = plans.find(key);
    const std::string source = pl.contains("model_source") ? json_string_at(pl, "model_source", "plan.model_source") : "";
    // A compiled plan's run: its own lowered graphs, as they ran.
    std::error_code fec;
    const bool compiled = !source.empty() &&
                          (std::filesystem::exists(std::filesystem::path(source) / "plan.json", fec) ||
                           std::filesystem::path(source).filename() == "plan.json");
    auto check_unchanged = [&] {
      if (!pl.contains("model_hash") || pl["model_hash"].is_null()) return;
      const std::string want = json_string_at(pl, "model_hash", "plan.model_hash");
      const std::string got = model_content_hash(source);
      if (got != want)
        throw Error("plan.model_source " + source + (got.empty() ? " is gone" : " changed since the run") +
                    " (its bytes hash to " + (got.empty() ? std::string("nothing") : got) + ", the run's to " + want +
                    "); record the run again");
    };
    if (it == plans.end() && compiled) {
      check_unchanged();
      Plan cp = load_plan_dir(source);
      auto pp = std::make_shared<Planned>();
      pp->model.name = cp.model;  // only the name is read below
      if (cp.model != json_string_at(pl, "model", "plan.model"))
        throw Error("plan.model_source " + source + " is a plan of '" + cp.model + "', not of the run's '" +
                    json_string_at(pl, "model", "plan.model") + "'");
      pp->target = cp.target;
      pp->workload = cp.workload;
      pp->lowered.prefill = std::move(cp.prefill);
      pp->lowered.decode = std::move(cp.decode);
      it = plans.emplace(key, pp).first;
    }
    if (it == plans.end()) {
      PlanRequest req;
      // The run's model file where it names one (runs before 2026-12-02 give only the
      // name, which must then be a built-in).
      const std::string name = json_string_at(pl, "model", "plan.model");
      req.model = source.empty() ? name : source;
      if (source.empty() && !is_builtin_name("models", name))
        throw Error("plan.model '" + name + "' is not a built-in model and the run does not name its file; " +
                    "record the run again with this lathe (its JSON carries plan.model_source)");
      req.hardware = hw;
      std::string why;
      std::string w = opt_string(pl, "weights", "plan"), kv = opt_string(pl, "kv", "plan"),
                  lay = opt_string(pl, "kv_layout", "plan"), act = opt_string(pl, "act", "plan");
      if (!w.empty()) {
        auto f = parse_weight_format(w, &why);
        if (!f) throw Error("weights: " + why);
        req.options.weights = f;
      }
      if (!kv.empty()) {
        req.options.kv_dtype = parse_kv_dtype(kv, &why);
        if (!req.options.kv_dtype) throw Error("kv: " + why);
      }
      if (!lay.empty()) {
        req.options.kv_layout = parse_kv_layout(lay, &why);
        if (!req.options.kv_layout) throw Error("kv_layout: " + why);
      }
      if (!act.empty()) {
        req.options.act_dtype = parse_float_dtype(act);
        if (!req.options.act_dtype) throw Error("act: '" + act + "' (expected f32, f16 or bf16)");
      }
      req.options.tp = pl.contains("tp") ? json_integer(pl["tp"], "plan.tp") : 1;
      std::string passes;
      if (pl.contains("pipeline") && !pl["pipeline"].is_array())  // a string was one pass's name
        throw Error("plan.pipeline: " + pl["pipeline"].dump() + " is not a list of pass names");
      for (const auto& p : pl.value("pipeline", nlohmann::json::array())) {
        if (!p.is_string()) throw Error("plan.pipeline: " + p.dump() + " is not a pass name");
        passes += (passes.empty() ? "" : ",") + p.get<std::string>();
      }
      req.options.passes = passes.empty() ? "none" : passes;
      req.workload = {json_integer(pl.at("batch"), "plan.batch"), json_integer(pl.at("prompt"), "plan.prompt"),
                      json_integer(pl.at("gen"), "plan.gen")};
      // The ranges `lathe run` accepts (its decode steps are costed one by one).
      if (req.workload.batch < 1 || req.workload.batch > kMaxRunBatch || req.workload.prompt < 1 ||
          req.workload.prompt > kMaxRunTokens || req.workload.gen < 0 || req.workload.gen > kMaxRunTokens)
        throw Error("plan workload (batch " + std::to_string(req.workload.batch) + ", prompt " +
                    std::to_string(req.workload.prompt) + ", gen " + std::to_string(req.workload.gen) +
                    ") is outside what lathe run accepts");
      LowerHooks hooks;
      hooks.record = false;
      it = plans.emplace(key, std::make_shared<Planned>(make_plan(req, hooks, false))).first;
      if (it->second->model.name != name)
        throw Error("plan.model_source " + req.model + " is the model '" + it->second->model.name +
                    "', not the run's '" + name + "' (the file changed since the run?)");
      if (!source.empty()) check_unchanged();
      for (const std::string& w : check_workload(it->second->model, it->second->workload))
        std::cerr << "lathe: warning: a run's plan: " << w << "\n";
    }
    d.plan = it->second;
    d.run.prefill = &d.plan->lowered.prefill;
    d.run.decode = &d.plan->lowered.decode;
    d.run.batch = json_integer(j.at("batch"), "batch");
    d.run.prompt = j.contains("prompt_length") ? json_integer(j["prompt_length"], "prompt_length")
                                               : json_integer(pl.at("prompt"), "plan.prompt");
    d.run.decode_steps = json_integer(j.at("decode_steps"), "decode_steps");
    d.run.prefill_s = json_number_at(j, "prefill_ms", "prefill_ms") * 1e-3;
    d.run.decode_s = json_number_at(j, "decode_ms", "decode_ms") * 1e-3;
    if (j.contains("cpu_int8_dot")) {
      d.int8_dot = json_bool(j["cpu_int8_dot"], "cpu_int8_dot") ? 1 : 0;
    }
    // The run must fit the plan it was recorded with (the decode steps are costed one
    // by one), and its times must be numbers.
    const Workload& cap = d.plan->workload;
    auto within = [](int64_t v, int64_t lo, int64_t hi, const std::string& what) {
      if (v < lo || v > hi)
        throw Error(what + " " + std::to_string(v) + " is outside the plan's " + std::to_string(lo) + ".." +
                    std::to_string(hi));
    };
    // A plan directory runs shorter prompts and longer generations than it was
    // compiled for, as long as they fit its KV cache (prompt + gen positions).
    within(d.run.batch, 1, cap.batch, "batch");
    within(d.run.prompt, 1, cap.final_context(), "prompt_length");
    within(d.run.decode_steps, 0, cap.final_context() - d.run.prompt, "decode_steps");
    // Non-negative and below 1e9 ms (11.6 days): a run's time, not an overflowed counter.
    auto time_ok = [](double v, const std::string& what) {
      if (!std::isfinite(v) || v < 0 || v > 1e6)
        throw Error(what + " must be a number of milliseconds in [0, 1e9], got " + fmt_double(v * 1e3, 6));
    };
    time_ok(d.run.prefill_s, "prefill_ms");
    time_ok(d.run.decode_s, "decode_ms");
    std::set<std::pair<std::string, std::string>> seen;  // (phase, name)
    double kernel_sum[2] = {0, 0};                     // prefill, decode
    for (const auto& k : kernels) {
      std::string phase = json_string_at(k, "phase", "kernel phase"), name = json_string_at(k, "name", "kernel name");
      if (phase != "prefill" && phase != "decode")
        throw Error("kernel " + name + ": phase '" + phase + "' (expected prefill or decode)");
      const Graph& g = phase == "prefill" ? *d.run.prefill : *d.run.decode;
      NodeId id = g.find_node(name);
      if (id == kNone || !g.node(id).alive)
        throw Error("kernel " + phase + "/" + name +
                    " is not in the plan lathe builds for this run (another version?)");
      // A kernel timed twice was counted twice by the fit (its time, and its weight).
      if (!seen.emplace(phase, name).second)
        throw Error("kernel " + phase + "/" + name + " is listed twice (each kernel once, as lathe run writes it)");
      MeasuredKernel mk{id, json_number_at(k, "measured_ms", "kernel " + phase + "/" + name + ": measured_ms") * 1e-3};
      time_ok(mk.measured_s, "kernel " + phase + "/" + name + ": measured_ms");
      kernel_sum[phase == "decode"] += mk.measured_s;
      (phase == "prefill" ? d.run.prefill_kernels : d.run.decode_kernels).push_back(mk);
    }
    // The kernels run inside their phase: their times cannot add up to much more than
    // the phase's (kernel times of 1e8 ms beside a 0.7 ms prefill fitted every factor to
    // a bound and wrote the spec). Half again allows for the timers' own overhead.
    for (int ph = 0; ph < 2; ++ph) {
      const double phase_s = ph ? d.run.decode_s : d.run.prefill_s;
      if (kernel_sum[ph] > 1.5 * phase_s + 1e-5)
        throw Error(std::string(ph ? "decode" : "prefill") + " kernels' measured_ms add up to " +
                    fmt_double(kernel_sum[ph] * 1e3, 3) + " ms, more than the phase's " +
                    (ph ? "decode_ms " : "prefill_ms ") + fmt_double(phase_s * 1e3, 3) +
                    " ms they ran in (edited times?)");
    }
    if (d.run.decode_steps == 0 && kernel_sum[1] > 0)
      throw Error("decode kernels have measured times but decode_steps is 0 (no decode step ran)");
    // A run the fit cannot use says nothing (it was dropped unannounced): the fit weighs
    // a phase by its measured time, and decode only when decode steps ran.
    if (!(d.run.prefill_s > 0 || (d.run.decode_steps > 0 && d.run.decode_s > 0)))
      throw Error("every measured time of the run is 0 (prefill_ms, and decode_ms with decode steps)");
    std::string w = opt_string(pl, "weights", "plan");
    d.int_weights = w.starts_with("int");
    d.label = d.plan->model.name + " " + (w.empty() ? std::string("(model dtype)") : w) + " b" +
              std::to_string(d.run.batch) + " p" + std::to_string(d.run.prompt) + " g" +
              std::to_string(d.run.decode_steps + 1);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": malformed run: " + json_error_text(e.what()));
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  d.run.label = d.label;
  return d;
}

std::string pct(double v) {
  return fmt_double(100 * v, 1) + "%";
}

int run_calibrate(const CalibrateArgs& a) {
  if (a.out.empty()) throw Error("-o FILE is required (the calibrated hardware spec)");
  if (a.holdout == 1) throw Error("--holdout 1 would hold out every run (give 0 for none, or N >= 2)");
  if (!a.name.empty())  // before the fit: a name the spec reader refuses was written, exit 0
    if (std::string why = name_problem(a.name); !why.empty()) throw Error("--name: " + why);
  refuse_input_as_output(a.out, a.runs, "-o");
  refuse_input_as_output(a.out, target_spec_base(a.hw), "-o", "hardware");
  Target start = load_target_spec(a.hw);
  if (a.name.empty())  // the default name too (a 125-character name grew past the limit)
    if (std::string why = name_problem(start.name + "-calibrated"); !why.empty())
      throw Error("the calibrated spec's default name '" + start.name + "-calibrated': " + why + "; give --name");
  auto objects = read_objects(a.runs);
  for (auto& [line, j] : objects)  // the model files the runs name are inputs too
    if (j.contains("plan") && j["plan"].is_object() && j["plan"].contains("model_source") &&
        j["plan"]["model_source"].is_string())
      refuse_input_as_output(a.out, j["plan"]["model_source"].get<std::string>(), "-o", "models");
  std::map<std::string, std::shared_ptr<Planned>> plans;
  std::vector<RunData> runs;
  std::set<std::string> measured_with;  // the kernel builds the runs ran ("" = not said)
  for (auto& [line, j] : objects) {
    // Measurements on one kind of machine say nothing about another's efficiencies.
    std::string where = a.runs + ":" + std::to_string(line);
    std::string be;
    try {
      be = opt_string(j, "backend");
      if (!be.empty() && be != "cpu" && be != "cuda")
        throw Error("backend: '" + printable(be) + "' (lathe run writes cpu or cuda)");
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    if (!be.empty() && (be == "cuda") != start.is_gpu())
      throw Error(where + ": a run measured on the " + be + " backend cannot calibrate " + start.name + ", a " +
                  (start.is_gpu() ? "GPU" : "CPU") + " spec; give --hw the " +
                  (be == "cuda" ? "GPU" : "CPU") + " spec the runs were predicted for (their \"target\": " +
                  (j.contains("target") ? printable(j["target"].is_string() ? j["target"].get<std::string>() : j["target"].dump())
                                        : std::string("not given")) + ")");
    std::string build;
    try {
      build = opt_string(j, "measured_with");
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    const std::string want = start.is_gpu() ? "cuda:" : "cpu:";
    if (!build.empty() && (!is_kernel_build_id(build) || !build.starts_with(want)))
      throw Error(where + ": measured_with: '" + printable(build) + "' is not a " + (start.is_gpu() ? "CUDA" : "CPU") +
                  " kernel build id (\"" + want + "\" and hex digits)");
    measured_with.insert(build);
    runs.push_back(load_run(j, where, a.hw, plans));
    runs.back().run.label = "#" + std::to_string(runs.size()) + " " + runs.back().label;
  }
  std::vector<MeasuredRun> train, test;
  for (size_t i = 0; i < runs.size(); ++i) {
    bool held = a.holdout >= 2 && runs.size() >= 2 && int(i % size_t(a.holdout)) == a.holdout - 1;
    (held ? test : train).push_back(runs[i].run);
  }
  // Runs recorded on a CPU with 8-bit dot products ran their integer GEMMs on them
  // (lathe run says so: cpu_int8_dot); a CPU spec without an int8 peak costs them as
  // dequantization and an f32 GEMM instead, a path no efficiency factor turns into the
  // other. The fit then starts from an int8 peak of 4x the f32 FMA peak (VNNI: four
  // 8-bit products per 32-bit lane) and fits efficiency.int_dot / int8_dot against it;
  // the "before" errors stay those of the spec as given.
  Target fit_start = start;
  std::string int8_note;
  size_t with_dot = 0, without_dot = 0, int_runs = 0;
  for (const RunData& r : runs) {
    with_dot += r.int8_dot == 1;
    without_dot += r.int8_dot == 0;
    int_runs += r.int_weights;
  }
  const size_t unknown = runs.size() - with_dot - without_dot;
  // Only runs with integer weights use the peak: from float runs alone it would be an
  // assumption no kernel measured, written into the spec.
  if (!start.is_gpu() && start.peak_int8 <= 0 && with_dot > 0 && int_runs > 0) {
    if (with_dot == runs.size()) {
      fit_start.peak_int8 = 4.0 * start.peak_fp32;
      int8_note = "the runs used 8-bit dot products (cpu_int8_dot), which " + start.name +
                  " has no peak for: fitted with peak_tflops.int8 = 4 x fp32 = " + fmt_double(fit_start.peak_int8, 4) +
                  " (VNNI's ratio)";
    } else {
      int8_note = std::to_string(with_dot) + " of " + std::to_string(runs.size()) +
                  " runs used 8-bit dot products (cpu_int8_dot), " + std::to_string(without_dot) + " did not" +
                  (unknown ? " and " + std::to_string(unknown) + " do not say (recorded before lathe run wrote it)"
                           : std::string(" (recorded on different hosts?)")) +
                  ": kept " + start.name + "'s dequantization model for integer weights";
    }
  } else if (!start.is_gpu() && start.peak_int8 > 0 && without_dot > 0 && with_dot == 0) {
    int8_note = std::to_string(without_dot) + " of " + std::to_string(runs.size()) +
                " runs were recorded on a CPU without 8-bit dot products (cpu_int8_dot false), but " + start.name +
                " has an int8 peak, so its integer weights are costed as dot products the kernels did not use";
  }
  CalibrationResult res = calibrate(fit_start, train, test, &start);
  Target fitted = res.fitted;
  fitted.name = a.name.empty() ? start.name + "-calibrated" : a.name;
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  std::string comment = "Calibrated by `lathe calibrate` on " + std::string(date) + " from " +
                        printable(a.runs) + " (" + std::to_string(train.size()) + " training run" + (train.size() == 1 ? "" : "s") + ", " +
                        std::to_string(test.size()) + " held out), starting from " + start.name +
                        ".\n";
  comment +=
      "Mean per-phase error: training " + pct(res.train_before) + " -> " + pct(res.train_after) +
      (test.empty() ? "" : ", held out " + pct(res.test_before) + " -> " + pct(res.test_after)) +
      ".\n";
  if (!int8_note.empty()) comment += "Note: " + int8_note + ".\n";
  comment += "Fitted: ";
  for (const FittedFactor& f : res.factors)
    if (f.used)
      comment += f.key + " " + fmt_double(f.before, 4) + " -> " + fmt_double(f.after, 4) + "; ";
  // The fit minimizes log error; on noisy runs the mean relative error can still rise.
  // A rise under the printed 0.1 point is no rise (refitting a calibrated spec moved its
  // error in the 6th digit and warned "2.1% -> 2.1%").
  constexpr double kRise = 1e-3;
  std::string worse;
  if (res.train_after > res.train_before + kRise)
    worse = "the mean relative error on the fitted runs rose (" + pct(res.train_before) + " -> " +
            pct(res.train_after) + "): the runs disagree with each other (a noisy or changing host?); "
            "record them again before trusting this spec";
  auto also = [&worse](const std::string& w) { worse += (worse.empty() ? "" : "; ") + w; };
  if (!test.empty() && res.test_after > res.test_before + kRise)
    also("the error on the held-out runs rose (" + pct(res.test_before) + " -> " + pct(res.test_after) +
         "): the fitted factors do not carry over to runs they were not fitted to; record more runs (other "
         "formats, batches, prompts) or keep the spec as given");
  {
    std::string ends;
    for (const FittedFactor& f : res.factors)
      if (f.at_bound) ends += (ends.empty() ? "" : ", ") + f.key + " " + fmt_double(f.after, 4);
    if (!ends.empty())
      also("fitted to the end of its search range: " + ends +
           " (the runs do not pin it down, or the cost model cannot express what they measured; record more "
           "varied runs, or keep the spec's value)");
  }
  if (train.size() < 3)
    also("only " + std::to_string(train.size()) + " fitted run" + (train.size() == 1 ? "" : "s") +
         ": the factors that depend on a run's shape (the roofline exponent, the CPU size terms) are not pinned "
         "down by so few shapes; record runs at several batches and prompts");
  // The fitted factors describe the kernels the runs ran: stamp the spec with their
  // build, so lathe warns once the kernels change. Runs of several builds (or runs that
  // do not say) leave it unstamped.
  // Factors the fit keeps come from the spec given: a spec measured by another build
  // leaves the result unstamped too (its kept factors describe other kernels).
  fitted.measured_with = measured_with.size() == 1 ? *measured_with.begin() : "";
  if (measured_with.size() > 1) {
    std::string ids;
    for (const std::string& m : measured_with) ids += (ids.empty() ? "" : ", ") + (m.empty() ? "(not said)" : m);
    also("the runs were measured with different kernel builds (" + ids + "); record them with one build");
  } else if (!start.measured_with.empty() && start.measured_with != fitted.measured_with) {
    also(start.name + " was measured with kernel build " + start.measured_with + " and the runs with " +
         (fitted.measured_with.empty() ? std::string("an unnamed one") : fitted.measured_with) +
         ": the factors the fit keeps from it describe other kernels, so the spec is not stamped; probe again "
         "and calibrate from that spec");
    fitted.measured_with.clear();
  }
  if (!worse.empty()) comment += "\nWarning: " + worse + ".";
  if (fitted.description.find("calibrated") == std::string::npos)
    fitted.description += " (calibrated " + std::string(date) + ")";
  write_file_atomic(a.out, target_to_toml(fitted, comment));

  std::ostream& os = report_stream(a.out);  // stderr when -o is stdout
  // On stderr in both formats (the JSON carries them too).
  if (!int8_note.empty()) std::cerr << "lathe: note: " << int8_note << "\n";
  if (!worse.empty()) std::cerr << "lathe: warning: " << worse << "\n";
  if (a.format == "json") {
    nlohmann::json j;
    j["target"] = start.name;
    j["fitted_name"] = fitted.name;
    j["holdout"] = a.holdout;
    j["output"] = a.out;
    j["train_runs"] = train.size();
    j["int8_peak_from_runs"] = fit_start.peak_int8 != start.peak_int8 ? nlohmann::json(fit_start.peak_int8)
                                                                     : nlohmann::json(nullptr);
    if (!int8_note.empty()) j["note"] = int8_note;
    j["test_runs"] = test.size();
    auto or_null = [&](double v) { return test.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); };
    j["error"] = {{"train_before", res.train_before},
                  {"train_after", res.train_after},
                  {"test_before", or_null(res.test_before)},
                  {"test_after", or_null(res.test_after)}};
    if (!worse.empty()) j["warning"] = worse;
    j["factors"] = nlohmann::json::array();
    for (const FittedFactor& f : res.factors)
      j["factors"].push_back(
          {{"key", f.key}, {"before", f.before}, {"after", f.after}, {"fitted", f.used}, {"at_bound", f.at_bound}});
    j["phases"] = nlohmann::json::array();
    for (const auto* set : {&res.train, &res.test})
      for (const PhaseError& e : *set)
        j["phases"].push_back({{"run", e.run},
                               {"phase", e.phase},
                               {"held_out", set == &res.test},
                               {"measured_ms", e.measured_s * 1e3},
                               {"before_ms", e.before_s * 1e3},
                               {"after_ms", e.after_s * 1e3}});
    os << j.dump(2) << "\n";
    return 0;
  }
  os << "lathe calibrate: " << runs.size() << " runs from " << a.runs << " against "
            << start.name << " (" << train.size() << " to fit, " << test.size()
            << " held out" << (test.empty() ? "" : ": one run in " + std::to_string(a.holdout)) << ")\n";
  os << "\n";
  Table f({"factor", "before", "after", ""});
  for (const FittedFactor& x : res.factors)
    f.add({x.key, fmt_double(x.before, 4), fmt_double(x.after, 4),
           !x.used ? "(no kernel depends on it: kept)" : x.at_bound ? "(at the end of its range: not pinned down)" : ""});
  os << f.text("  ") << "\n";
  Table t({"run", "phase", "set", "measured ms", "before ms", "error", "after ms", "error"});
  for (const auto* set : {&res.train, &res.test})
    for (const PhaseError& e : *set)
      t.add({e.run, e.phase, set == &res.test ? "held out" : "fit",
             fmt_double(e.measured_s * 1e3, 3), fmt_double(e.before_s * 1e3, 3),
             pct((e.before_s - e.measured_s) / e.measured_s), fmt_double(e.after_s * 1e3, 3),
             pct((e.after_s - e.measured_s) / e.measured_s)});
  os << t.text("  ") << "\n";
  os << "  mean per-phase error: fitted runs " << pct(res.train_before) << " -> "
            << pct(res.train_after);
  if (!test.empty())
    os << "; held-out runs " << pct(res.test_before) << " -> " << pct(res.test_after);
  os << "\n  wrote " << a.out << " (hardware " << fitted.name << "; use it with --hw "
            << a.out << ")\n";
  return 0;
}

}  // namespace

void register_calibrate(CLI::App& app, Registry& r) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit a hardware spec's efficiency factors and CPU size terms to measured runs; write the calibrated spec");
  cmd->add_option(
         "RUNS", a->runs,
         "runs recorded with `lathe run MODEL --per-op --format json` (one JSON object each)")
      ->required();
  cmd->add_option("--hw", a->hw, "the hardware spec to calibrate (name or TOML), e.g. cpu-host")
      ->required();
  cmd->add_option("-o,--out", a->out, "write the calibrated hardware spec TOML here")->required();
  cmd->add_option("--name", a->name, "name of the calibrated target (default HW-calibrated)")->check(non_empty());
  cmd->add_option("--holdout", a->holdout,
                  "hold out every N-th run to measure the error on (default 3; 0 = none; N >= 2)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--format", a->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, a] { r.action = [a] { return run_calibrate(*a); }; });
}

}  // namespace lathe::cli
