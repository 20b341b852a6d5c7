// lathe sweep: cost every plan of a sweep file, print the Pareto front and the best
// plan per objective, compile the winner. lathe merge: join the rows of shards.
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "ir/host.h"
#include "cli/common.h"
#include "cli/planning.h"
#include "ir/assert.h"
#include "sweep/sweep.h"

namespace lathe::cli {

namespace {

struct SweepArgs {
  std::string file, out, emit_best, shard, format = "text";
  int threads = 0;
  int64_t samples = 0, top = 15;
  uint64_t seed = 1;
};

struct MergeArgs {
  std::vector<std::string> files;
  std::string out, sweep, emit_best, format = "text";
  int64_t samples = 0, top = 15;
  uint64_t seed = 1;
  bool allow_missing = false;
};

// A sample's points are drawn and held in memory before any is costed (every shard
// draws them all): 10^8 of them take a few GB (2^40 ran until memory ran out, with no
// progress shown).
constexpr int64_t kMaxSamples = 100'000'000;

std::pair<int, int> parse_shard(const std::string& s) {
  if (s.empty()) return {0, 1};
  size_t slash = s.find('/');
  auto bad = [&](const std::string& why) -> std::pair<int, int> {
    throw Error("--shard " + s + ": " + why + " (write I/N: shard I of N, 0 <= I < N)");
  };
  if (slash == std::string::npos) return bad("expected I/N");
  int i = 0, n = 0;
  try {
    size_t u1 = 0, u2 = 0;
    i = std::stoi(s.substr(0, slash), &u1);
    n = std::stoi(s.substr(slash + 1), &u2);
    if (u1 != slash || u2 != s.size() - slash - 1) return bad("expected two integers");
  } catch (const std::exception&) {
    return bad("expected two integers");
  }
  if (n < 1 || n > 1000000) return bad("N must be in 1..1000000");
  if (i < 0 || i >= n) return bad("shard index out of range");
  return {i, n};
}

// Refuses an output path that names the sweep file or a model or hardware file it reads.
void refuse_sweep_inputs(const std::string& out, const std::string& flag, const SweepSpec& spec) {
  refuse_input_as_output(out, spec.source, flag, "sweeps");
  for (const std::string& m : spec.models) refuse_input_as_output(out, m, flag, "models");
  for (const std::string& h : spec.hardware) refuse_input_as_output(out, target_spec_base(h), flag, "hardware");
}

// Progress on stderr when it is a terminal: a bar, plans/s, time left.
class SweepProgress {
 public:
  SweepProgress() : tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}
  ~SweepProgress() {
    if (tty_ && shown_) std::fprintf(stderr, "\r%80s\r", "");
  }
  void update(int64_t done, int64_t total) {
    if (!tty_ || total <= 0) return;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double rate = s > 0 ? double(done) / s : 0;
    int width = 30, fill = int(double(width) * double(done) / double(total));
    std::string bar(size_t(fill), '#');
    bar += std::string(size_t(width - fill), '.');
    double left = rate > 0 ? double(total - done) / rate : 0;
    std::fprintf(stderr, "\r[%s] %lld/%lld plans  %.0f plans/s  %.0f s left ", bar.c_str(),
                 (long long)done, (long long)total, rate, left);
    std::fflush(stderr);
    shown_ = true;
  }

 private:
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf,
                v != 0 && std::fabs(v) < 0.01 ? "%.3g" : (std::fabs(v) < 100 ? "%.3f" : "%.1f"), v);
  return buf;
}

std::string row_options(const SweepRow& r) {
  return r.model + " on " + r.hardware + ", batch " + std::to_string(r.batch) + ", prompt " +
         std::to_string(r.prompt) + ", gen " + std::to_string(r.gen) + ", weights " + r.weights +
         ", KV " + r.kv + " " + r.kv_layout + ", fusion " + r.fusion + ", tp " +
         std::to_string(r.tp);
}

