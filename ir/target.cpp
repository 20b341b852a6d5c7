#include "ir/target.h"

#include <algorithm>
#include <utility>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace lathe {

double Target::matrix_peak_flops(DType t) const {
  double tf = 0;
  switch (t) {
    case DType::f32: tf = is_gpu() ? (peak_tf32 > 0 ? peak_tf32 : peak_fp32) : peak_fp32; break;
    case DType::f16: tf = peak_fp16; break;
    case DType::bf16: tf = peak_bf16; break;
    case DType::fp8_e4m3: tf = peak_fp8; break;
    case DType::int8: tf = peak_int8; break;
    // int4 weights are dequantized to the activation dtype before the MMA.
    case DType::int4: tf = peak_fp16; break;
    case DType::i32: tf = peak_fp32; break;
  }
  if (tf <= 0 && !is_gpu()) tf = peak_fp32;  // CPUs convert to f32 and use FMA
  return tf * 1e12;
}

bool Target::supports(DType t) const {
  if (t == DType::fp8_e4m3) return is_gpu() ? (compute_capability >= 89 && peak_fp8 > 0) : false;
  if (t == DType::bf16 && is_gpu()) return compute_capability >= 80 && peak_bf16 > 0;
  if (t == DType::f16 && is_gpu()) return peak_fp16 > 0;
  return true;
}

std::string unsupported_reason(const Target& t, DType d) {
  if (t.supports(d)) return "";
  if (!t.is_gpu()) return " (CPUs have no " + std::string(dtype_name(d)) + " kernels)";
  if (d == DType::bf16 && t.compute_capability >= 80) return " (peak_tflops.bf16 is 0)";
  if (d == DType::f16) return " (peak_tflops.fp16 is 0)";
  if (d == DType::fp8_e4m3 && t.compute_capability >= 89) return " (peak_tflops.fp8 is 0)";
  if (d == DType::fp8_e4m3)
    return " (sm_" + std::to_string(t.compute_capability) + "; fp8 needs sm_89 or newer)";
  return " (sm_" + std::to_string(t.compute_capability) + ")";
}

std::string target_problem(const Target& t) {
  if (!(t.hbm_bandwidth_gbs > 0)) return "memory bandwidth (hbm_bandwidth_gbs) must be positive";
  if (!(t.memory_gb > 0)) return "memory capacity (memory_gb) must be positive";
  if (!(t.sm_count >= 1) || t.sm_count != std::floor(t.sm_count)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", t.sm_count);
    return "sm_count must be a whole number >= 1 (SMs or cores), got " + std::string(got);
  }
  if (!(t.peak_fp32 > 0)) return "the fp32 peak (peak_tflops.fp32) must be positive";
  if (t.is_gpu() && !(t.peak_fp16 > 0) && !(t.peak_bf16 > 0)) return "a GPU needs an fp16 or bf16 peak above 0";
  return "";
}

std::string tp_problem(const Target& t, int64_t tp) {
  if (tp > 1 && !(t.link_bytes_per_s() > 0))
    return "tp " + std::to_string(tp) + " needs a link between devices, but nvlink_gbs and pcie_gbs are both 0";
  return "";
}

double Target::link_bytes_per_s() const {
  double gbs = nvlink_gbs > 0 ? nvlink_gbs : pcie_gbs;
  return gbs * 1e9;
}

