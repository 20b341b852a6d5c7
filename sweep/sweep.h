// Sweeps: every combination of a sweep file's axes (frontend/sweep.h) costed with the
// simulator, ranked by objectives under constraints.
//
// 1. Expand: resolve models and targets (hardware x what-if values); the space is
//    the product of the axes, addressed by a point index (mixed radix, models
//    slowest, generated tokens fastest). --samples draws distinct points with a
//    seeded generator; --shard I/N keeps every N-th selected point from the I-th.
// 2. Lower once per plan shape: the graphs depend on the model, weight format, KV
//    dtype and layout, fusion set, tensor-parallel degree and activation dtype, not
//    on the workload or the hardware figures. Each shape is built and lowered once
//    (about 5 ms for Llama-3-8B) and prepared for re-costing (simulator/prepared.h).
// 3. Cost every point on worker threads: one PreparedPlan::simulate() per point
//    (about 1.3 us for Llama-3-8B; 0.5 us with the SimReuse each worker keeps across
//    consecutive points), rows formatted in blocks and written in point
//    order, so the output does not depend on the thread count and the union of the
//    shards is the full sweep, row for row.
// 4. Rank: constraints mark rows infeasible (the rows are still written); the Pareto
//    front over the objectives and the best plan per objective come from the
//    feasible rows.
//
// Points that cannot be planned (an fp8 format on a GPU without fp8, a context beyond
// the model's, a tensor-parallel degree that does not divide the heads) are skipped
// and counted by reason. Activation memory is the peak of live activations at each
// point's bindings (what the memory planner reaches; simulator/prepared.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/sweep.h"
#include "ir/model.h"
#include "ir/plan_options.h"
#include "ir/target.h"
#include "simulator/simulate.h"

namespace lathe {

struct SweepSpace {
  SweepSpec spec;
  std::vector<ModelSpec> models;
  std::vector<Target> targets;            // hardware x what-if combinations
  std::vector<std::string> target_specs;  // "a100-80g+hbm_bandwidth_gbs=x1.5" (for --emit-best)
  std::vector<uint64_t> radix;            // size of each axis, slowest first
  uint64_t size = 0;                      // points in the full space
  std::string id;                         // 16 hex digits: the file's text, samples and seed
};

// Throws lathe::Error for a space too large to index or objectives that need a figure
// a target lacks (cost without a price).
SweepSpace expand_sweep(const SweepSpec& s, int64_t samples = 0, uint64_t seed = 1);

// Axis positions of a point.
struct PointAxes {
  int model = 0, target = 0, weights = 0, kv = 0, kv_layout = 0, fusion = 0, tp = 0, act = 0;
  int batch = 0, prompt = 0, gen = 0;
};
PointAxes point_axes(const SweepSpace& s, uint64_t point);
// The formats a point's row names, resolved from "auto" as the rows resolve them:
// weights, kv and act; kv_layout only when the axis gives one ("" where the kv-layout
// pass chooses).
struct PointFormats {
  std::string weights, kv, act, kv_layout;
};
PointFormats point_formats(const SweepSpace& s, uint64_t point);

// One plan of a sweep: its options (as written in the rows) and its figures.
struct SweepRow {
  std::string sweep_id;
  uint64_t point = 0;
  std::string model, hardware, weights, kv, kv_layout, fusion, act;
  int64_t batch = 0, prompt = 0, gen = 0, tp = 1;
  bool feasible = true;
  std::string violates;  // violated constraints, ';'-separated ("fits;tpot_ms")
  double ttft_ms = 0, tpot_ms = 0, e2e_ms = 0, prefill_ms = 0, decode_ms = 0;
  double tokens_per_s = 0, decode_tokens_per_s = 0, prefill_tokens_per_s = 0;
  std::string prefill_bound, decode_bound;
  double weights_gb = 0, kv_gb = 0, activations_gb = 0, memory_gb = 0, capacity_gb = 0;
  bool fits = true;
  int64_t max_batch = 0, devices = 1;
  double cost_per_mtok = 0;  // 0 when the target has no price

