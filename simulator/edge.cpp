#include "simulator/edge.h"

#include <algorithm>

#include "ir/assert.h"

namespace lathe {

EdgeMemory edge_memory(const MemoryFootprint& m, const Target& t, double os_reserve_gb) {
  EdgeMemory e;
  e.weights = m.weights;
  e.kv = m.kv;
  e.activations = m.activations;
  e.os_reserve = t.unified_memory > 0 ? os_reserve_gb * 1e9 : 0;
  e.total = e.weights + e.kv + e.activations + e.os_reserve;
  e.capacity = t.capacity_bytes();
  e.headroom = e.capacity - e.total;
  e.fits = e.headroom >= 0;
  return e;
}

Target unified_bandwidth_target(const Target& t, double cpu_share) {
  if (!(cpu_share >= 0 && cpu_share <= 0.95))
    throw Error("CPU bandwidth share must be in [0, 0.95]");
  Target x = t;
  if (t.unified_memory > 0) x.hbm_bandwidth_gbs *= 1.0 - cpu_share;
  return x;
}

BeamCost beam_cost(StepCoster& c, int64_t prompt, int64_t gen, int64_t beams) {
  LATHE_ASSERT(beams >= 1 && gen >= 1 && prompt >= 1, "bad beam shape");
  BeamCost b;
  b.beams = beams;
  double per_token = c.kv_bytes_per_token();
  b.kv_bytes = double(beams) * double(prompt + gen) * per_token;
  b.kv_bytes_shared = (double(prompt) + double(beams) * double(gen)) * per_token;
  b.prefill_ms = c.prefill_s(1, prompt) * 1e3;
  double decode = 0;
  for (int64_t i = 1; i < gen; ++i) decode += c.decode_s(beams, prompt + i);
  b.ms_per_token = gen > 1 ? decode / double(gen - 1) * 1e3 : c.decode_s(beams, prompt + 1) * 1e3;
  return b;
}

}  // namespace lathe