namespace {
#define TF(key, member, unit, help) TargetField{key, &Target::member, nullptr, unit, help}
#define EF(key, member, help) TargetField{key, nullptr, &Efficiency::member, "fraction", help}
const TargetField kTargetFields[] = {
    TF("sm_count", sm_count, "count",
       "streaming multiprocessors (GPU) or cores (CPU); an override scales the compute peaks with it"),
    TF("clock_mhz", clock_mhz, "MHz", "boost clock; an override scales the compute peaks with it"),
    TF("peak_tflops.fp32", peak_fp32, "TFLOP/s", "dense FP32 (CUDA cores / CPU FMA)"),
    TF("peak_tflops.tf32", peak_tf32, "TFLOP/s", "dense TF32 tensor cores"),
    TF("peak_tflops.fp16", peak_fp16, "TFLOP/s", "dense FP16 tensor cores, FP32 accumulate"),
    TF("peak_tflops.bf16", peak_bf16, "TFLOP/s", "dense BF16 tensor cores, FP32 accumulate"),
    TF("peak_tflops.fp8", peak_fp8, "TFLOP/s", "dense FP8 tensor cores (0 = unsupported)"),
    TF("peak_tflops.int8", peak_int8, "TOP/s", "dense INT8 tensor cores"),
    TF("memory_gb", memory_gb, "GB", "device memory capacity"),
    TF("hbm_bandwidth_gbs", hbm_bandwidth_gbs, "GB/s", "peak memory bandwidth"),
    TargetField{"l2_mb", &Target::l2_mb, nullptr, "MB",
                "last-level cache (the L2 hit rates --per-op shows; no time depends on it)",
                "changes only the L2 hit rates --per-op shows; no predicted time depends on it"},
    TargetField{"smem_per_sm_kb", &Target::smem_per_sm_kb, nullptr, "KB",
                "shared memory per SM (descriptive; no figure depends on it)",
                "is descriptive; no figure lathe predicts depends on it"},
    TF("launch_overhead_us", launch_overhead_us, "us", "per-kernel launch overhead"),
    TF("nvlink_gbs", nvlink_gbs, "GB/s", "NVLink bandwidth per GPU (0 = none)"),
    TF("pcie_gbs", pcie_gbs, "GB/s", "PCIe bandwidth"),
    TF("interconnect_latency_us", interconnect_latency_us, "us", "latency per collective step"),
    TF("nvlink_switch", nvlink_switch, "0/1", "NVLink through an NVSwitch fabric: direct one/two-shot collectives"),
    TF("price_per_hour", price_per_hour, "USD/h", "price of one device-hour"),
    TF("unified_memory", unified_memory, "0/1", "CPU and accelerator share memory"),
    TF("gemm_tile_m", gemm_tile_m, "rows", "GEMM tile rows for wave quantization"),
    TF("gemm_tile_n", gemm_tile_n, "cols", "GEMM tile columns for wave quantization"),
    TF("gemm_half_rows", gemm_half_rows, "rows", "CPU GEMMs: rows at which efficiency is half its large-M value (0 = flat)"),
    TF("int_dot_half_k", int_dot_half_k, "K", "CPU integer GEMMs: reduction length at which efficiency.int_dot halves (0 = flat)"),
    TF("int8_dot_half_k", int8_dot_half_k, "K", "the same for int8 weights and efficiency.int8_dot"),
    TF("int_dot_half_rows", int_dot_half_rows, "rows", "CPU integer GEMMs: rows at which efficiency.int_dot halves (0 = flat)"),
    TF("int8_dot_half_rows", int8_dot_half_rows, "rows", "the same for int8 weights and efficiency.int8_dot"),
    TF("int_dot_gemv_half_k", int_dot_gemv_half_k, "K",
       "CPU integer GEMVs (decode): reduction length at which efficiency.int_dot_gemv halves (0 = flat)"),
    TF("int8_dot_gemv_half_k", int8_dot_gemv_half_k, "K", "the same for int8 weights and efficiency.int8_dot_gemv"),
    TF("attention_half_dim", attention_half_dim, "head_dim",
       "CPU flash attention: head_dim at which efficiency.attention halves (0 = flat)"),
    TF("attention_half_group", attention_half_group, "heads",
       "CPU flash attention: query heads per KV head at which efficiency.attention halves (0 = flat)"),
    TF("roofline_exponent", roofline_exponent, "p", "busy = (compute^p + memory^p)^(1/p); large p = pure max"),
    EF("efficiency.gemm", gemm, "large GEMMs, of matrix peak"),
    EF("efficiency.attention", attention, "flash attention (prefill), of matrix peak"),
    EF("efficiency.memory", memory, "streaming kernels, of memory bandwidth"),
    EF("efficiency.elementwise", elementwise, "norms/RoPE/elementwise, of memory bandwidth"),
    EF("efficiency.dequant", dequant, "speed of dequantization ALU work: GEMM weights, decode attention's KV cache (1 = as modelled)"),
    EF("efficiency.scalar", scalar, "non-matrix FLOPs, of the FP32 peak"),
    EF("efficiency.int_dot", int_dot, "CPU integer-dot-product GEMMs with int4 weights, of the 8-bit dot peak"),
    EF("efficiency.int8_dot", int8_dot, "CPU integer-dot-product GEMMs with int8 weights, of the 8-bit dot peak"),
    EF("efficiency.int_dot_gemv", int_dot_gemv,
       "CPU integer-dot-product GEMVs (decode) with int4 weights, of the 8-bit dot peak (0 = int_dot)"),
    EF("efficiency.int8_dot_gemv", int8_dot_gemv, "the same with int8 weights (0 = int8_dot)"),
    EF("efficiency.gemv", gemv,
       "CPU GEMVs that multiply in floating point (decode, at most 8 rows), of the FP32 peak (0 = gemm)"),
};
#undef TF
#undef EF
}  // namespace

