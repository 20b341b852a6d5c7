// Target: a machine the simulator costs kernels on and codegen emits for.
//
// Every numeric field is reachable by a dotted key ("hbm_bandwidth_gbs",
// "peak_tflops.bf16", "efficiency.gemm") through target_fields(), which the TOML
// reader, `--set key=value` and sweeps all share, so a new field is one table row.
#pragma once

#include <optional>
#include <span>
#include <cmath>
#include <string>
#include <string_view>

#include "ir/dtype.h"

namespace lathe {

enum class TargetKind : uint8_t { gpu, cpu };

// Fractions of peak that real kernels reach. They are the calibratable part of the
// model: defaults come from the hardware spec and `lathe calibrate` fits them.
struct Efficiency {
  double gemm = 0.75;         // large dense GEMM, fraction of the dtype's matrix peak
  double attention = 0.55;    // flash attention in prefill, fraction of matrix peak
  double memory = 0.85;       // streaming kernels (GEMV, decode attention), of bandwidth
  double elementwise = 0.70;  // norms, RoPE, small elementwise kernels, of bandwidth
  double dequant = 1.0;       // relative speed of dequantization ALU work (1 = as modelled)
  double scalar = 0.5;        // non-matrix FLOPs (softmax, norms) of the fp32 peak
  double int_dot = 0.375;     // CPUs: int4 integer-dot-product GEMMs/GEMVs, of the 8-bit dot peak
  double int8_dot = 0.375;    // the same with int8 weights
  // CPUs: the integer-dot-product GEMVs (decode: at most kCpuGemvRows rows, expert
  // GEMMs at most 16 token-expert pairs) when they differ from the GEMMs' register
  // tiles; 0 = int_dot / int8_dot.
  double int_dot_gemv = 0;
  double int8_dot_gemv = 0;
  // CPUs: the generated GEMVs of decode (at most kCpuGemvRows rows) that multiply in
  // floating point (f32/f16/bf16 weights, and integer weights on hosts without 8-bit
  // dot products), of the FP32 peak; 0 = gemm. They are not BLAS: no packing, but a load
  // of the activations per multiply-add, so well under the FMA peak (`lathe probe`
  // measures them at 8 rows).
  double gemv = 0;
  double gemv_of() const { return gemv > 0 ? gemv : gemm; }
  // The integer-dot-product factor in use: int4 or int8 weights, GEMV or GEMM (an unset
  // GEMV factor is the GEMMs').
  double int_dot_of(bool int4, bool gemv) const {
    const double g = int4 ? int_dot_gemv : int8_dot_gemv;
    return gemv && g > 0 ? g : (int4 ? int_dot : int8_dot);
  }
};

struct Target {
  std::string name;
  std::string description;
  // The kernel build a probed or calibrated spec was measured with (codegen/kernels_id.h:
  // "cpu:<hash>" or "cuda:<hash>"); empty for datasheet specs.
  std::string measured_with;
  TargetKind kind = TargetKind::gpu;
  int compute_capability = 0;  // 80 for sm_80; 0 for CPUs
  double sm_count = 0;         // SMs (GPU) or cores (CPU)
  double clock_mhz = 0;
  // Dense (non-sparse) peak throughput in TFLOP/s (TOP/s for int8); 0 = unsupported.
  double peak_fp32 = 0, peak_tf32 = 0, peak_fp16 = 0, peak_bf16 = 0, peak_fp8 = 0,
         peak_int8 = 0;
  double memory_gb = 0;          // device memory capacity (GB = 1e9 bytes)
  double hbm_bandwidth_gbs = 0;  // peak memory bandwidth, GB/s
  double l2_mb = 0;
  double smem_per_sm_kb = 0;
  double launch_overhead_us = 0;  // per kernel, host launch to start
  double nvlink_gbs = 0;          // per-GPU bidirectional interconnect bandwidth, 0 = none
  double pcie_gbs = 0;
  double interconnect_latency_us = 5;  // per collective step (one synchronization)
  // 1 when the NVLink ports go through an NVSwitch fabric (HGX boards: every device
  // reaches every other at nvlink_gbs), so collectives can use direct one- and two-shot
  // algorithms; 0 = ring only (NVLink bridges between pairs, PCIe).
  double nvlink_switch = 0;
  double price_per_hour = 0;           // USD per device-hour, for cost objectives
  double unified_memory = 0;           // 1 when CPU and GPU share the memory (Jetson)
  double gemm_tile_m = 128, gemm_tile_n = 128;  // tile shape for wave quantization
  // CPUs: rows at which a BLAS GEMM reaches half its large-M efficiency (packing the
  // weight panel costs the same for any row count); 0 = efficiency flat in M.
  double gemm_half_rows = 0;
  // CPUs: reduction length at which the integer-dot-product GEMM reaches half of
  // efficiency.int_dot (each register tile's setup and reduction); 0 = flat in K.
  double int_dot_half_k = 0;
  double int8_dot_half_k = 0;  // the same for int8 weights
  // CPUs: rows at which that GEMM reaches half of efficiency.int_dot from its per-call
  // work on the weights (scale expansion, reading each weight block once per row tile);
  // 0 = flat in M. Both overheads add in time: efficiency at (M, K) =
  // int_dot / (1 + int_dot_half_k / K + int_dot_half_rows / M).
  double int_dot_half_rows = 0;
  double int8_dot_half_rows = 0;  // the same for int8 weights
  // CPUs: reduction length at which the integer GEMVs of decode (efficiency.int_dot_gemv /
  // int8_dot_gemv, their long-K limit) reach half of it: each output's horizontal sum,
  // scale and store and each row's activation setup against its K dot products;
  // efficiency at K = int_dot_gemv / (1 + int_dot_gemv_half_k / K). 0 = flat.
  double int_dot_gemv_half_k = 0;
  double int8_dot_gemv_half_k = 0;  // the same for int8 weights
  // CPUs: flash attention's fixed costs besides its QK and PV multiply-adds, which add
  // in time: the online softmax of each (query row, key block, head) against head_dim,
  // and loading and transposing each key block once for the query heads that share a
  // KV head. Efficiency at head_dim D and group size G (query heads per KV head) =
  // efficiency.attention / (1 + attention_half_dim / D + attention_half_group / G);
  // 0 = flat.
  double attention_half_dim = 0;
  double attention_half_group = 0;
  // Kernels overlap compute and memory imperfectly near the ridge point: busy time is
  // (compute^p + memory^p)^(1/p). p = 2 gives 1.41 x max at the ridge; a large p is
  // the pure roofline max.
  double roofline_exponent = 2.0;
  Efficiency eff;