  double metric(SweepMetric m) const;
};

enum class RowFormat { csv, jsonl };
RowFormat row_format_for(const std::string& path);  // by extension: .jsonl/.json -> jsonl, else csv
std::string row_header(RowFormat f);                // CSV header line; "" for JSONL
std::string format_row(const SweepRow& r, RowFormat f);
void append_row(std::string& out, const SweepRow& r, RowFormat f);  // format_row, appended
// Appends a figure as the rows write it: std::to_chars(general, precision 7), that is
// printf's %.7g (exactly: a fast path for the common magnitudes, to_chars elsewhere).
void append_double(std::string& out, double v);
// Parses one data line back (merge). `header` is the CSV header's column names.
SweepRow parse_row(const std::string& line, RowFormat f, const std::vector<std::string>& header,
                   const std::string& where);
std::vector<std::string> split_csv_line(const std::string& line);

struct SweepOptions {
  int threads = 0;      // 0: all hardware threads
  int64_t samples = 0;  // 0: the full space
  uint64_t seed = 1;
  int shard = 0, shards = 1;
  RowFormat format = RowFormat::csv;
  int64_t block = 256;     // points per work item
  bool keep_rows = false;  // also return every row (SweepSummary::rows), in point order
  // Receives the header and then the rows, in point order, from the calling thread.
  std::function<void(const std::string& chunk)> sink;
  // Called from the calling thread every ~100 ms and at the end.
  std::function<void(int64_t done, int64_t total)> progress;
  // Called once the plan shapes are lowered (shapes, seconds).
  std::function<void(int shapes, double seconds)> lowered;
};

struct SweepSummary {
  int64_t selected = 0;   // points this run was asked to cost
  int64_t evaluated = 0;  // points that could be planned (rows written)
  int64_t feasible = 0;
  int shapes = 0;  // plan shapes lowered
  double lower_s = 0, cost_s = 0;
  std::map<std::string, int64_t> skipped;  // reason -> points
  // Rows violating each constraint: "fits" first (when on), then the constraints in
  // the built-in metric order (frontend/sweep.cpp), whatever order the file lists them.
  std::vector<std::pair<std::string, int64_t>> violations;
  std::vector<SweepRow> front;  // Pareto front of the feasible rows, by the first objective
  std::vector<std::optional<SweepRow>> best;  // per objective (nullopt: no feasible row)
  std::vector<SweepRow> rows;                 // with SweepOptions::keep_rows
};

SweepSummary run_sweep(const SweepSpace& s, const SweepOptions& o);

// The plan request of a point (for compiling the winner): model, hardware spec with
// overrides, workload and options.
struct PointPlan {
  std::string model, hardware;
  Workload workload;
  PlanOptions options;
};
PointPlan point_plan(const SweepSpace& s, uint64_t point);

// simulate() of a plan built and lowered for the point alone, as `lathe simulate` and
// `lathe compile` see it. Its figures equal the point's sweep row except activation
// memory: the memory plan's arena here, the peak of live values (an ideal planner, up
// to ~17% less: the arena reached 1.20x in a review of 3,000 rows) in the row.
SimResult simulate_point(const SweepSpace& s, uint64_t point);

// Whether an objective or constraint of the sweep reads metric m.
bool sweep_uses_metric(const SweepSpec& spec, SweepMetric m);
// What `lathe sweep` refuses before it costs anything, as lathe::Error: more than 2^60
// points, and a metric the sweep reads with no value on its gen axis (cost at gen 0;
// tpot_ms and decode_tokens_per_s at gen 0 and 1). expand_sweep and `lathe check` run it.
void check_sweep_spec(const SweepSpec& spec);

// Summary of rows read back from files (lathe merge): front, best and counts. The rows'
// own feasible/violates columns are kept (the sweep decided them on exact values); the
// front and best rank the values as written (7 significant digits), so plans that agree
// to 7 digits tie there, the lowest point first, where the sweep ranks exact values.
SweepSummary summarize_rows(const SweepSpec& spec, const std::vector<SweepRow>& rows);

// Pareto front of rows under objectives: no returned row is dominated by any row,
// and every other row is dominated by a returned one. Sorted by the objectives in
// turn (each better first), then by point.
std::vector<SweepRow> pareto_front(const std::vector<SweepRow>& rows,
                                   const std::vector<Objective>& objectives);
// True when `a` is at least as good as `b` in every objective and better in one.
bool dominates(const SweepRow& a, const SweepRow& b, const std::vector<Objective>& objectives);

}  // namespace lathe