std::span<const TargetField> target_fields() { return kTargetFields; }

const TargetField* find_target_field(std::string_view key) {
  for (const TargetField& f : kTargetFields)
    if (f.key == key) return &f;
  // Accept the short spelling of a peak or efficiency ("bf16", "gemm") when unique.
  const TargetField* found = nullptr;
  for (const TargetField& f : kTargetFields) {
    auto dot = f.key.rfind('.');
    if (dot != std::string_view::npos && f.key.substr(dot + 1) == key) {
      if (found) return nullptr;
      found = &f;
    }
  }
  return found;
}

double get_field(const Target& t, const TargetField& f) {
  return f.member ? t.*(f.member) : t.eff.*(f.eff_member);
}

double effective_field(const Target& t, const TargetField& f) {
  if (f.eff_member == &Efficiency::int_dot_gemv) return t.eff.int_dot_of(true, true);
  if (f.eff_member == &Efficiency::int8_dot_gemv) return t.eff.int_dot_of(false, true);
  if (f.eff_member == &Efficiency::gemv) return t.eff.gemv_of();
  return get_field(t, f);
}

void set_field(Target& t, const TargetField& f, double v) {
  if (f.member)
    t.*(f.member) = v;
  else
    t.eff.*(f.eff_member) = v;
}

std::string target_field_list() {
  std::string s;
  for (const TargetField& f : kTargetFields) {
    if (!s.empty()) s += ", ";
    s += f.key;
  }
  return s;
}

std::string FieldRange::text() const {
  char range[80];
  if (lo == hi) std::snprintf(range, sizeof range, "%s%g", zero_ok ? "0 or " : "", lo);
  else std::snprintf(range, sizeof range, "%s[%g, %g]", zero_ok ? "0 or " : "", lo, hi);
  return range;
}

bool is_peak_fraction(const TargetField& f) { return f.eff_member && f.eff_member != &Efficiency::dequant; }

FieldRange target_field_range(const TargetField& f) {
  if (f.eff_member == &Efficiency::int_dot_gemv || f.eff_member == &Efficiency::int8_dot_gemv ||
      f.eff_member == &Efficiency::gemv)
    return {1e-3, 1.5, true};  // 0: the GEMMs' factor
  if (f.eff_member) return {1e-3, is_peak_fraction(f) ? 1.5 : 16.0};
  if (f.member == &Target::roofline_exponent) return {1.0, 1000.0};
  if (f.member == &Target::nvlink_switch || f.member == &Target::unified_memory)
    return {1.0, 1.0, true};  // a switch: 0 or 1 (0.001 read as on)
  if (f.member == &Target::gemm_tile_m || f.member == &Target::gemm_tile_n) return {1.0, 4096.0};
  // Peaks, bandwidths and capacity: at least 1e-3 of the unit, so that times stay
  // finite; 0 means absent (a format the device lacks, no NVLink) except where a target
  // cannot do without the field (target_problem), so that the range says what is valid.
  std::string_view key = f.key;
  if (key == "hbm_bandwidth_gbs" || key == "memory_gb" || key == "peak_tflops.fp32") return {1e-3, 1e12};
  if (key.starts_with("peak_tflops.") || key == "nvlink_gbs" || key == "pcie_gbs") return {1e-3, 1e12, true};
  return {0.0, 1e12};
}

