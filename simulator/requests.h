// The request stream a serving simulation is fed: generated (Poisson arrivals with
// seeded length distributions) or read from a CSV trace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/scenario.h"

namespace lathe {

struct Request {
  double arrival_s = 0;
  int64_t prompt = 1;  // prompt tokens
  int64_t output = 1;  // generated tokens, the first one included (>= 1)
  int priority = 0;    // 0 is the most urgent class
  int64_t line = 0;    // its line in a trace file (requests are sorted by arrival); 0 if generated
};

// Poisson arrivals at a.rate_per_s (exponential gaps), `requests` of them or all that
// arrive before duration_s; prompt/output lengths and priority classes drawn from the
// same seeded stream, so a seed names one stream exactly.
std::vector<Request> generate_requests(const ArrivalOptions& a);

// CSV with columns arrival_s,prompt_tokens,output_tokens[,priority]; an optional
// header line, '#' comments and blank lines. Rows are sorted by arrival (stably).
// Throws lathe::Error("source:line: column: why").
std::vector<Request> parse_trace_csv(std::string_view text, const std::string& source);

}  // namespace lathe
