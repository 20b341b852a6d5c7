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
  // A paged cache holds whole blocks: each beam's context rounds up to blocks. Shared,
  // the beams keep the prompt's full blocks once and each copies its last, partial one
  // when it writes (copy-on-write), then grows its own blocks.
  const int64_t blk = c.kv_block();
  b.kv_bytes = double(beams) * double(in_whole_kv_blocks(prompt + gen, blk)) * per_token;
  const int64_t shared = prompt / blk * blk;
  b.kv_bytes_shared = (double(shared) + double(beams) * double(in_whole_kv_blocks(prompt - shared + gen, blk))) * per_token;
  b.prefill_ms = c.prefill_s(1, prompt) * 1e3;
  // Each decode step i = 1 .. gen - 1 at context prompt + i.
  const int64_t steps = gen - 1;
  double mean = steps > 0 ? c.decode_sum_s(beams, prompt + 1, steps) / double(steps) : 0;
  b.ms_per_token = gen > 1 ? mean * 1e3 : c.decode_s(beams, prompt + 1) * 1e3;
  return b;
}

}  // namespace lathe
