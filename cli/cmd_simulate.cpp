// lathe simulate / lathe whatif: roofline predictions for a plan on one or several
// targets.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "ir/assert.h"
#include "simulator/plots.h"
#include "simulator/profile.h"

namespace lathe::cli {

namespace {

struct SimulateArgs {
  std::string model, hardware;
  WorkloadFlags workload;
  PlanFlags plan;
  std::vector<std::string> sets;
  bool ideal = false, per_op = false, allow_oom = false;
  int64_t prefill_chunk = 0;
  std::string format = "text", plot, trace;
};

std::string ms(double s) { return fmt_double(s * 1e3, s * 1e3 < 10 ? 3 : 2); }

std::string bound_text(const PhaseSummary& p) {
  double share = p.bound == Bound::compute ? p.compute_share
                 : p.bound == Bound::memory ? p.memory_share
                 : p.bound == Bound::launch ? p.launch_share
                                            : p.network_share;
  return std::string(bound_name(p.bound)) + "-bound (" + fmt_double(share * 100, 0) + "% of time)";
}

// A row's share of its phase's time.
double phase_share(const SimResult& r, const OpRow& o) {
  const double phase = o.phase == Phase::prefill ? r.prefill.time_s : r.decode.time_s;
  return phase > 0 ? o.time_s / phase : 0.0;
}

// Decode rows are sums over every decode step (time_ms, flops, bytes); step_time_ms is
// one step at the mean context, the figure the text table shows.
nlohmann::json op_json(const SimResult& r, const OpRow& o, const KernelProfile& k) {
  return {{"name", o.name},
          {"kernel", o.kernel},
          {"class", std::string(kernel_class_name(o.cls))},
          {"phase", std::string(phase_name(o.phase))},
          {"flops", o.flops},
          {"bytes", o.bytes},
          {"intensity", o.bytes > 0 ? o.flops / o.bytes : 0.0},
          {"time_ms", o.time_s * 1e3},
          {"step_time_ms", o.step_time_s * 1e3},
          {"share", phase_share(r, o)},
          {"compute_ms", o.compute_s * 1e3},
          {"memory_ms", o.memory_s * 1e3},
          {"network_ms", o.network_s * 1e3},
          {"launch_ms", o.launch_s * 1e3},
          {"bound", std::string(bound_name(o.bound))},
          {"achieved_flops_per_s", k.achieved_flops_per_s},
          {"achieved_bytes_per_s", k.achieved_bytes_per_s},
          {"compute_utilization", k.compute_utilization},
          {"bandwidth_utilization", k.bandwidth_utilization},
          {"l2_hit_rate", k.l2_hit_rate ? nlohmann::json(*k.l2_hit_rate) : nlohmann::json(nullptr)}};
}

std::string pct(double v) { return fmt_double(100 * v, 1) + "%"; }

// Each resource's share of a phase's time (what "bound by" is read from).
nlohmann::json shares_json(const PhaseSummary& ph) {
  return {{"compute", ph.compute_share},
          {"memory", ph.memory_share},
          {"launch", ph.launch_share},
          {"network", ph.network_share}};
}

nlohmann::json result_json(const Planned& p, bool ideal) {
  const SimResult& r = p.sim;
  nlohmann::json j = {
      {"model", p.model.name},
      {"hardware", p.target.name},
      {"batch", p.workload.batch},
      {"prompt", p.workload.prompt},
      {"gen", p.workload.gen},
      {"tp", p.options.tp},
      {"weights", weights_format(p)},
      {"act", p.lowered.decode.attrs.s("act_dtype")},
      {"options", describe_options(p)},
      {"kv_layout", p.lowered.decode.attrs.s("kv_layout")},
      {"kv_dtype", p.lowered.decode.attrs.s("kv_dtype")},
      {"prefill_ms", r.prefill.time_s * 1e3},
      {"prefill_chunk", p.prefill_chunk},
      {"decode_ms", r.decode.time_s * 1e3},
      {"decode_steps", r.decode.steps},
      {"ttft_ms", r.ttft_s * 1e3},
      {"tpot_ms", r.tpot_s * 1e3},
      {"e2e_ms", r.e2e_s * 1e3},
      {"tokens_per_s", r.tokens_per_s},
      {"decode_tokens_per_s", r.decode_tokens_per_s},
      {"prefill_tokens_per_s", r.prefill_tokens_per_s},
      {"prefill_bound", std::string(bound_name(r.prefill.bound))},
      {"decode_bound", r.decode.steps ? nlohmann::json(std::string(bound_name(r.decode.bound))) : nlohmann::json(nullptr)},
      {"prefill_time_shares", shares_json(r.prefill)},
      {"decode_time_shares", r.decode.steps ? shares_json(r.decode) : nlohmann::json(nullptr)},
      {"kv_layout_reason", p.lowered.decode.attrs.s("kv_layout_reason", p.lowered.decode.attrs.s("kv_layout"))},
      {"ideal", ideal},
      {"prefill_flops", r.prefill.flops},
      {"prefill_bytes", r.prefill.bytes},
      {"decode_flops", r.decode.flops},
      {"decode_bytes", r.decode.bytes},
      {"prefill_kernels", r.prefill.kernels},
      {"decode_kernels_per_step", r.decode.kernels},
      {"memory_bytes",
       {{"weights", r.mem.weights},
        {"kv", r.mem.kv},
        {"activations", r.mem.activations},
        {"total", r.mem.total},
        {"capacity", r.mem.capacity}}},
      {"fits", r.mem.fits},
      {"max_batch", r.mem.max_batch},
      {"simulated", true}};
  j["ops"] = nlohmann::json::array();
  std::vector<KernelProfile> prof = profile_ops(r, p.lowered.prefill, p.lowered.decode, p.target);
  for (size_t i = 0; i < r.ops.size(); ++i) j["ops"].push_back(op_json(r, r.ops[i], prof[i]));
  return j;
}

Table op_table(const SimResult& r, const std::vector<KernelProfile>& prof) {
  Table t({"phase", "kernel", "node", "FLOPs", "bytes", "FLOP/B", "bound", "time ms", "share", "TFLOP/s", "GB/s",
           "compute", "DRAM BW", "L2 hit"});
  // Shares to 0.1% add up to about 100% over a few hundred rows; over more (1,600 of
  // llama-3-70b at tp 4) the rounding summed to 88% and 105%: a digit more there.
  const int share_digits = r.ops.size() > 400 ? 3 : r.ops.size() > 100 ? 2 : 1;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const OpRow& o = r.ops[i];
    const KernelProfile& k = prof[i];
    // gen <= 1 runs no decode step: its rows would show a step's time beside no work.
    if (o.phase == Phase::decode && r.decode.steps == 0) continue;
    const PhaseSummary& ph = o.phase == Phase::prefill ? r.prefill : r.decode;
    double steps = o.phase == Phase::decode ? r.decode.steps : 1;
    t.add({std::string(phase_name(o.phase)), o.kernel, o.name, human_count(o.flops / steps),
           human_bytes(o.bytes / steps), fmt_double(o.bytes > 0 ? o.flops / o.bytes : 0, 1),
           std::string(bound_name(o.bound)), fmt_double(o.step_time_s * 1e3, 4),
           fmt_double(ph.time_s > 0 ? 100.0 * o.time_s / ph.time_s : 0, share_digits) + "%",
           fmt_double(k.achieved_flops_per_s / 1e12, 2), fmt_double(k.achieved_bytes_per_s / 1e9, 0),
           o.cls == KernelClass::collective ? "-" : pct(k.compute_utilization), pct(k.bandwidth_utilization),
           k.l2_hit_rate ? pct(*k.l2_hit_rate) : "-"});
  }
  return t;
}

Table op_csv(const SimResult& r, const std::vector<KernelProfile>& prof) {
  Table t({"phase", "name", "kernel", "class", "flops", "bytes", "intensity", "bound", "time_ms", "step_time_ms",
           "share", "compute_ms", "memory_ms", "launch_ms", "network_ms", "achieved_tflops", "achieved_gbs", "compute_utilization",
           "bandwidth_utilization", "l2_hit_rate"});
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const OpRow& o = r.ops[i];
    const KernelProfile& k = prof[i];
    t.add({std::string(phase_name(o.phase)), o.name, o.kernel, std::string(kernel_class_name(o.cls)),
           fmt_double(o.flops, 0), fmt_double(o.bytes, 0), fmt_double(o.bytes > 0 ? o.flops / o.bytes : 0, 4),
           std::string(bound_name(o.bound)), fmt_double(o.time_s * 1e3, 6), fmt_double(o.step_time_s * 1e3, 6),
           fmt_double(phase_share(r, o), 6), fmt_double(o.compute_s * 1e3, 6), fmt_double(o.memory_s * 1e3, 6), fmt_double(o.launch_s * 1e3, 6),
           fmt_double(o.network_s * 1e3, 6), fmt_double(k.achieved_flops_per_s / 1e12, 6), fmt_double(k.achieved_bytes_per_s / 1e9, 3),
           fmt_double(k.compute_utilization, 6), fmt_double(k.bandwidth_utilization, 6),
           k.l2_hit_rate ? fmt_double(*k.l2_hit_rate, 6) : ""});
  }
  return t;
}