std::optional<OverrideValue> parse_override_value(std::string_view val) {
  OverrideValue o;
  o.factor = !val.empty() && (val[0] == 'x' || val[0] == '*');
  if (o.factor) val.remove_prefix(1);
  auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), o.number);
  if (ec != std::errc() || p != val.data() + val.size() || !std::isfinite(o.number)) return std::nullopt;
  return o;
}

std::string apply_override(Target& t, std::string_view assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string_view::npos)
    return "override '" + std::string(assignment) + "' must be key=value (e.g. hbm_bandwidth_gbs=6000)";
  std::string_view key = assignment.substr(0, eq), val = assignment.substr(eq + 1);
  const TargetField* f = find_target_field(key);
  if (!f)
    return "unknown hardware key '" + std::string(key) + "'; valid keys: " + target_field_list();
  std::optional<OverrideValue> parsed = parse_override_value(val);
  if (!parsed)
    return "override '" + std::string(assignment) + "': '" + std::string(val) +
           "' is not a number or a factor (x1.5)";
  const bool multiply = parsed->factor;
  double v = parsed->number;
  if (multiply) v *= effective_field(t, *f);  // x0.5 on an unset GEMV factor: half the GEMMs'.
  if (f->member == &Target::sm_count) {  // whole SMs: a factor rounds, a value must be whole
    if (multiply) {
      v = std::round(v);
      if (v < 1) {  // x0 ran on one SM
        char got[32];
        std::snprintf(got, sizeof got, "%g", effective_field(t, *f));
        return "override '" + std::string(assignment) + "': leaves fewer than one SM (sm_count is " + got + ")";
      }
    } else if (v != std::floor(v))
      return "override '" + std::string(assignment) + "': sm_count must be a whole number";
  }
  if (v < 0) return "override '" + std::string(assignment) + "': value must not be negative";
  FieldRange r = target_field_range(*f);
  if (!r.contains(v))
    return "override '" + std::string(assignment) + "': " + std::string(f->key) + (r.lo == r.hi ? " is " : " lies in ") +
           r.text();
  // A peak is SMs x clock x work per SM and cycle: more SMs or a faster clock (what-if
  // `sm_count=x2`) scale every peak, where they changed nothing (the clock) or made
  // GEMMs slower (more SMs sharing the same peak). A peak set after them still wins.
  // A spec without a clock (0: not known) scales nothing, nor does setting it to 0.
  if ((f->member == &Target::sm_count || f->member == &Target::clock_mhz) && t.*(f->member) > 0 && v > 0) {
    const double ratio = v / (t.*(f->member));
    const std::pair<const char*, double Target::*> peaks[] = {
        {"fp32", &Target::peak_fp32}, {"tf32", &Target::peak_tf32}, {"fp16", &Target::peak_fp16},
        {"bf16", &Target::peak_bf16}, {"fp8", &Target::peak_fp8},   {"int8", &Target::peak_int8}};
    for (const auto& [name, peak] : peaks)  // checked before any is changed
      if (t.*peak > 0 && !(t.*peak * ratio >= 1e-3 && t.*peak * ratio <= 1e12))
        return "override '" + std::string(assignment) + "': scales peak_tflops." + name + " to " +
               std::to_string(t.*peak * ratio) + ", outside [0.001, 1e12]";
    for (const auto& [name, peak] : peaks) t.*peak *= ratio;
  }
  set_field(t, *f, v);
  return "";
}

}  // namespace lathe
