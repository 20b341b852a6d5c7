// FNV-1a, 64-bit: the one string hash lathe's ids and cache keys use (sweep ids, CUDA
// kernel symbols, NVRTC cache keys, synthetic weights' seeds, model file hashes).
// Chained by passing the previous hash as `h`.
#pragma once

#include <cstdint>
#include <string_view>

namespace lathe {

constexpr uint64_t kFnv1aBasis = 1469598103934665603ULL;

inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aBasis) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace lathe
