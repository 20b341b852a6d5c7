// The plan-option keys (weights, kv, kv_layout, act, tp, attention, pipeline) that
// both [plan] and [scenario] tables take, read with located errors.
#pragma once

#include "frontend/toml_doc.h"
#include "ir/plan_options.h"

namespace lathe {

void read_plan_options(TableReader& r, const TomlValue& t, PlanOptions& o);

// A model or hardware reference (`folder` "models" or "hardware"; resolved beside the
// spec file) that is a path but no file fails here at `at`, the value's line: the
// command that loads it later knows neither the spec file nor the line. With `names`,
// so does an empty reference or a name that is neither a built-in nor a file (sweeps
// check their names element by element themselves).
void check_spec_reference(const TableReader& r, const TomlValue& at, std::string_view key, std::string_view folder,
                          const std::string& ref, bool names = true);

}  // namespace lathe
