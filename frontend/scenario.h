// Scenario files: a top-level [scenario] table naming the model, the hardware and
// the plan options (the same keys as [plan]) plus one table for the simulation it
// describes: [scenario.serve] with [scenario.arrivals], [scenario.rag],
// [scenario.moe] or [scenario.edge] with [[scenario.edge.claims]]. Built-in
// scenarios live in specs/scenarios/ and are embedded in the binary.
//
// Errors throw lathe::Error with "file:line:col: scenario.table.key: why".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/plan_options.h"
#include "ir/scenario.h"

namespace lathe {

enum class ScenarioKind : uint8_t { serve, rag, moe, edge };
std::string_view scenario_kind_name(ScenarioKind k);

struct ScenarioSpec {
  std::string name, description, source;
  ScenarioKind kind = ScenarioKind::serve;
  std::optional<std::string> model, hardware;
  PlanOptions options;
  ServeOptions serve;
  ArrivalOptions arrivals;
  std::optional<std::string> arrivals_csv;  // a request trace instead of generated arrivals
  RagOptions rag;
  MoeOptions moe;
  EdgeOptions edge;
};

ScenarioSpec parse_scenario_toml(std::string_view text, std::string_view source);
// A built-in scenario name (specs/scenarios/NAME.toml) or a path to a TOML file.
ScenarioSpec load_scenario(std::string_view name_or_path);

}  // namespace lathe
