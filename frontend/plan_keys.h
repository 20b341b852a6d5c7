// The plan-option keys (weights, kv, kv_layout, act, tp, attention, pipeline) that
// both [plan] and [scenario] tables take, read with located errors.
#pragma once

#include "frontend/toml_doc.h"
#include "ir/plan_options.h"

namespace lathe {

void read_plan_options(TableReader& r, const TomlValue& t, PlanOptions& o);

}  // namespace lathe
