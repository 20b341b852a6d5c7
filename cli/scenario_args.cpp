#include "cli/scenario_args.h"

#include <unistd.h>
#include <cstdio>
#include <iostream>

#include "ir/assert.h"

namespace lathe::cli {

void ScenarioArgs::add_to(CLI::App* cmd, const std::vector<std::string>& formats) {
  cmd->add_option("MODEL", model, "built-in model name, model TOML, .gguf file, or Hugging Face directory / config.json (or set in --scenario)");
  cmd->add_option("HW", hardware,
                  "built-in hardware name or hardware TOML; NAME+key=value adds overrides");
  cmd->add_option("--scenario", scenario,
                  "built-in scenario name or scenario TOML; flags override it");
  plan.add_to(cmd);
  cmd->add_option("--set", sets, "override a hardware field: key=value or key=x1.5 (repeatable)");
  cmd->add_flag("--ideal", ideal,
                "pure roofline step costs: no efficiency factors, no launch overhead");
  std::string list;
  for (const std::string& f : formats) list += (list.empty() ? "" : ", ") + f;
  cmd->add_option("--format", format, list)->check(CLI::IsMember(formats));
}

ScenarioSpec ScenarioArgs::resolve(ScenarioKind kind, const Workload& workload, PlanRequest& req,
                                   const char* default_hardware) const {
  ScenarioSpec s;
  s.kind = kind;
  if (!scenario.empty()) {
    s = load_scenario(scenario);
    if (s.kind != kind)
      throw Error(scenario + ": a " + std::string(scenario_kind_name(s.kind)) +
                  " scenario; this command runs " + std::string(scenario_kind_name(kind)) +
                  " scenarios");
    if (!plan.plan_file.empty()) throw Error("give --scenario or --plan, not both");
  }
  PlanSpec ps;
  if (!plan.plan_file.empty()) {
    ps = load_plan(plan.plan_file);
    // These commands take their lengths and batches from their own flags and scenario
    // files: a plan file's workload was ignored without a word (a warning, not an
    // error: the built-in plans carry one).
    if (ps.batch_given || ps.prompt_given || ps.gen_given)
      std::cerr << "lathe: warning: " << plan.plan_file << ": [plan.workload] is ignored by the "
                << scenario_kind_name(kind) << " simulation (its requests, batches and lengths come from its flags)\n";
  } else {
    ps.options = s.options;
  }
  req.model = !model.empty() ? model : s.model ? *s.model : ps.model.value_or("");
  req.hardware = !hardware.empty() ? hardware : s.hardware ? *s.hardware : ps.hardware.value_or("");
  if (req.hardware.empty() && default_hardware) req.hardware = default_hardware;
  const char* from = plan.plan_file.empty() ? "the scenario" : "the --plan file";
  if (req.model.empty()) throw Error(std::string("no MODEL given (as an argument or in ") + from + ")");
  if (req.hardware.empty()) throw Error(std::string("no HW given (as an argument or in ") + from + ")");
  req.sets = sets;
  req.options = plan.resolve(ps.options);
  req.workload = workload;
  req.ideal = ideal;
  return s;
}

Progress::Progress(std::string label)
    : label_(std::move(label)), tty_(::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  if (tty_ && last_ >= 0) std::fprintf(stderr, "\r%*s\r", int(label_.size()) + 16, "");
}

void Progress::update(double fraction) {
  if (!tty_) return;
  int pct = int(fraction * 100);
  if (pct == last_) return;
  last_ = pct;
  std::fprintf(stderr, "\r%s: %3d%%", label_.c_str(), pct);
  std::fflush(stderr);
}

nlohmann::json distribution_json(const Distribution& d) {
  nlohmann::json j;
  switch (d.kind) {
    case Distribution::Kind::fixed: j = {{"kind", "fixed"}, {"value", d.a}}; break;
    case Distribution::Kind::uniform: j = {{"kind", "uniform"}, {"low", d.a}, {"high", d.b}}; break;
    case Distribution::Kind::lognormal: j = {{"kind", "lognormal"}, {"median", d.a}, {"sigma", d.b}}; break;
  }
  j["spec"] = distribution_name(d);
  return j;
}

std::string ms_text(double seconds) {
  double ms = seconds * 1e3;
  return fmt_double(ms, ms < 10 ? 2 : (ms < 100 ? 1 : 0));
}

}  // namespace lathe::cli
