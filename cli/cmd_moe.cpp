// lathe moe-sim: expert placement over GPUs for MoE decode: per-GPU load, step time
// and the speed-up of each placement under a skewed expert load.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/planning.h"
#include "cli/scenario_args.h"
#include "ir/assert.h"
#include "simulator/moe_placement.h"

namespace lathe::cli {

namespace {

struct MoeArgs {
  ScenarioArgs common;
  std::optional<std::string> load, histogram, batches;
  std::optional<double> skew;
  std::optional<int64_t> gpus, context, prompt, hot, samples;
  std::optional<uint64_t> seed;
  bool allow_oom = false;
};

std::vector<double> number_list(const std::string& flag, const std::string& s) {
  std::vector<double> out;
  for (const std::string& x : split_commas(s, flag)) {
    try {
      size_t used = 0;
      double v = std::stod(x, &used);
      if (used != x.size() || !(v >= 0) || !std::isfinite(v) ||
          x.find_first_not_of("0123456789.eE+-") != std::string::npos)  // no hex, no spaces
        throw std::invalid_argument(x);
      out.push_back(v);
    } catch (...) {
      throw Error(flag + ": '" + x + "' is not a non-negative number");
    }
  }
  if (out.empty()) throw Error(flag + ": empty list");
  return out;
}

void apply_flags(const MoeArgs& a, MoeOptions& o) {
  if (a.load) {
    if (*a.load == "uniform")
      o.load = ExpertLoadKind::uniform;
    else if (*a.load == "zipf")
      o.load = ExpertLoadKind::zipf;
    else if (*a.load == "histogram")
      o.load = ExpertLoadKind::histogram;
    else
      throw Error("--load: expected uniform, zipf or histogram, got '" + *a.load + "'");
  }
  if (a.histogram) {
    if (a.load && o.load != ExpertLoadKind::histogram)
      throw Error("--histogram: needs --load histogram (or no --load), not --load " + *a.load);
    o.histogram = number_list("--histogram", *a.histogram);
    o.load = ExpertLoadKind::histogram;
  }
  if (o.load == ExpertLoadKind::histogram && o.histogram.empty())
    throw Error("--load histogram needs --histogram N1,N2,... (tokens routed to each expert)");
  if (a.skew && o.load != ExpertLoadKind::zipf)  // it was accepted and ignored
    throw Error(std::string("--zipf-skew: needs --load zipf (the default), not ") +
                (o.load == ExpertLoadKind::uniform ? "a uniform load" : "a histogram load"));
  if (a.skew) o.zipf_skew = *a.skew;
  if (a.gpus) o.gpus = *a.gpus;
  if (a.context && a.prompt)  // a prefill's context is its prompt: --context was ignored
    throw Error("--context: a decode step's context; with --prompt (a prefill) give one or the other");
  // A flag picks the phase over the scenario file's: --context is a decode step even
  // where the file sets a prefill's prompt (which won, the flag ignored).
  if (a.context) o.context = *a.context, o.prompt = 0;
  if (a.prompt) o.prompt = *a.prompt;
  if (a.hot) o.hot_replicas = *a.hot;
  if (a.samples) o.samples = *a.samples;
  if (a.seed) o.seed = *a.seed;
  if (a.batches) {
    o.batches = int_list(*a.batches, "--batch", 1, int64_t(1) << 20);
  }
}

std::string shares_text(const std::vector<double>& v, int width = 0) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + fmt_double(100 * v[i], width) + "%";
  return s;
}

// Experts of each device, consecutive ids as ranges ("0-3,6"). Above 96 characters in
// all (hundreds of experts), each device shows its count where that is shorter:
// --format json lists them.
std::string experts_text(const std::vector<std::vector<int>>& on) {
  std::string s, counts;
  for (size_t g = 0; g < on.size(); ++g) {
    s += (g ? " | " : "");
    counts += (g ? " | " : "") + std::to_string(on[g].size());
    std::vector<int> ids = on[g];
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size();) {
      size_t j = i;
      while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
      s += (i ? "," : "") + std::to_string(ids[i]);
      if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(ids[j]);
      i = j + 1;
    }
  }
  if (s.size() <= 96 || s.size() <= counts.size() + 8) return s;
  if (counts.size() <= 96) return counts + " experts";
  // Dozens of devices: the range of the counts, and how many devices hold the most.
  size_t lo = on[0].size(), hi = lo, at_hi = 0;
  for (const std::vector<int>& e : on) lo = std::min(lo, e.size()), hi = std::max(hi, e.size());
  for (const std::vector<int>& e : on) at_hi += e.size() == hi;
  if (lo == hi) return std::to_string(hi) + " experts each";
  return std::to_string(lo) + "-" + std::to_string(hi) + " experts (" + std::to_string(hi) + " on " +
         std::to_string(at_hi) + " of " + std::to_string(on.size()) + " GPUs)";
}