void print_summary(const Planned& p, bool ideal) {
  const SimResult& r = p.sim;
  const Workload& w = p.workload;
  std::cout << "lathe simulate: " << p.model.name << " on " << describe_target(p.target)
            << (ideal ? "  [ideal roofline: no efficiency factors, no launch overhead]" : "") << "\n";
  std::cout << "  workload  batch " << w.batch << ", prompt " << w.prompt << ", generate " << w.gen
            << " (final context " << w.final_context() << ")";
  if (p.prefill_chunk > 0)
    std::cout << "; prefill in " << (w.prompt + p.prefill_chunk - 1) / p.prefill_chunk << " chunks of at most "
              << p.prefill_chunk << " tokens";
  std::cout << "\n";
  std::cout << "  plan      " << describe_options(p) << "; " << r.prefill.kernels << " prefill kernels, "
            << r.decode.kernels << " per decode step\n\n";
  double e2e = r.e2e_s > 0 ? r.e2e_s : 1;
  Table lat({"latency", "ms", "share", "bound by"});
  lat.add({"prefill (TTFT)", ms(r.prefill.time_s), fmt_double(100 * r.prefill.time_s / e2e, 1) + "%",
           bound_text(r.prefill)});
  lat.add({"decode (" + std::to_string(r.decode.steps) + " steps)", ms(r.decode.time_s),
           fmt_double(100 * r.decode.time_s / e2e, 1) + "%", r.decode.steps ? bound_text(r.decode) : "-"});
  lat.add({"E2E", ms(r.e2e_s), "100.0%", ""});
  std::cout << lat.text("  ");
  std::cout << "  TTFT " << ms(r.ttft_s) << " ms, TPOT " << ms(r.tpot_s) << " ms/token"
            << (r.decode.steps == 0 ? " (no decode step runs: one step at context " + std::to_string(w.prompt + 1) + ")"
                                    : std::string())
            << "; throughput "
            << fmt_double(r.tokens_per_s, 1) << " generated tok/s (batch), decode " << fmt_double(r.decode_tokens_per_s, 1)
            << " tok/s, prefill " << fmt_double(r.prefill_tokens_per_s, 0) << " tok/s\n\n";
  const MemoryFootprint& m = r.mem;
  Table mem({p.options.tp > 1 ? "memory (per device, tp " + std::to_string(p.options.tp) + ")" : std::string("memory"),
             "GB", "note"});
  mem.add({"weights", fmt_double(m.weights / 1e9, 3), ""});
  // A paged cache holds whole blocks: the note says so where a block rounds up (paged:4096
  // charged 4096 positions for a 200-token sequence, and the note said 200).
  const int64_t block = kv_block_of(p.lowered.decode);
  const int64_t held = (w.final_context() + block - 1) / block * block;
  mem.add({"KV cache", fmt_double(m.kv / 1e9, 3),
           std::to_string(w.batch) + " x " + std::to_string(w.final_context()) + " tokens in " +
               p.lowered.decode.attrs.s("kv_dtype") +
               (held != w.final_context() ? " (" + std::to_string(held) + " held: whole blocks of " +
                                                std::to_string(block) + ")"
                                          : std::string())});
  mem.add({"activations", fmt_double(m.activations / 1e9, 3),
           p.lowered.decode.attrs.has("arena_bytes") ? "peak of the memory plan's arenas" : "peak live (no plan)"});
  mem.add({"total", fmt_double(m.total / 1e9, 3),
           "of " + fmt_double(m.capacity / 1e9, 1) + " GB: " +
               (m.fits ? "fits, up to batch " + std::to_string(m.max_batch)
                       : "DOES NOT FIT: " + fmt_double((m.total - m.capacity) / 1e9, 3) + " GB too much; " +
                             (m.max_batch > 0 ? "the largest batch that fits is " + std::to_string(m.max_batch)
                                              : std::string("no batch fits at this context")))});
  std::cout << mem.text("  ");
  std::cout << "  KV layout: " << p.lowered.decode.attrs.s("kv_layout_reason", p.lowered.decode.attrs.s("kv_layout"))
            << "\n";
}

