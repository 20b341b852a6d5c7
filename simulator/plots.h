// Pictures of a simulation: a roofline chart (SVG) and a Chrome/Perfetto trace of the
// simulated timeline (JSON).
#pragma once

#include <string>

#include "ir/target.h"
#include "simulator/simulate.h"

namespace lathe {

// Log-log roofline: one horizontal roof per matrix dtype the target has, the
// bandwidth slope, and one point per kernel (achieved FLOP/s at its arithmetic
// intensity), prefill and decode in two colours.
std::string roofline_svg(const SimResult& r, const Target& t, const std::string& title);

// Trace events ("ph": "X") with FLOPs, bytes and bound as args: every prefill kernel,
// every kernel of the first and last `full_steps` decode steps at their contexts,
// and one event per step in between (the timeline stays small for long generations).
std::string trace_json(const SimResult& r, const std::string& title, int full_steps = 4);

}  // namespace lathe