Table rows_table(const std::vector<SweepRow>& rows, int64_t top) {
  Table t({"point", "model", "hardware", "batch", "prompt", "gen", "weights", "kv", "layout",
           "fusion", "tp", "TTFT ms", "TPOT ms", "tok/s", "memory GB", "$/Mtok"});
  for (size_t i = 0; i < rows.size() && int64_t(i) < top; ++i) {
    const SweepRow& r = rows[i];
    t.add({std::to_string(r.point), r.model, r.hardware, std::to_string(r.batch),
           std::to_string(r.prompt), std::to_string(r.gen), r.weights, r.kv, r.kv_layout, r.fusion,
           std::to_string(r.tp), g3(r.ttft_ms), g3(r.tpot_ms), g3(r.tokens_per_s), g3(r.memory_gb),
           r.cost_per_mtok > 0 ? g3(r.cost_per_mtok) : "-"});
  }
  return t;
}

nlohmann::json row_json(const SweepRow& r) {
  return nlohmann::json::parse(format_row(r, RowFormat::jsonl));
}

// The message when no plan is feasible: which constraint eliminated the most.
std::string infeasible_message(const SweepSummary& s) {
  std::string msg = "no plan meets the constraints";
  auto worst = std::max_element(s.violations.begin(), s.violations.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
  if (worst != s.violations.end())
    msg += ": '" + worst->first + "' eliminated the most plans (" + with_commas(worst->second) +
           " of " + with_commas(s.evaluated) + ")";
  std::string all;
  for (const auto& [name, n] : s.violations)
    all += (all.empty() ? "" : ", ") + name + ": " + with_commas(n);
  if (!all.empty()) msg += "; violations by constraint: " + all;
  return msg;
}

std::string skipped_text(const SweepSummary& s) {
  std::vector<std::pair<int64_t, std::string>> v;
  for (const auto& [why, n] : s.skipped) v.push_back({n, why});
  std::sort(v.rbegin(), v.rend());
  std::string out;
  for (size_t i = 0; i < v.size() && i < 5; ++i)
    out += "    " + with_commas(v[i].first) + ": " + v[i].second + "\n";
  if (v.size() > 5) out += "    (" + std::to_string(v.size() - 5) + " more reasons)\n";
  return out;
}

// Compiles the winner of the first objective into a plan directory.
std::string emit_best(const SweepSpace& space, const SweepSummary& sum, const std::string& dir) {
  if (sum.best.empty() || !sum.best[0]) throw Error("--emit-best: no feasible plan to compile");
  const SweepRow& best = *sum.best[0];
  PointPlan pp = point_plan(space, best.point);
  PlanRequest req;
  req.model = pp.model;
  req.hardware = pp.hardware;
  req.workload = pp.workload;
  req.options = pp.options;
  req.ideal = space.spec.ideal;  // the figures the row was ranked by
  Planned p = make_plan(req, {}, true);
  // The row fits by the sweep's estimate; the compiled plan's own arena can need more
  // (as `compile` warns; --emit-best said nothing).
  if (!p.sim.mem.fits) std::cerr << "lathe: warning: the emitted plan: " << oom_message(p) << "\n";
  write_dir_atomic(dir, plan_files(p));
  std::string shown = dir;
  while (shown.size() > 1 && shown.back() == '/') shown.pop_back();
  return "emitted the best plan for '" + space.spec.objectives[0].text() + "' (point " +
         std::to_string(best.point) + ": " + row_options(best) + ") to " + shown +
         "/; run it with `lathe run " + shown +
         // The CUDA backend computes in bf16 or f16: an f32 plan runs on the CPU only.
         (!p.target.is_gpu() ? "`"
          : p.lowered.decode.attrs.s("act_dtype") == "f32"
              ? "` (on the CPU: the CUDA backend needs bf16 or f16 activations, and this plan has f32)"
              : " --backend cuda`");
}

void print_summary(const SweepSpec& spec, const SweepSummary& sum, int64_t top) {
  if (!sum.front.empty()) {
    std::string objs;
    for (const Objective& o : spec.objectives) objs += (objs.empty() ? "" : ", ") + o.text();
    std::cout << "\nPareto front (" << objs << "): " << sum.front.size() << " plan"
              << (sum.front.size() == 1 ? "" : "s")
              << (int64_t(sum.front.size()) > top ? ", first " + std::to_string(top) + " shown"
                                                  : "")
              << "\n"
              << rows_table(sum.front, top).text("  ");
  }
  Table best({"objective", "value", "point", "plan"});
  for (size_t i = 0; i < spec.objectives.size(); ++i) {
    const Objective& o = spec.objectives[i];
    if (!sum.best[i]) {
      best.add({o.text(), "-", "-", "no feasible plan"});
      continue;
    }
    best.add({o.text(), g3(sum.best[i]->metric(o.metric)), std::to_string(sum.best[i]->point),
              row_options(*sum.best[i])});
  }
  std::cout << "\nBest plan per objective\n" << best.text("  ");
}

nlohmann::json summary_json(const SweepSpec& spec, const SweepSummary& sum) {
  nlohmann::json j;
  j["sweep"] = spec.name;
  j["selected"] = sum.selected;
  j["evaluated"] = sum.evaluated;
  j["feasible"] = sum.feasible;
  j["skipped"] = nlohmann::json::object();
  for (const auto& [why, n] : sum.skipped) j["skipped"][why] = n;
  j["violations"] = nlohmann::json::array();
  for (const auto& [name, n] : sum.violations)
    j["violations"].push_back({{"constraint", name}, {"plans", n}});
  j["objectives"] = nlohmann::json::array();
  for (const Objective& o : spec.objectives) j["objectives"].push_back(o.text());
  j["front"] = nlohmann::json::array();
  for (const SweepRow& r : sum.front) j["front"].push_back(row_json(r));
  j["best"] = nlohmann::json::array();
  for (size_t i = 0; i < spec.objectives.size(); ++i)
    j["best"].push_back({{"objective", spec.objectives[i].text()},
                         {"plan", sum.best[i] ? row_json(*sum.best[i]) : nlohmann::json(nullptr)}});
  return j;
}

int run_sweep_cmd(const SweepArgs& a) {
  ReportAwayFromOutput away(a.out);  // -o /dev/stdout: the rows alone on stdout
  auto [shard, shards] = parse_shard(a.shard);
  if (!a.emit_best.empty() && shards > 1)
    throw Error(
        "--emit-best needs the whole sweep: merge the shards with `lathe merge --sweep FILE "
        "--emit-best DIR`");
  if (!a.emit_best.empty()) check_output_dir(a.emit_best, plan_dir_entries());
  if (!a.emit_best.empty() && !a.out.empty() && same_file_path(a.emit_best, a.out))
    throw Error("--emit-best " + a.emit_best + ": the same path as -o (the plan directory and the rows file)");
  SweepSpec spec = load_sweep(a.file);
  refuse_sweep_inputs(a.out, "-o", spec);
  SweepSpace space = expand_sweep(spec, a.samples, a.seed);
  for (const Target& t : space.targets) {
    warn_if_measured_by_another_build(t);
    for (int64_t tp : spec.tp) warn_if_tp_spans_boards(t, tp);
  }
  for (const std::string& h : spec.hardware) warn_if_descriptive_override(h);
  for (const WhatifAxis& w : spec.whatif) warn_if_descriptive_override(w.field);
  if (a.samples == 0 && space.size / uint64_t(shards) > uint64_t(10'000'000'000))
    throw Error(spec.source + ": " + with_commas(int64_t(space.size)) +
                " points is more than one run should cost; sample it (--samples N) or split it "
                "(--shard I/N)");
  int threads = a.threads > 0 ? a.threads : available_cpus();
  std::unique_ptr<AtomicFile> out;
  if (!a.out.empty()) out = std::make_unique<AtomicFile>(a.out);
  SweepOptions o;
  o.threads = threads;
  o.samples = a.samples;
  o.seed = a.seed;
  o.shard = shard;
  o.shards = shards;
  o.format = row_format_for(a.out);
  if (out) o.sink = [&](const std::string& chunk) { out->write(chunk); };
  SweepProgress progress;
  o.progress = [&](int64_t done, int64_t total) { progress.update(done, total); };
  auto t0 = std::chrono::steady_clock::now();
  SweepSummary sum = run_sweep(space, o);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (sum.evaluated == 0 && shards == 1) {
    // A sample of a space holding plannable points may still draw none of them.
    const bool sampled = sum.selected < int64_t(space.size);
    throw Error(spec.source +
                (sampled ? ": none of the " + with_commas(sum.selected) +
                               " sampled points can be planned (contradictory axes, or a sample that missed the "
                               "plannable points: try another --seed or more --samples):\n"
                         : std::string(": no point of the sweep can be planned (contradictory axes?):\n")) +
                skipped_text(sum));
  }
  if (out) out->commit();
  bool json = a.format == "json";
  if (!json) {
    std::cout << "lathe sweep: " << spec.name << " (" << spec.source << "), sweep id " << space.id
              << "\n";
    std::cout << "  space      " << with_commas(int64_t(space.size)) << " points";
    if (a.samples > 0 && uint64_t(a.samples) < space.size)
      std::cout << "; " << with_commas(a.samples) << " sampled (seed " << a.seed << ")";
    else if (a.samples > 0)
      std::cout << "; --samples " << with_commas(a.samples) << " covers it all";
    if (shards > 1) std::cout << "; shard " << shard << "/" << shards;
    std::cout << "\n  lowered    " << sum.shapes << " plan shape" << (sum.shapes == 1 ? "" : "s")
              << " in " << fmt_double(sum.lower_s, 2) << " s\n";
    std::cout << "  costed     " << with_commas(sum.evaluated) << " plans in "
              << fmt_double(sum.cost_s, 3) << " s on " << threads << " thread"
              << (threads == 1 ? "" : "s") << " ("
              << with_commas(int64_t(sum.cost_s > 0 ? double(sum.evaluated) / sum.cost_s : 0))
              << " plans/s; " << fmt_double(wall, 2) << " s in all)\n";
    std::cout << "  feasible   " << with_commas(sum.feasible) << " of "
              << with_commas(sum.evaluated) << "\n";
    for (const auto& [name, n] : sum.violations)
      if (n > 0) std::cout << "  violates   " << name << ": " << with_commas(n) << " plans\n";
    if (!sum.skipped.empty()) {
      int64_t n = 0;
      for (const auto& kv : sum.skipped) n += kv.second;
      std::cout << "  skipped    " << with_commas(n) << " points that cannot be planned:\n"
                << skipped_text(sum);
    }
    if (out)
      std::cout << "  wrote      " << a.out << " (" << with_commas(sum.evaluated) << " rows)\n";
  }
  // What the text's header lines say, for scripts (shard or whole sweep alike).
  auto run_json = [&](nlohmann::json j) {
    j["id"] = space.id;
    j["source"] = spec.source;
    j["space_points"] = space.size;
    j["samples"] = a.samples > 0 ? nlohmann::json(a.samples) : nlohmann::json(nullptr);
    j["seed"] = a.samples > 0 ? nlohmann::json(a.seed) : nlohmann::json(nullptr);
    j["shapes"] = sum.shapes;
    j["lower_s"] = sum.lower_s;
    j["cost_s"] = sum.cost_s;
    j["wall_s"] = wall;
    j["threads"] = threads;
    if (!a.out.empty()) j["output"] = a.out;
    return j;
  };
  if (shards > 1) {
    if (json) {
      nlohmann::json j = run_json(summary_json(spec, sum));
      j["shard"] = {{"index", shard}, {"count", shards}};
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "  (a shard: `lathe merge` the shards' files to rank the whole sweep)\n";
    }
    return 0;
  }
  if (sum.feasible == 0) {
    // Scripts get the counts (evaluated, skipped, violations per constraint) on stdout as
    // well; the exit code is still 2.
    if (json) std::cout << run_json(summary_json(spec, sum)).dump(2) << "\n";
    throw Error(infeasible_message(sum));
  }
  std::string emitted;
  if (!a.emit_best.empty()) emitted = emit_best(space, sum, a.emit_best);
  if (json) {
    nlohmann::json j = run_json(summary_json(spec, sum));
    if (!a.emit_best.empty()) j["emitted"] = a.emit_best;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  print_summary(spec, sum, a.top);
  if (!emitted.empty()) std::cout << "\n" << emitted << "\n";
  return 0;
}

// ---- merge ----

int run_merge(const MergeArgs& a) {
  ReportAwayFromOutput away(a.out);  // -o /dev/stdout: the rows alone on stdout
  if (a.files.empty()) throw Error("merge: no input files");
  if (a.out.empty()) throw Error("merge: -o FILE is required");
  for (const std::string& f : a.files) refuse_input_as_output(a.out, f, "-o");
  refuse_input_as_output(a.out, a.sweep, "-o", "sweeps");
  check_output_file(a.out);
  if (!a.emit_best.empty()) check_output_dir(a.emit_best, plan_dir_entries());
  if (!a.emit_best.empty() && same_file_path(a.emit_best, a.out))
    throw Error("--emit-best " + a.emit_best + ": the same path as -o (the plan directory and the merged rows)");
  std::map<uint64_t, SweepRow> rows;
  std::map<uint64_t, std::string> origin;
  std::string id;
  int64_t duplicates = 0;
  for (const std::string& path : a.files) {
    std::string text = read_file(path, ~uint64_t(0));  // a shard's rows: no size limit but memory
    if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 BOM an editor added
    size_t pos = 0;
    int line_no = 0;
    std::vector<std::string> header;
    RowFormat f = RowFormat::csv;
    size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') f = RowFormat::jsonl;
    // A JSON array (`[...]`) is neither: it was reported as a bad CSV header.
    if (first != std::string::npos && text[first] == '[')
      throw Error(path + ": a JSON array; lathe reads rows as CSV or JSONL (one JSON object per line, as `lathe "
                  "sweep -o FILE.jsonl` writes them)");
    // A JSONL shard with no points (--shard I/N beyond the points) is an empty file.
    if (first == std::string::npos && row_format_for(path) == RowFormat::jsonl) f = RowFormat::jsonl;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      ++line_no;
      // Every row lathe writes ends in a newline: a last line without one was cut off
      // (a row whose last value 0.003989 was cut to "0.00" ranked first).
      if (nl == std::string::npos) {
        if (text.find_first_not_of(" \t\r", pos) == std::string::npos) break;
        throw Error(path + ":" + std::to_string(line_no) +
                    ": the last line ends without a newline (a write cut off?); its row may be incomplete");
      }
      std::string line = text.substr(pos, nl - pos);
      pos = nl + 1;
      if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF line ends
      if (line.empty()) continue;
      std::string where = path + ":" + std::to_string(line_no);
      if (f == RowFormat::csv && header.empty()) {
        header = split_csv_line(line);
        if (line + "\n" != row_header(RowFormat::csv))
          throw Error(where +
                      ": not the header of a lathe sweep CSV (written by another version?)");
        continue;
      }
      SweepRow r = parse_row(line, f, header, where);
      if (id.empty()) id = r.sweep_id;
      if (r.sweep_id != id)
        throw Error(where + ": row of sweep " + r.sweep_id +
                    ", but the first rows came from sweep " + id +
                    " (files of different sweeps, of different --samples/--seed, or of model or hardware files "
                    "that changed between the runs)");
      auto it = rows.find(r.point);
      if (it != rows.end()) {
        if (format_row(it->second, RowFormat::csv) != format_row(r, RowFormat::csv))
          throw Error(where + ": point " + std::to_string(r.point) + " differs from its row in " +
                      origin[r.point]);
        ++duplicates;
        continue;
      }
      origin[r.point] = where;
      rows.emplace(r.point, std::move(r));
    }
    if (f == RowFormat::csv && header.empty()) throw Error(path + ": empty file (no CSV header)");
  }
  std::vector<SweepRow> all;
  all.reserve(rows.size());
  for (auto& [p, r] : rows) all.push_back(std::move(r));

  std::optional<SweepSpec> spec;
  std::optional<SweepSpace> space;
  std::string coverage;
  if (!a.sweep.empty()) {
    spec = load_sweep(a.sweep);
    space = expand_sweep(*spec, a.samples, a.seed);
    if (!id.empty() && space->id != id)
      throw Error("the rows come from sweep " + id + ", but " + a.sweep +
                  (a.samples > 0 ? " (with --samples " + std::to_string(a.samples) + " --seed " +
                                       std::to_string(a.seed) + ")"
                                 : std::string(" (every point, no --samples)")) +
                  " is sweep " + space->id +
                  " (another sweep file, other --samples/--seed, or model or hardware files that changed)");
    for (const SweepRow& r : all) {
      if (r.point >= space->size)
        throw Error(origin[r.point] + ": point " + std::to_string(r.point) + " is outside sweep " + space->id +
                    " (" + with_commas(int64_t(space->size)) + " points)");
      // The row's own axes are the point's (a row edited to another model, target or
      // batch kept its point number and was ranked as that point).
      const PointAxes x = point_axes(*space, r.point);
      const SweepSpec& sp = space->spec;
      auto differs = [&](const char* axis, const std::string& got, const std::string& want) {
        if (got != want)
          throw Error(origin[r.point] + ": point " + std::to_string(r.point) + " has " + axis + " " + got +
                      ", but the sweep's point " + std::to_string(r.point) + " has " + want);
      };
      differs("model", r.model, space->models[size_t(x.model)].name);
      differs("hardware", r.hardware, space->targets[size_t(x.target)].name);
      differs("batch", std::to_string(r.batch), std::to_string(sp.batch[size_t(x.batch)]));
      differs("prompt", std::to_string(r.prompt), std::to_string(sp.prompt[size_t(x.prompt)]));
      differs("gen", std::to_string(r.gen), std::to_string(sp.gen[size_t(x.gen)]));
      differs("tp", std::to_string(r.tp), std::to_string(sp.tp[size_t(x.tp)]));
      differs("fusion", r.fusion, sp.fusion[size_t(x.fusion)].name);
      // And its formats (a row edited to int4 weights and fp8 KV on an A100 merged).
      const PointFormats pf = point_formats(*space, r.point);
      differs("weights", r.weights, pf.weights);
      differs("kv", r.kv, pf.kv);
      differs("act", r.act, pf.act);
      if (!pf.kv_layout.empty()) differs("kv_layout", r.kv_layout, pf.kv_layout);
    }
    uint64_t expected =
        a.samples > 0 && uint64_t(a.samples) < space->size ? uint64_t(a.samples) : space->size;
    if (all.size() < expected)
      coverage = "rows for " + with_commas(int64_t(all.size())) + " of the sweep's " +
                 with_commas(int64_t(expected)) +
                 " points (points that cannot be planned have no row; many more missing means a "
                 "missing shard)";
  }
  // Everything that can fail is checked before the merged file is written, so a failed
  // merge leaves no file behind.
  std::optional<SweepSummary> sum;
  if (all.empty()) throw Error("merge: the files hold no rows");  // with or without --sweep
  if (spec) {
    sum = summarize_rows(*spec, all);
    if (sum->feasible == 0) throw Error(infeasible_message(*sum));
    if (!a.emit_best.empty() && !coverage.empty() && !a.allow_missing)
      throw Error("--emit-best: " + coverage +
                  "; the best of these rows may not be the sweep's best. Merge every shard, or give "
                  "--allow-missing when the missing points are ones that cannot be planned");
  }
  RowFormat f = row_format_for(a.out);
  AtomicFile out(a.out);
  out.write(row_header(f));
  std::string chunk;
  for (const SweepRow& r : all) {
    chunk += format_row(r, f);
    if (chunk.size() > (1 << 20)) {
      out.write(chunk);
      chunk.clear();
    }
  }
  out.write(chunk);
  out.commit();
  bool json = a.format == "json";
  if (!json) {
    std::cout << "lathe merge: " << with_commas(int64_t(all.size())) << " rows from "
              << a.files.size() << " file" << (a.files.size() == 1 ? "" : "s") << " (sweep "
              << (id.empty() ? "-" : id) << ")";
    if (duplicates) std::cout << ", " << with_commas(duplicates) << " duplicate rows dropped";
    std::cout << "; wrote " << a.out << "\n";
    if (!coverage.empty()) std::cout << "  " << coverage << "\n";
  }
  if (!spec) {
    if (json)
      std::cout << nlohmann::json{{"id", id.empty() ? nlohmann::json() : nlohmann::json(id)},
                                  {"files", a.files.size()},
                                  {"rows", all.size()},
                                  {"duplicates", duplicates},
                                  {"output", a.out}}
                       .dump(2)
                << "\n";
    return 0;
  }
  std::string emitted;
  if (!a.emit_best.empty()) emitted = emit_best(*space, *sum, a.emit_best);
  if (json) {
    nlohmann::json j = summary_json(*spec, *sum);
    j["id"] = space->id;
    j["files"] = a.files.size();
    j["rows"] = all.size();
    j["duplicates"] = duplicates;
    j["expected_points"] =
        a.samples > 0 && uint64_t(a.samples) < space->size ? uint64_t(a.samples) : space->size;
    if (!coverage.empty()) j["coverage"] = coverage;
    j["output"] = a.out;
    if (!a.emit_best.empty()) j["emitted"] = a.emit_best;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "  feasible   " << with_commas(sum->feasible) << " of " << with_commas(sum->evaluated)
            << "\n";
  print_summary(*spec, *sum, a.top);
  if (!emitted.empty()) std::cout << "\n" << emitted << "\n";
  return 0;
}

}  // namespace

void register_sweep(CLI::App& app, Registry& r) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep",
                                     "Cost every plan of a sweep file; Pareto front, best plan per "
                                     "objective, the winner compiled");
  cmd->add_option("SWEEP", a->file, "sweep TOML file or built-in sweep name (`lathe specs`)")
      ->required();
  // An empty value (an unset "$OUT" in a job script) is an error, not "not given".
  cmd->add_option("-o,--out", a->out, "write one row per plan: .csv (default) or .jsonl")->check(non_empty());
  cmd->add_option("--threads", a->threads, "worker threads (default: the CPUs this process may use: its affinity mask and cgroup quota)")
      ->check(CLI::Range(1, 1024));
  CLI::Option* samples = cmd->add_option("--samples", a->samples,
                                         "cost N distinct points drawn at random instead of the whole space")
                             ->check(CLI::Range(int64_t(1), kMaxSamples));
  cmd->add_option("--seed", a->seed, "seed of --samples (default 1)")
      ->check(non_negative_integer())
      ->needs(samples);
  cmd->add_option("--shard", a->shard,
                  "I/N: cost every N-th point from the I-th (0-based); join with `lathe merge`")
      ->check(non_empty());
  cmd->add_option("--emit-best", a->emit_best,
                  "compile the best plan of the first objective into this plan directory (`lathe "
                  "run DIR` runs it)")
      ->check(non_empty());
  cmd->add_option("--top", a->top, "Pareto-front rows to print (default 15)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--format", a->format, "text or json (the summary; rows go to -o)")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([&r, a] { r.action = [a] { return run_sweep_cmd(*a); }; });

  auto m = std::make_shared<MergeArgs>();
  CLI::App* mc = app.add_subcommand(
      "merge", "Join the row files of sweep shards (--shard I/N) into one, in point order");
  mc->add_option("FILES", m->files,
                 "row files written by `lathe sweep --shard I/N -o FILE` (.csv or .jsonl)")
      ->required();
  mc->add_option("-o,--out", m->out, "merged row file (.csv or .jsonl)")->required()->check(non_empty());
  // Options that only mean something with another are refused without it (CLI11's
  // "requires"), rather than ignored.
  CLI::Option* sweep = mc->add_option(
      "--sweep", m->sweep,
      "the sweep file: check the rows belong to it, print the Pareto front and best plans");
  CLI::Option* m_samples = mc->add_option("--samples", m->samples, "with --sweep: the --samples the shards ran with")
                             ->check(CLI::Range(int64_t(1), kMaxSamples))
                             ->needs(sweep);
  mc->add_option("--seed", m->seed, "with --samples: the --seed the shards ran with")
      ->check(non_negative_integer())
      ->needs(m_samples);
  CLI::Option* emit = mc->add_option("--emit-best", m->emit_best,
                                     "with --sweep: compile the best plan into this plan directory")
                          ->needs(sweep)
                          ->check(non_empty());
  mc->add_flag("--allow-missing", m->allow_missing,
               "with --emit-best: emit the best of the rows even when the sweep has points without one")
      ->needs(emit);
  mc->add_option("--top", m->top, "with --sweep: Pareto-front rows to print (default 15)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30))
      ->needs(sweep);
  mc->add_option("--format", m->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  mc->callback([&r, m] { r.action = [m] { return run_merge(*m); }; });
}

}  // namespace lathe::cli
