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
  // Each decode step i = 1 .. gen - 1 at context prompt + i; above 4096 steps, the mean
  // of 4096 evenly spaced ones (the midpoints of equal runs of steps; a step's cost
  // grows smoothly with its context), so 2^24 generated tokens do not take minutes.
  const int64_t steps = gen - 1;
  const int64_t kExactSteps = 4096;
  double mean = 0;
  if (steps <= kExactSteps) {
    for (int64_t i = 1; i <= steps; ++i) mean += c.decode_s(beams, prompt + i);
    mean = steps > 0 ? mean / double(steps) : 0;
  } else {
    for (int64_t j = 0; j < kExactSteps; ++j)
      mean += c.decode_s(beams, prompt + 1 + (2 * j + 1) * steps / (2 * kExactSteps));
    mean /= double(kExactSteps);
  }
  b.ms_per_token = gen > 1 ? mean * 1e3 : c.decode_s(beams, prompt + 1) * 1e3;
  return b;
}

}  // namespace lathe
