#include "ir/plan_options.h"

#include <algorithm>
#include <charconv>

namespace lathe {

std::string kv_layout_name(const KvLayout& l) {
  switch (l.kind) {
    case KvLayoutKind::LHTD: return "LHTD";
    case KvLayoutKind::LTHD: return "LTHD";
    case KvLayoutKind::TLHD: return "TLHD";
    case KvLayoutKind::paged: return "paged:" + std::to_string(l.block);
  }
  return "?";
}

std::optional<KvLayout> parse_kv_layout(std::string_view s, std::string* why) {
  if (s == "LHTD") return KvLayout{KvLayoutKind::LHTD, 16};
  if (s == "LTHD") return KvLayout{KvLayoutKind::LTHD, 16};
  if (s == "TLHD") return KvLayout{KvLayoutKind::TLHD, 16};
  if (s == "paged") return KvLayout{KvLayoutKind::paged, 16};
  if (s.starts_with("paged:")) {
    std::string_view n = s.substr(6);
    int v = 0;
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (ec == std::errc() && p == n.data() + n.size() && v >= 1 && v <= 4096)
      return KvLayout{KvLayoutKind::paged, v};
    if (why) *why = "paged block size must be an integer in 1..4096 (got '" + std::string(n) + "')";
    return std::nullopt;
  }
  if (why) *why = "unknown KV layout '" + std::string(s) + "' (expected LHTD, LTHD, TLHD, paged:N or auto)";
  return std::nullopt;
}

namespace {
constexpr std::string_view kPassNames[] = {
    "fuse-qkv",        "fuse-gate-up",     "fuse-norm-matmul", "fuse-epilogue",
    "fuse-rope-kvwrite", "flash-attention", "fuse-moe",        "quantize-weights",
    "quantize-kv",     "kv-layout",        "memory-plan",
};
}  // namespace

std::span<const std::string_view> known_pass_names() { return kPassNames; }

std::vector<std::string> split_pass_list(std::string_view list) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string_view p = list.substr(start, comma - start);
    while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
    while (!p.empty() && p.back() == ' ') p.remove_suffix(1);
    if (!p.empty()) names.emplace_back(p);
    start = comma + 1;
  }
  return names;
}

}  // namespace lathe