// A value per device: every one up to 8 devices, else the range and the busiest device.
std::string per_gpu_text(const std::vector<double>& v, double scale, int digits, const char* unit) {
  std::string s;
  if (v.size() <= 8) {
    for (size_t g = 0; g < v.size(); ++g) s += (g ? " " : "") + fmt_double(v[g] * scale, digits) + unit;
    return s;
  }
  const auto lo = std::min_element(v.begin(), v.end()), hi = std::max_element(v.begin(), v.end());
  return fmt_double(*lo * scale, digits) + unit + "-" + fmt_double(*hi * scale, digits) + unit + " (max: GPU " +
         std::to_string(hi - v.begin()) + ")";
}

// Bytes on the fullest device of a placement at a batch: the non-expert weights (every
// device holds them: attention is data-parallel), the experts placed on it (copies
// included) in every MoE layer, and the KV cache and activations of its
// ceil(batch / gpus) sequences (the plan's figures for its batch, scaled per sequence).
double gpu_bytes(const Planned& p, const MoeResult& r, const PlacementResult& pl, int64_t batch) {
  const MemoryFootprint& m = p.sim.mem;
  const double experts_all = double(r.layers) * double(r.experts) * r.expert_bytes;
  const double dense = std::max(0.0, m.weights - experts_all);
  size_t most = 0;
  for (const std::vector<int>& e : pl.experts_on_gpu) most = std::max(most, e.size());
  const double local = std::ceil(double(batch) / double(r.gpus));
  return dense + double(r.layers) * double(most) * r.expert_bytes +
         (m.kv + m.activations) * local / double(std::max<int64_t>(1, p.workload.batch));
}