int run_simulate(const SimulateArgs& a) {
  // --plot or --trace /dev/stdout: the file alone on stdout, the report on stderr.
  ReportAwayFromOutput away_plot(a.plot), away_trace(a.trace);
  PlanSpec spec = a.plan.plan_spec();
  PlanRequest req;
  req.model = !a.model.empty() ? a.model : spec.model.value_or("");
  req.hardware = !a.hardware.empty() ? a.hardware : spec.hardware.value_or("");
  if (req.model.empty()) throw Error("no MODEL given (as an argument or in the plan file)");
  if (req.hardware.empty()) throw Error("no HW given (as an argument or in the plan file)");
  req.sets = a.sets;
  req.workload = a.workload.resolve(spec.workload);
  req.options = spec.options;
  req.ideal = a.ideal;
  req.prefill_chunk = a.prefill_chunk;
  if (a.prefill_chunk > 0 && (req.workload.prompt + a.prefill_chunk - 1) / a.prefill_chunk > 65536)
    throw Error("--prefill-chunk " + std::to_string(a.prefill_chunk) + ": a prompt of " +
                std::to_string(req.workload.prompt) + " tokens in more than 65,536 chunks; give a larger chunk");
  // Both output files are checked before any work and written together at the end, so a
  // failure leaves neither behind.
  if (!a.plot.empty() && !a.trace.empty() && same_file_path(a.plot, a.trace))
    throw Error("--plot and --trace name the same file (" + a.trace + "): give two paths");
  // The model, hardware and plan files this command reads are not outputs.
  for (const auto& [flag, out] : {std::pair<const char*, const std::string&>{"--plot", a.plot}, {"--trace", a.trace}}) {
    if (out.empty()) continue;
    check_output_file(out);
    refuse_plan_inputs(out, flag, req, a.plan.plan_file);
  }
  LowerHooks hooks;
  hooks.record = false;  // the per-pass report is `lathe compile`'s, not shown here
  hooks.verify_each_pass = false;
  Planned p = make_plan(req, hooks, true);
  for (const std::string& w : check_workload(p.model, p.workload)) std::cerr << "lathe: warning: " << w << "\n";
  if (!a.ideal)  // --ideal uses no efficiency factor
    for (const std::string& w : check_target(p.target)) std::cerr << "lathe: warning: " << w << "\n";
  if (!p.sim.mem.fits && !a.allow_oom) throw Error(oom_message(p) + " (--allow-oom prints the figures anyway)");
  std::string title = p.model.name + " on " + p.target.name + ", batch " + std::to_string(p.workload.batch) +
                      ", prompt " + std::to_string(p.workload.prompt) + ", gen " + std::to_string(p.workload.gen);
  {
    std::optional<AtomicFile> plot, trace;  // both opened before either is written
    if (!a.plot.empty()) plot.emplace(a.plot);
    if (!a.trace.empty()) trace.emplace(a.trace);
    if (plot) plot->write(roofline_svg(p.sim, p.target, title));
    if (trace) trace->write(trace_json(p.sim, title));
    if (plot) plot->finish();  // both written out before either replaces its destination
    if (trace) trace->finish();
    if (plot) plot->commit();
    if (trace) trace->commit();
  }
  if (a.format == "json") {
    std::cout << result_json(p, a.ideal).dump(2) << "\n";
    return 0;
  }
  if (a.format == "csv") {
    std::cout << op_csv(p.sim, profile_ops(p.sim, p.lowered.prefill, p.lowered.decode, p.target)).csv();
    return 0;
  }
  print_summary(p, a.ideal);
  if (a.per_op)
    std::cout << "\nPer kernel (decode rows: one step at the mean context; share of the phase; achieved rates and\n"
                 "utilization over busy time, of the peak the kernel runs at; L2 hit: the rate the model implies)\n"
              << op_table(p.sim, profile_ops(p.sim, p.lowered.prefill, p.lowered.decode, p.target)).text("  ")
              << (p.sim.decode.steps == 0 ? "  (no decode rows: gen <= 1 runs no decode step)\n" : "");
  if (!a.plot.empty()) std::cout << "\nroofline chart: " << a.plot << "\n";
  if (!a.trace.empty()) std::cout << "trace (open in ui.perfetto.dev or chrome://tracing): " << a.trace << "\n";
  return 0;
}

