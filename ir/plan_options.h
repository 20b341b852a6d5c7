// Workload and PlanOptions: what the user asks a plan to do (batch, prompt and
// generated tokens) and how (weight and KV formats, KV layout, which passes run,
// tensor-parallel degree). Passes and the simulator take these; the frontend fills
// them from plan TOML files and CLI flags.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace lathe {

struct Workload {
  int64_t batch = 1;
  int64_t prompt = 512;  // prompt tokens per sequence
  int64_t gen = 128;     // generated tokens per sequence
  int64_t final_context() const { return prompt + gen; }
};

// KV-cache layouts (outermost index first). Within one layer the K and V planes are
// stored separately; `b` is the sequence slot.
//   LHTD    [layer][k|v][b][kv_head][pos][dim]   a head's positions are contiguous
//   LTHD    [layer][k|v][b][pos][kv_head][dim]   a position's heads are contiguous
//   TLHD    [b][pos][layer][k|v][kv_head][dim]   a token's whole KV is contiguous
//   paged:N blocks of N positions, [block][layer][k|v][kv_head][N][dim], block table
enum class KvLayoutKind : uint8_t { LHTD, LTHD, TLHD, paged };
struct KvLayout {
  KvLayoutKind kind = KvLayoutKind::LHTD;
  int block = 16;  // positions per block (paged only)
  bool operator==(const KvLayout&) const = default;
};
std::string kv_layout_name(const KvLayout& l);
// Accepts LHTD, LTHD, TLHD, paged, paged:N (N in 1..4096).
std::optional<KvLayout> parse_kv_layout(std::string_view s, std::string* why = nullptr);

// Names of every pass in the default pipeline order (the passes layer owns the
// implementations; this list lets plan files be validated without it).
std::span<const std::string_view> known_pass_names();
// The pass names of a pipeline list ("fuse-qkv, kv-layout"): split at commas,
// spaces trimmed, empty entries dropped. Names are not checked.
std::vector<std::string> split_pass_list(std::string_view list);

struct PlanOptions {
  std::optional<Format> weights;       // nullopt: the model's stored dtype
  std::optional<DType> kv_dtype;       // nullopt: the activation dtype
  std::optional<KvLayout> kv_layout;   // nullopt: chosen by the kv-layout pass
  std::optional<DType> act_dtype;      // nullopt: f32 on CPUs, the model dtype on GPUs
  int64_t tp = 1;                      // tensor-parallel degree
  // Pipeline override ("fuse-qkv,kv-layout"; "none" runs no optimization pass).
  std::optional<std::string> passes;
  // Per-pass switches from plan files and --no-PASS flags (false = skip).
  std::map<std::string, bool> pass_enabled;

  bool pass_on(std::string_view pass) const {
    auto it = pass_enabled.find(std::string(pass));
    return it == pass_enabled.end() || it->second;
  }
};

}  // namespace lathe
