// Kernel tuning files: the best parameters `lathe tune` measured per (backend, kernel
// kind, shape), read back by `lathe compile --tuning FILE` (and `lathe run`), which
// sets them as node attributes of the lowered graphs; the emitters turn them into
// template arguments. A node without them keeps the emitter's defaults.
//
// Tunable CPU kernels and their knobs (codegen/cpu/kernel_lib.h):
//   gemm              prefill matmul-family kernels on the GEMM path (more than 8 rows):
//                     tune_cols (columns per block: the dequantized weight tile and the
//                     epilogue tile; 0 = default rule), tune_rows (rows per tile)
//   flash_attention   tune_qt: query rows per tile sharing each K/V read
//   decode_attention  tune_split: parts the context is split into (flash-decoding)
//
// Tunable CUDA kernels and their knobs (codegen/cuda/cuda_prelude.cuh); the CUDA
// parameters have names of their own, so one plan can carry both backends' tuning:
//   gemv              GEMM-family nodes whose step runs the warp-per-row GEMV entry
//                     (at most 8 rows; 16 token-expert pairs for MoE experts):
//                     tune_cuda_warps (warps per block: 4, 8 (default) or 16),
//                     tune_cuda_loads (16-byte weight loads each lane has in flight:
//                     1, 2, 4 or 8; default cuda_gemv_default_loads: 4 for rows of at
//                     least 128 loads of at most 8 elements (16-bit weights with
//                     K >= 1024, f32 with K >= 512), else 1)
//   decode_attention  tune_cuda_split: parts the context is split into (1-128; default
//                     cuda_decode_default_splits: the KV capacity / 64, between 1 and
//                     64). The key includes the capacity (cap=), since the default and
//                     the best split both follow it.
//
// The file (JSON, "format": "lathe-tuning", "version": 1):
//   { "format": "lathe-tuning", "version": 1, "backend": "cpu",
//     "machine": "AMD EPYC 7B13 (avx2), 2 threads", "model": "small", "target": "cpu-host",
//     "workload": {"batch": 1, "prompt": 128, "gen": 16},
//     "entries": [ {"kind": "gemm", "shape": "K=512 N=1536+1536 w=int8 pro=rms_norm epi=silu_mul",
//                   "params": {"tune_cols": 64}, "default_us": 812.0, "best_us": 655.1,
//                   "candidates": [{"params": {...}, "us": ...}, ...]} ] }
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace lathe {

struct TuningEntry {
  std::string kind;   // cpu: gemm, flash_attention, decode_attention; cuda: gemv, decode_attention
  std::string shape;  // the key within the kind (dims, formats, epilogue; not the batch)
  std::map<std::string, int64_t> params;  // node attributes to set
  double default_us = 0, best_us = 0;     // measured per call
  std::vector<std::pair<std::map<std::string, int64_t>, double>>
      candidates;  // every candidate and its time
};

struct TuningFile {
  std::string backend = "cpu";
  std::string machine, model, target;
  int64_t batch = 1, prompt = 1, gen = 1;
  std::vector<TuningEntry> entries;
};

// The tuning key of a node on a backend, or nullopt when the node has no knob.
struct TuningKey {
  std::string kind, shape;
};
std::optional<TuningKey> tuning_key(const Graph& g, NodeId id, const std::string& backend = "cpu");

// Candidate parameter sets for a key, the default (empty map) first. CUDA GEMV
// candidates depend on the weight format in the shape (16-bit rows can keep more
// loads in flight than rows that must be decoded).
std::vector<std::map<std::string, int64_t>> tuning_candidates(const std::string& kind,
                                                              const std::string& backend = "cpu",
                                                              const std::string& shape = "");

// The backends whose tuning files lathe reads: "cpu" and "cuda".
bool is_tuning_backend(const std::string& backend);
// The kernel kinds a backend tunes (cpu: gemm, flash_attention, decode_attention;
// cuda: gemv, decode_attention).
std::vector<std::string> tuning_kinds(const std::string& backend);
// Throws lathe::Error (naming `where`) when `name` is not a parameter of `backend`, not
// one of `kind`'s kernels (an empty kind skips that check) or `value` is outside the
// values its kernels accept.
void check_tuning_param(const std::string& backend, const std::string& kind, const std::string& name,
                        int64_t value, const std::string& where);

std::string tuning_to_json(const TuningFile& t);
// Throws lathe::Error (naming `source`) on malformed files.
TuningFile tuning_from_json(const std::string& text, const std::string& source);

// A node's tuning parameter for an emitter: `def` when unset; throws lathe::Error when
// it is not an integer (a hand-edited plan) or not a value the kernels take.
int64_t tuning_param(const Attrs& a, const std::string& backend, const char* name, int64_t def);

// Sets the parameters of every matching node; returns how many nodes changed.
int apply_tuning(Graph& g, const TuningFile& t, const std::string& backend = "cpu");
// Sets one parameter set on every node of a key (the tuner's candidates).
int apply_params(Graph& g, const std::string& kind, const std::string& shape,
                 const std::map<std::string, int64_t>& params, const std::string& backend = "cpu");

}  // namespace lathe