// ---- whatif ----
struct WhatifArgs {
  std::string model;
  std::string hw, batches, prompts, gens;  // empty: the plan file's, else the defaults
  PlanFlags plan;
  std::vector<std::string> sets;
  bool ideal = false;
  std::string format = "text";
};


// --hw's comma-separated targets. A hardware TOML whose path holds a comma (with or
// without "+key=value" overrides after it) is one item: the whole value when it names a
// file, else, where an item is neither a built-in name nor a file, the shortest run of
// the raw pieces from there (commas and spaces kept) that names one.
std::vector<std::string> split_hw_list(const std::string& list) {
  std::error_code ec;
  auto names_file = [&](const std::string& spec) {
    return std::filesystem::is_regular_file(target_spec_base(spec), ec);
  };
  auto trim = [](const std::string& x) {
    const size_t b = x.find_first_not_of(" \t"), e = x.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : x.substr(b, e - b + 1);
  };
  if (names_file(trim(list))) return {trim(list)};
  std::vector<std::string> raw;
  for (size_t start = 0;;) {
    const size_t c = list.find(',', start);
    raw.push_back(list.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string item = trim(raw[i]);
    const std::string base = target_spec_base(item);
    if (item.empty() || is_builtin_name("hardware", base) || names_file(item)) {
      out.push_back(item);
      continue;
    }
    std::string joined = raw[i];
    size_t taken = i;
    for (size_t j = i + 1; j < raw.size(); ++j) {
      joined += "," + raw[j];
      if (names_file(trim(joined))) {
        taken = j;
        break;
      }
    }
    out.push_back(taken == i ? item : trim(joined));
    i = taken;
  }
  if (out.size() == 1 && out[0].empty()) return {};  // the caller names an empty list
  for (const std::string& x : out)
    if (x.empty()) throw Error("--hw: empty item in the list '" + list + "'");
  return out;
}

int run_whatif(const WhatifArgs& a) {
  PlanSpec spec = a.plan.plan_spec();
  std::string model = !a.model.empty() ? a.model : spec.model.value_or("");
  if (model.empty()) throw Error("no MODEL given");
  // A plan file's hardware and workload stand where the flags are not given.
  std::vector<std::string> hws = {"a100-80g", "h100-sxm", "h200"};
  if (!a.hw.empty()) hws = split_hw_list(a.hw);
  else if (spec.hardware) hws = {*spec.hardware};
  if (hws.empty()) throw Error("--hw: empty list");
  refuse_repeats(hws, hws, "--hw");
  std::vector<int64_t> batches = a.batches.empty() ? std::vector<int64_t>{spec.workload.batch}
                                                   : int_list(a.batches, "--batch", 1, int64_t(1) << 20);
  std::vector<int64_t> prompts = a.prompts.empty() ? std::vector<int64_t>{spec.workload.prompt}
                                                   : int_list(a.prompts, "--prompt", 1, int64_t(1) << 24);
  std::vector<int64_t> gens =
      a.gens.empty() ? std::vector<int64_t>{spec.workload.gen} : int_list(a.gens, "--gen", 0, int64_t(1) << 24);
  // A column whose target cannot run the plan (fp8 on an A100, tp on a device without a
  // link) shows n/a and why; the table fails only when no column can run.
  struct Column {
    Workload workload;
    std::optional<Planned> plan;
    std::string target, why;  // n/a columns: the target's name and why not
  };
  std::vector<Column> cols;
  std::map<std::string, std::string> hw_of_name;  // target name -> the --hw item that gave it
  LowerHooks no_records;
  no_records.record = false;
  no_records.verify_each_pass = false;
  for (const std::string& hw : hws)
    for (int64_t b : batches)
      for (int64_t pr : prompts)
        for (int64_t g : gens) {
          PlanRequest req;
          req.model = model;
          req.hardware = hw;
          req.sets = a.sets;
          req.workload = {b, pr, g};
          req.options = spec.options;
          req.ideal = a.ideal;
          Column c;
          c.workload = req.workload;
          try {
            c.plan = make_plan(req, no_records, false);
            c.target = c.plan->target.name;
          } catch (const UnsupportedOnTarget& e) {
            c.target = e.target;
            c.why = e.what();
          }
          // Two specs of one name (l4 and a copy of l4.toml) gave two columns of one label.
          if (auto [it, fresh] = hw_of_name.emplace(c.target, hw); !fresh && it->second != hw)
            throw Error("--hw: '" + it->second + "' and '" + hw + "' are both named '" + c.target +
                        "', so their columns could not be told apart; give one another name");
          cols.push_back(std::move(c));
        }
  const auto first = std::find_if(cols.begin(), cols.end(), [](const Column& c) { return c.plan.has_value(); });
  if (first == cols.end()) throw Error(cols[0].why);  // no column can run: the first reason
  const Planned& base_plan = *first->plan;
  std::set<std::string> warned;
  for (const Column& c : cols) {
    if (!c.plan) continue;
    for (const std::string& w : check_workload(c.plan->model, c.workload))
      if (warned.insert(w).second) std::cerr << "lathe: warning: " << w << "\n";
    if (!a.ideal)
      for (const std::string& w : check_target(c.plan->target))
        if (warned.insert(w).second) std::cerr << "lathe: warning: " << w << "\n";
  }
  auto label = [&](const Column& c) {
    std::string l = c.target;
    if (batches.size() > 1) l += " b" + std::to_string(c.workload.batch);
    if (prompts.size() > 1) l += " p" + std::to_string(c.workload.prompt);
    if (gens.size() > 1) l += " g" + std::to_string(c.workload.gen);
    return l;
  };
  if (a.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Column& c : cols) {
      nlohmann::json r;
      if (c.plan) {
        r = result_json(*c.plan, a.ideal);
        r.erase("ops");
      } else {
        r = {{"hardware", c.target}, {"batch", c.workload.batch}, {"prompt", c.workload.prompt},
             {"gen", c.workload.gen}, {"unsupported", c.why}};
      }
      r["label"] = label(c);
      j.push_back(r);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (a.format == "csv") {  // one row per column, with the fields of the JSON objects
    const std::vector<std::string> header = {
        "label",        "hardware",       "batch",       "prompt",      "gen",          "weights",
        "kv_dtype",     "act",            "tp",          "prefill_ms",  "ttft_ms",      "decode_ms",
        "tpot_ms",      "e2e_ms",         "tokens_per_s", "decode_tokens_per_s", "memory_bytes", "capacity_bytes",
        "fits",         "max_batch",      "prefill_bound", "decode_bound", "unsupported"};
    Table t(header);
    for (const Column& c : cols) {
      if (!c.plan) {
        std::vector<std::string> row = {label(c), c.target, std::to_string(c.workload.batch),
                                        std::to_string(c.workload.prompt), std::to_string(c.workload.gen)};
        row.resize(header.size() - 1);
        row.push_back(c.why);
        t.add(row);
        continue;
      }
      const Planned& p = *c.plan;
      const SimResult& r = p.sim;
      t.add({label(c), p.target.name, std::to_string(p.workload.batch), std::to_string(p.workload.prompt),
             std::to_string(p.workload.gen), weights_format(p), p.lowered.decode.attrs.s("kv_dtype"),
             p.lowered.decode.attrs.s("act_dtype"), std::to_string(p.options.tp), fmt_double(r.prefill.time_s * 1e3, 6),
             fmt_double(r.ttft_s * 1e3, 6), fmt_double(r.decode.time_s * 1e3, 6), fmt_double(r.tpot_s * 1e3, 6),
             fmt_double(r.e2e_s * 1e3, 6), fmt_double(r.tokens_per_s, 3), fmt_double(r.decode_tokens_per_s, 3),
             fmt_double(r.mem.total, 0), fmt_double(r.mem.capacity, 0), r.mem.fits ? "true" : "false",
             std::to_string(r.mem.max_batch), std::string(bound_name(r.prefill.bound)),
             r.decode.steps ? std::string(bound_name(r.decode.bound)) : std::string(), ""});  // JSON: null
    }
    std::cout << t.csv();
    return 0;
  }
  struct Metric {
    const char* name;
    double (*get)(const SimResult&);
    bool lower_is_better;
    bool integral = false;
  };
  const Metric metrics[] = {
      {"prefill / TTFT ms", [](const SimResult& r) { return r.ttft_s * 1e3; }, true},
      {"decode ms (all steps)", [](const SimResult& r) { return r.decode.time_s * 1e3; }, true},
      {"TPOT ms", [](const SimResult& r) { return r.tpot_s * 1e3; }, true},
      {"E2E ms", [](const SimResult& r) { return r.e2e_s * 1e3; }, true},
      {"generated tok/s", [](const SimResult& r) { return r.tokens_per_s; }, false},
      {"decode tok/s", [](const SimResult& r) { return r.decode_tokens_per_s; }, false},
      {"memory GB", [](const SimResult& r) { return r.mem.total / 1e9; }, true},
      {"max batch", [](const SimResult& r) { return double(r.mem.max_batch); }, false, true},
  };
  std::vector<std::string> headers = {"metric"};
  for (const Column& c : cols) headers.push_back(label(c));
  Table t(headers);
  for (const Metric& m : metrics) {
    std::vector<std::string> row = {m.name};
    double base = m.get(base_plan.sim);
    for (const Column& c : cols) {
      if (!c.plan) {
        row.push_back("n/a");
        continue;
      }
      double v = m.get(c.plan->sim);
      std::string cell = m.integral ? std::to_string(int64_t(v)) : fmt_double(v, v < 10 ? 3 : 1);
      if (&c != &*first && base > 0) cell += " (x" + fmt_double(v / base, 2) + ")";
      row.push_back(cell);
    }
    t.add(row);
  }
  std::vector<std::string> fits = {"fits"}, pb = {"prefill bound"}, db = {"decode bound"};
  for (const Column& c : cols) {
    if (!c.plan) {
      for (auto* row : {&fits, &pb, &db}) row->push_back("n/a");
      continue;
    }
    const SimResult& r = c.plan->sim;
    fits.push_back(r.mem.fits ? "yes" : "NO");
    pb.push_back(std::string(bound_name(r.prefill.bound)));
    db.push_back(r.decode.steps ? std::string(bound_name(r.decode.bound)) : "-");  // gen <= 1: no step
  }
  t.add(fits);
  t.add(pb);
  t.add(db);
  // Targets can resolve options differently (a CPU runs f32 activations): when the
  // columns differ, each shows its own.
  bool same = true;
  for (const Column& c : cols) same &= !c.plan || describe_options(*c.plan) == describe_options(base_plan);
  if (!same) {
    std::vector<std::string> opts = {"options"};
    for (const Column& c : cols) opts.push_back(c.plan ? describe_options(*c.plan) : "n/a");
    t.add(opts);
  }
  std::cout << "lathe whatif: " << base_plan.model.name << ", prompt "
            << (prompts.size() > 1 ? a.prompts : std::to_string(prompts[0])) << ", gen "
            << (gens.size() > 1 ? a.gens : std::to_string(gens[0])) << "; "
            << (same ? describe_options(base_plan) : "options per column (last row)") << "\n  ratios (xN) are to the "
            << (first == cols.begin() ? std::string("first column") : label(*first) + " column (the first with figures)")
            << (a.ideal ? "; ideal roofline" : "") << "\n\n"
            << t.text("  ");
  // Each reason once, with the columns it blanks.
  std::vector<std::pair<std::string, std::string>> reasons;  // (why, labels)
  for (const Column& c : cols) {
    if (c.plan) continue;
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == c.why; });
    if (it == reasons.end())
      reasons.push_back({c.why, label(c)});
    else
      it->second += ", " + label(c);
  }
  for (const auto& [why, labels] : reasons) std::cout << "  n/a (" << labels << "): " << why << "\n";
  return 0;
}

}  // namespace