  bool is_gpu() const { return kind == TargetKind::gpu; }
  // Matrix peak in FLOP/s for an operand dtype (0 when the target lacks it).
  double matrix_peak_flops(DType t) const;
  double bandwidth_bytes_per_s() const { return hbm_bandwidth_gbs * 1e9; }
  double capacity_bytes() const { return memory_gb * 1e9; }
  // Whether the target can run a weight or KV format (fp8 needs sm_89+; int8/int4 are
  // dequantized in registers and run everywhere).
  bool supports(DType t) const;
  // Interconnect bandwidth for collectives between devices (NVLink, else PCIe), B/s.
  double link_bytes_per_s() const;
};

struct TargetField {
  std::string_view key;  // dotted TOML path under [hardware]
  double Target::*member;
  double Efficiency::*eff_member;  // set instead of member for efficiency.*
  std::string_view unit;
  std::string_view help;
  // Why no predicted time depends on the field, for a warning when a what-if overrides
  // it (l2_mb, smem_per_sm_kb); empty for the fields the simulator reads.
  std::string_view untimed = {};
};

std::span<const TargetField> target_fields();
const TargetField* find_target_field(std::string_view key);
double get_field(const Target& t, const TargetField& f);
// The value a field stands for: get_field, except that an unset (0) integer GEMV
// efficiency stands for the GEMMs' factor.
double effective_field(const Target& t, const TargetField& f);
void set_field(Target& t, const TargetField& f, double v);
// Whether the field is a fraction of a peak (the efficiency factors, where above 1 means
// faster than the roofline), unlike efficiency.dequant, a relative speed of ALU work.
bool is_peak_fraction(const TargetField& f);
// The values a field may take, the same in hardware TOML files and --set: efficiencies
// in [0.001, 1.5] (dequant, a relative speed, up to 16), roofline_exponent in
// [1, 1000], GEMM tile sizes in [1, 4096], peaks, bandwidths and memory_gb in
// [0.001, 1e12] or 0 (absent; not for memory_gb, hbm_bandwidth_gbs and the fp32 peak,
// which every target needs), everything else in [0, 1e12]. sm_count must also be whole
// (apply_override rounds a factor; target_problem checks).
struct FieldRange {
  double lo, hi;
  bool zero_ok = false;  // 0 is also valid ("not set": the GEMV efficiencies)
  bool contains(double v) const { return std::isfinite(v) && ((v >= lo && v <= hi) || (zero_ok && v == 0)); }
  std::string text() const;  // "[lo, hi]", "0 or [lo, hi]", or the one value ("0 or 1") when lo == hi
};
FieldRange target_field_range(const TargetField& f);
// Applies "key=value" or "key=x1.5" (multiply). Returns an error message or "".
std::string apply_override(Target& t, std::string_view assignment);

// The value side of an override: a finite number, or a factor of the current value
// ("x1.5" or "*1.5", factor set). nullopt when it is neither.
struct OverrideValue {
  bool factor = false;
  double number = 0;
};
std::optional<OverrideValue> parse_override_value(std::string_view val);
// Comma-separated list of valid --set keys, for error messages.
std::string target_field_list();

// What makes a target unusable, or "": a zero memory bandwidth, capacity or fp32 peak,
// a fractional or zero SM count, a GPU with neither an fp16 nor a bf16 peak. Spec files
// are checked when parsed; targets changed by overrides are checked again with this.
std::string target_problem(const Target& t);
// Why a plan cannot split over tp devices of this target, or "": tp > 1 needs a link
// (nvlink_gbs or pcie_gbs above zero).
std::string tp_problem(const Target& t, int64_t tp);
// " (why)" when supports(d) is false ("sm_80; fp8 needs sm_89 or newer", "peak_tflops.fp8
// is 0", "CPUs have no fp8 kernels"), else "".
std::string unsupported_reason(const Target& t, DType d);

}  // namespace lathe
