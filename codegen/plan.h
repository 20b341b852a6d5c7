// The plan file: everything the runtime needs to execute a lowered plan without
// TOML or the frontend: both phases' lowered graphs (as text IR, so a plan loads back
// to exactly the graph that was written), the target it was planned for, the
// workload, the options and what each pass did. Nodes are also listed in launch
// order with their absorbed ops and buffers for readers and scripts.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan_options.h"
#include "ir/target.h"
#include "passes/pipeline.h"

namespace lathe {

inline constexpr int kPlanFormatVersion = 1;

struct Plan {
  std::string model;
  Target target;
  Workload workload;
  std::string weights_format;  // as the user gave it ("" = model dtype)
  std::string kv_dtype, kv_layout, kv_layout_reason, act_dtype;
  int64_t tp = 1;
  std::vector<std::string> pipeline;
  std::vector<PassRecord> records;
  Graph prefill, decode;
};

// plan.json text for a plan (pretty-printed).
std::string plan_to_json(const Plan& p);
// Parses plan.json text; `source` names it in errors. Throws lathe::Error when the
// text is not JSON, was written by another plan format version, lacks fields, or its
// IR does not parse or verify.
Plan plan_from_json(const std::string& text, const std::string& source);
// Loads DIR/plan.json (or a plan.json path).
Plan load_plan_dir(const std::string& path);

std::string target_to_json_text(const Target& t);

}  // namespace lathe