int run_moe(const MoeArgs& a) {
  PlanRequest req;
  ScenarioSpec s = a.common.resolve(ScenarioKind::moe, Workload{1, 512, 128}, req);
  apply_flags(a, s.moe);
  MoeOptions& o = s.moe;
  int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  req.workload =
      o.prompt > 0 ? Workload{max_batch, o.prompt, 2} : Workload{max_batch, o.context, 2};
  Planned p = make_plan(req, {}, false);
  // The plan carries two tokens past the prefill or decode context it is lowered for; the
  // context costed is the one to hold against the model's (it warned at --context 255 of 256).
  if (const int64_t ctx = o.prompt > 0 ? o.prompt : o.context; ctx > p.model.max_context)
    std::cerr << "lathe: warning: " << (o.prompt > 0 ? "--prompt " : "--context ") << ctx << " exceeds "
              << p.model.name << "'s max_context (" << p.model.max_context << "); figures are extrapolated\n";
  MoeResult r = simulate_moe(p.lowered.prefill, p.lowered.decode, p.target, o, a.common.ideal);
  const double capacity = p.target.capacity_bytes();
  {
    // Nothing fits: even the smallest batch's leanest placement overflows a device.
    double least = 0;
    int64_t at = 0;
    for (const MoeBatchResult& b : r.batches)
      for (const PlacementResult& pl : b.placements) {
        const double x = gpu_bytes(p, r, pl, b.batch);
        if (at == 0 || x < least) least = x, at = b.batch;
      }
    if (at > 0 && least > capacity && !a.allow_oom)
      throw Error("does not fit: at batch " + std::to_string(at) +
                  (r.gpus == 1 ? std::string(" the GPU") : " the fullest of the " + std::to_string(r.gpus) + " GPUs") +
                  " needs " + human_bytes(least) + " of " + human_bytes(capacity) + " (" + p.target.name +
                  "); use more --gpus, int4 weights or a larger device (--allow-oom prints the figures anyway)");
  }
  std::string load = std::string(expert_load_name(o.load)) +
                     (o.load == ExpertLoadKind::zipf ? " skew " + fmt_double(o.zipf_skew, 2) : "");
  if (a.common.format == "json") {
    nlohmann::json j = {{"model", p.model.name},
                        {"hardware", p.target.name},
                        {"plan", describe_options(p)},
                        {"scenario", s.name},
                        {"experts", r.experts},
                        {"top_k", r.top_k},
                        {"gpus", r.gpus},
                        {"layers", r.layers},
                        {"load", load},
                        {"expert_share", r.expert_share},
                        {"expert_bytes_per_layer", r.expert_bytes},
                        {"context", o.context},
                        {"prompt", o.prompt},
                        {"samples", o.samples},
                        {"seed", o.seed},
                        {"load_kind", std::string(expert_load_name(o.load))},
                        {"zipf_skew", o.load == ExpertLoadKind::zipf ? nlohmann::json(o.zipf_skew) : nlohmann::json(nullptr)},
                        {"link_gbs", p.target.link_bytes_per_s() / 1e9},
                        {"interconnect_latency_us", p.target.interconnect_latency_us},
                        {"ideal", a.common.ideal}};
    for (const MoeBatchResult& b : r.batches) {
      nlohmann::json jb = {{"batch", b.batch}, {"search_stopped", b.search_stopped}};
      for (const PlacementResult& pl : b.placements) {
        const double mem = gpu_bytes(p, r, pl, b.batch);
        jb["placements"].push_back({{"placement", std::string(placement_name(pl.kind))},
                                    {"experts_on_gpu", pl.experts_on_gpu},
                                    {"gpu_load_share", pl.gpu_load_share},
                                    {"gpu_expert_ms",
                                     [&] {
                                       std::vector<double> v;
                                       for (double x : pl.gpu_expert_s) v.push_back(x * 1e3);
                                       return v;
                                     }()},
                                    {"router_ms", pl.router_s * 1e3},
                                    {"dispatch_ms", pl.dispatch_s * 1e3},
                                    {"experts_ms", pl.experts_s * 1e3},
                                    {"combine_ms", pl.combine_s * 1e3},
                                    {"other_ms", pl.other_s * 1e3},
                                    {"step_ms", pl.step_s * 1e3},
                                    {"speedup", pl.speedup},
                                    {"extra_expert_bytes", pl.extra_expert_bytes},
                                    {"gpu_memory_bytes", mem},
                                    {"fits", mem <= capacity}});
      }
      j["batches"].push_back(jb);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "lathe moe-sim: " << p.model.name << " on " << r.gpus << " x "
            << describe_target(p.target) << (s.name.empty() ? "" : "; scenario " + s.name) << "\n";
  std::cout << "  plan      " << describe_options(p) << "\n";
  std::cout << "  parallel  experts over " << r.gpus << (r.gpus == 1 ? " GPU" : " GPUs")
            << ", attention data-parallel; all-to-all over "
            << fmt_double(p.target.link_bytes_per_s() / 1e9, 0) << " GB/s per GPU ("
            << fmt_double(p.target.link_bytes_per_s() / 2e9, 0) << " each way), "
            << fmt_double(p.target.interconnect_latency_us, 1) << " us per step\n";
  std::cout << "  routing   top-" << r.top_k << " of " << r.experts << " experts, " << load;
  if (r.expert_share.size() <= 16) {
    std::cout << "; expert shares " << shares_text(r.expert_share) << "\n";
  } else {
    std::vector<double> v = r.expert_share;
    std::sort(v.begin(), v.end(), std::greater<double>());
    const size_t k = size_t(std::min<int64_t>(r.top_k, int64_t(v.size())));
    std::cout << "; expert shares from " << fmt_double(100 * v.front(), 2) << "% to "
              << fmt_double(100 * v.back(), 2) << "%, the hottest " << k << " "
              << fmt_double(100 * std::accumulate(v.begin(), v.begin() + long(k), 0.0), 1)
              << "% (--format json lists them)\n";
  }
  std::cout << "  experts   " << human_bytes(r.expert_bytes) << " of weights per expert per layer; "
            << (o.prompt > 0 ? "prefill of " + std::to_string(o.prompt) + " tokens per sequence"
                             : "decode at context " + std::to_string(o.context))
            << ", up to " << o.samples << " sampled routing steps per batch size, seed " << o.seed
            << "\n";
  for (const MoeBatchResult& b : r.batches) {
    std::cout << "\n  batch " << b.batch << " (times per MoE layer unless noted; step = all "
              << r.layers << " layers + attention and the rest"
              << (o.prompt > 0 ? ", one prefill pass" : "") << ")\n";
    Table t({"placement", "step ms", "speed-up", "router", "dispatch", "experts", "combine",
             "rest/step", "GB/GPU", "per-GPU load", "per-GPU expert ms", "experts per GPU"});
    for (const PlacementResult& pl : b.placements) {
      const double mem = gpu_bytes(p, r, pl, b.batch);
      t.add({std::string(placement_name(pl.kind)), fmt_double(pl.step_s * 1e3, 2),
             "x" + fmt_double(pl.speedup, 2), fmt_double(pl.router_s * 1e3, 3),
             fmt_double(pl.dispatch_s * 1e3, 3), fmt_double(pl.experts_s * 1e3, 3),
             fmt_double(pl.combine_s * 1e3, 3), fmt_double(pl.other_s * 1e3, 2),
             fmt_double(mem / 1e9, 1) + (mem > capacity ? " NO" : ""),
             per_gpu_text(pl.gpu_load_share, 100, r.gpus > 8 ? 1 : 0, "%"), per_gpu_text(pl.gpu_expert_s, 1e3, 3, ""),
             experts_text(pl.experts_on_gpu)});
    }
    std::cout << t.text("  ");
    if (r.gpus > 8)
      std::cout << "  (per-GPU load and expert ms: the range over the " << r.gpus
                << " GPUs and the busiest; --format json lists each GPU)\n";
    if (b.search_stopped)
      std::cout << "  balanced: the swap search stopped at its budget before converging (the best "
                   "placement it found is shown)\n";
    const PlacementResult& rep = b.placements.back();
    if (rep.extra_expert_bytes > 0)
      std::cout << "  replicated: up to " << human_bytes(rep.extra_expert_bytes)
                << " more expert weights on one GPU for the copies\n";
  }
  return 0;
}

}  // namespace

void register_moe(CLI::App& app, Registry& r) {
  auto a = std::make_shared<MoeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "moe-sim", "Simulate MoE expert placement over GPUs: load, all-to-all, step time");
  a->common.add_to(cmd, {"text", "json"});
  cmd->add_option("--load", a->load, "expert load: uniform, zipf (default) or histogram");
  cmd->add_option("--zipf-skew", a->skew, "Zipf skew s: expert of rank r gets 1/r^s (1.0)")
      ->check(number_in(0.0, 10.0));
  cmd->add_option("--histogram", a->histogram,
                  "measured tokens per expert, comma separated (implies --load histogram)");
  cmd->add_option("--gpus", a->gpus, "expert-parallel GPUs (4)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--batch", a->batches, "comma-separated decode batch sizes (1,64)");
  cmd->add_option("--context", a->context, "decode context of every sequence (1024)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--prompt", a->prompt,
                  "cost a prefill of N tokens per sequence instead of a decode step")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--hot-replicas", a->hot,
                  "replicated: hottest experts copied to a second GPU (default gpus / 2; 0: none)")
      ->check(CLI::Range(int64_t(0), int64_t(65536)));
  cmd->add_option("--samples", a->samples, "sampled routing steps per batch size (256)")
      ->check(CLI::Range(int64_t(1), int64_t(1000000)));
  cmd->add_option("--seed", a->seed, "seed of the routing samples and the Zipf ranks (1)")->check(non_negative_integer());
  cmd->add_flag("--allow-oom", a->allow_oom, "print the figures even when no placement fits in device memory");
  cmd->callback([&r, a] { r.action = [a] { return run_moe(*a); }; });
}

}  // namespace lathe::cli