void register_simulate(CLI::App& app, Registry& r) {
  auto a = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict latency, throughput and memory of a plan on a target");
  cmd->add_option("MODEL", a->model, "built-in model name, model TOML, .gguf file, or Hugging Face directory / config.json (or set in --plan)");
  cmd->add_option("HW", a->hardware, "built-in hardware name or hardware TOML; NAME+key=value adds overrides");
  a->workload.add_to(cmd);
  a->plan.add_to(cmd);
  cmd->add_option("--set", a->sets, "override a hardware field: key=value or key=x1.5 (repeatable)");
  cmd->add_flag("--ideal", a->ideal, "pure roofline: no efficiency factors, no launch overhead");
  cmd->add_option("--prefill-chunk", a->prefill_chunk,
                  "prefill the prompt in chunks of N tokens, each over the context cached before it (chunked "
                  "prefill, as vLLM's): activations are a chunk's; simulated only (lathe run prefills whole prompts)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_flag("--per-op", a->per_op, "one row per kernel");
  cmd->add_flag("--allow-oom", a->allow_oom, "print the figures even when the plan does not fit in memory");
  cmd->add_option("--format", a->format, "text, json or csv (csv: per-kernel rows)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  cmd->add_option("--plot", a->plot, "write a roofline chart (SVG)")->check(non_empty());
  cmd->add_option("--trace", a->trace, "write a Chrome/Perfetto trace of the simulated timeline (JSON)")
      ->check(non_empty());
  cmd->callback([&r, a] { r.action = [a] { return run_simulate(*a); }; });

  auto w = std::make_shared<WhatifArgs>();
  CLI::App* wi = app.add_subcommand("whatif", "Compare a plan across hardware targets, overrides and batch sizes");
  wi->add_option("MODEL", w->model, "built-in model name, model TOML, .gguf file, or Hugging Face directory / config.json");
  wi->add_option("--hw", w->hw,
                 "comma-separated targets; NAME+key=value adds overrides (a100-80g+hbm_bandwidth_gbs=x2); "
                 "default: the --plan file's hardware, else a100-80g,h100-sxm,h200")
      ->check(non_empty());
  wi->add_option("--batch", w->batches, "comma-separated batch sizes (default: the --plan file's, else 1)")
      ->check(non_empty());
  wi->add_option("--prompt", w->prompts, "comma-separated prompt lengths (default: the --plan file's, else 512)")
      ->check(non_empty());
  wi->add_option("--gen", w->gens, "comma-separated generated-token counts (default: the --plan file's, else 128)")
      ->check(non_empty());
  w->plan.add_to(wi);
  wi->add_option("--set", w->sets, "override a hardware field in every column (repeatable)");
  wi->add_flag("--ideal", w->ideal, "pure roofline");
  wi->add_option("--format", w->format, "text, json or csv (one row per column)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  wi->callback([&r, w] { r.action = [w] { return run_whatif(*w); }; });
}

}  // namespace lathe::cli
