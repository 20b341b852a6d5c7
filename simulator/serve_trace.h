// The timeline of a serving run as a Chrome/Perfetto trace (JSON): one process per
// replica, one track per batch slot holding each request's prefill and decode, a
// track of steps (the first max_step_spans of them), and counter tracks for the
// waiting queue, running sequences and KV occupancy (bucket means).
#pragma once

#include <string>

#include "simulator/serve.h"

namespace lathe {

std::string serve_trace_json(const ServeResult& r, const std::string& title);

}  // namespace lathe
