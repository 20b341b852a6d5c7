// The arguments every scenario command (serve-sim, rag-sim, moe-sim, edge-sim)
// shares: MODEL HW, plan options, --set, --scenario NAME|FILE and --format. A
// scenario supplies defaults; flags given on the command line override them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "cli/planning.h"
#include "frontend/scenario.h"

namespace lathe::cli {

struct ScenarioArgs {
  std::string model, hardware, scenario;
  PlanFlags plan;
  std::vector<std::string> sets;
  bool ideal = false;
  std::string format = "text";

  // `formats` lists the accepted --format values.
  void add_to(CLI::App* cmd, const std::vector<std::string>& formats);
  // The scenario (loaded when --scenario is given and checked to be of `kind`, else
  // defaults) and the plan request it and the flags describe. `workload` sizes the
  // graphs the plan is lowered for (it guides the kv-layout pass).
  ScenarioSpec resolve(ScenarioKind kind, const Workload& workload, PlanRequest& req,
                       const char* default_hardware = nullptr) const;
};

// A length or time distribution for JSON: its kind, parameters and spelling
// ({"kind": "uniform", "low": 128, "high": 1024, "spec": "uniform:128,1024"}).
nlohmann::json distribution_json(const Distribution& d);

// Progress on stderr, only when stderr is a terminal (long runs).
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  void update(double fraction);

 private:
  std::string label_;
  bool tty_ = false;
  int last_ = -1;
};

// "12.3" ms from seconds, 1 decimal under 100 ms, none above.
std::string ms_text(double seconds);

}  // namespace lathe::cli
