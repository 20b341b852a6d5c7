// The reference interpreter: the numeric oracle. It executes the *unfused,
// unquantized* graph (as the builder makes it, no passes) with plain float64 loops,
// one op at a time, and shares no code with codegen or the kernels: every backend and
// every pass combination is compared with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/weights.h"

namespace lathe {

class Reference {
 public:
  // prefill / decode: unfused graphs of one model (any batch/prompt bindings).
  Reference(const Graph& prefill, const Graph& decode, const WeightSource& source);

  // Starts one sequence per prompt; returns each sequence's last-token logits.
  std::vector<std::vector<double>> prefill(const std::vector<std::vector<int32_t>>& prompts);
  // One token per live sequence.
  std::vector<std::vector<double>> decode(const std::vector<int32_t>& tokens);

 private:
  struct Seq {
    int64_t past, len, row0;
  };
  std::vector<std::vector<double>> run(const Graph& g, const std::vector<std::vector<int32_t>>& tokens);
  const std::vector<double>& weight(const std::string& name);

  const Graph& prefill_;
  const Graph& decode_;
  WeightSource source_;
  std::map<std::string, std::vector<double>> weights_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  int64_t layers_ = 0, kv_heads_ = 0, head_dim_ = 0, vocab_ = 0;
  // K and V per layer: [sequence][position][kv head][dim], grown as tokens arrive.
  std::vector<std::vector<std::vector<double>>> k_, v_;  // [layer][sequence]
  std::vector<int64_t> lengths_;
};

// ||a - b|| / ||b|| (the normalized error test-backend-ops uses).
double normalized_error(const std::vector<float>& a, const std::vector<double>& b);

}  // namespace lathe
