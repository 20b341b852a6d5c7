// Edge devices with unified memory (Jetson): the CPU side and the accelerator share
// one memory, so the plan's budget is the capacity less what the OS and the CPU-side
// program keep, and the CPU side's traffic takes a share of the bandwidth.
// Also the cost of beam search: beam width w decodes w sequences a step.
#pragma once

#include <cstdint>

#include "ir/target.h"
#include "simulator/simulate.h"
#include "simulator/step_cost.h"

namespace lathe {

struct EdgeMemory {
  double weights = 0, kv = 0, activations = 0, os_reserve = 0;
  double total = 0;     // all of the above
  double capacity = 0;  // the device's memory
  bool fits = true;
  double headroom = 0;  // capacity - total
};

// The plan's footprint with `os_reserve_gb` of unified memory kept for the OS and the
// CPU side (0 on a discrete GPU, whose memory is its own).
EdgeMemory edge_memory(const MemoryFootprint& m, const Target& t, double os_reserve_gb);

// The target the accelerator sees while the CPU side uses `cpu_share` of a unified
// memory's bandwidth (unchanged on discrete GPUs). Throws lathe::Error on a share
// outside [0, 0.95].
Target unified_bandwidth_target(const Target& t, double cpu_share);

struct BeamCost {
  int64_t beams = 1;
  double kv_bytes = 0;         // every beam holds its own prompt + output KV
  double kv_bytes_shared = 0;  // the prompt's KV shared by the beams (paged, copy-on-write)
  double ms_per_token = 0;     // decode: one step of `beams` sequences per output token
  double prefill_ms = 0;       // the prompt once
};

BeamCost beam_cost(StepCoster& c, int64_t prompt, int64_t gen, int64_t beams);

}  // namespace lathe
