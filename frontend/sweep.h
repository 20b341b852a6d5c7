// Sweep files: the axes of a design-space sweep (models, hardware with what-if
// overrides, workload sizes, plan options), the constraints a plan must meet and the
// objectives that rank the plans that do. `lathe sweep` runs them (sweep/sweep.h);
// built-in examples live in specs/sweeps/ and are embedded in the binary.
//
//   [sweep]
//   name = "batch-quant"
//   models = ["llama-3-8b"]
//   hardware = ["a100-80g", "h100-sxm+hbm_bandwidth_gbs=x1.5"]
//   batch = { from = 1, to = 256, mul = 2 }       # or a list, or one value
//   prompt = [512, 2048]
//   gen = 128
//   weights = ["auto", "int8", "int4:g128"]       # auto: the model's dtype
//   kv = ["auto", "int8"]                          # auto: the activation dtype
//   kv_layout = ["auto", "paged:16"]
//   fusion = ["all", "none", "fuse-qkv+flash-attention"]
//   tp = [1, 2]
//   act = ["auto"]
//   objectives = ["min tpot_ms", "max tokens_per_s", "min cost_per_mtok"]
//   ideal = false                                  # true: pure roofline, as simulate --ideal
//   [sweep.whatif]                                 # hardware fields as axes
//   hbm_bandwidth_gbs = ["x1", "x1.5"]
//   [sweep.constraints]                            # <= for "min" metrics, >= for "max" ones
//   fits = true
//   ttft_ms = 500
//   tpot_ms = 50
//
// Errors throw lathe::Error with "file:line:col: sweep.key: why".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/plan_options.h"
#include "ir/target.h"

namespace lathe {

// The figures a sweep ranks and constrains plans by. Each has a natural direction
// (lower is better for times, memory and cost; higher for throughput).
enum class SweepMetric : uint8_t {
  ttft_ms,
  tpot_ms,
  e2e_ms,
  tokens_per_s,
  decode_tokens_per_s,
  prefill_tokens_per_s,
  memory_gb,
  cost_per_mtok,  // USD per million generated tokens: devices x price_per_hour / 3600 /
                  // tokens_per_s x 1e6
};
std::string_view metric_name(SweepMetric m);
std::optional<SweepMetric> parse_metric(std::string_view s);
bool metric_lower_is_better(SweepMetric m);
std::vector<std::string> metric_names();

struct Objective {
  SweepMetric metric = SweepMetric::tpot_ms;
  bool minimize = true;
  std::string text() const;  // "min tpot_ms"
};
// "min tpot_ms", "max tokens_per_s", or a bare metric name (its natural direction).
std::optional<Objective> parse_objective(std::string_view s, std::string* why = nullptr);

struct Constraint {
  SweepMetric metric = SweepMetric::tpot_ms;
  double bound = 0;          // metric <= bound when lower is better, >= bound otherwise
  std::string text() const;  // "tpot_ms <= 50"
};

// A fusion set: which fusion passes run. "all" (the default pipeline), "none" (no
// fusion pass), or a '+'-separated list of the fusion passes that run.
struct FusionSet {
  std::string name;
  std::vector<std::string> enabled;  // fusion passes on (the rest are off)
  bool all = true;
};
std::vector<std::string> fusion_pass_names();  // fuse-* and flash-attention
std::optional<FusionSet> parse_fusion_set(std::string_view s, std::string* why = nullptr);

// A what-if axis over one hardware field: each value is an override ("x1.5" scales,
// a number sets).
struct WhatifAxis {
  std::string field;
  std::vector<std::string> values;
  std::vector<std::string> where;  // "file:line:column" of each value, for errors
};

struct SweepSpec {
  std::string name, description, source;
  std::vector<std::string> models;
  std::vector<std::string> hardware;  // names or paths, each optionally with +key=value overrides
  std::vector<WhatifAxis> whatif;
  std::vector<int64_t> batch = {1}, prompt = {512}, gen = {128};
  std::vector<std::optional<Format>> weights = {std::nullopt};  // nullopt: the model's dtype
  std::vector<std::optional<DType>> kv = {std::nullopt};        // nullopt: the activation dtype
  std::vector<std::optional<KvLayout>> kv_layout = {
      std::nullopt};  // nullopt: the kv-layout pass chooses
  std::vector<FusionSet> fusion = {FusionSet{"all", {}, true}};
  std::vector<int64_t> tp = {1};
  std::vector<std::optional<DType>> act = {
      std::nullopt};  // nullopt: f32 on CPUs, the model dtype on GPUs
  bool ideal =
      false;  // pure roofline (efficiencies 1, no launch overhead), as `lathe simulate --ideal`
  bool fits = true;  // constraint: the plan fits in the device's memory
  std::vector<Constraint> constraints;
  std::vector<Objective> objectives = {Objective{SweepMetric::tpot_ms, true}};
  std::string text;  // the file's text (the sweep id hashes it)
};

// Points in the full space: the product of the axis sizes (hardware counts each
// what-if combination). Saturates at UINT64_MAX.
uint64_t sweep_point_count(const SweepSpec& s);

SweepSpec parse_sweep_toml(std::string_view text, std::string_view source);
// A built-in sweep name (specs/sweeps/NAME.toml) or a path to a TOML file.
SweepSpec load_sweep(std::string_view name_or_path);

// Parses "name[+key=value...]" and applies the overrides, after `sets` (--set key=value,
// for every target of a command): the overrides attached to the name are the more
// specific and win. The target's name gains both suffixes in the order applied. Throws
// lathe::Error naming `spec` on an unknown target or field.
Target load_target_spec(std::string_view spec, const std::vector<std::string>& sets = {});

}  // namespace lathe
