#include "ir/dtype.h"

#include <cmath>

namespace lathe {

int dtype_bits(DType t) {
  switch (t) {
    case DType::f32: return 32;
    case DType::f16: return 16;
    case DType::bf16: return 16;
    case DType::fp8_e4m3: return 8;
    case DType::int8: return 8;
    case DType::int4: return 4;
    case DType::i32: return 32;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8";
    case DType::int8: return "int8";
    case DType::int4: return "int4";
    case DType::i32: return "i32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "f32" || s == "float32" || s == "fp32") return DType::f32;
  if (s == "f16" || s == "float16" || s == "fp16") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "fp8" || s == "fp8_e4m3" || s == "f8") return DType::fp8_e4m3;
  if (s == "int8" || s == "i8") return DType::int8;
  if (s == "int4" || s == "i4") return DType::int4;
  if (s == "i32" || s == "int32") return DType::i32;
  return std::nullopt;
}

bool is_integer_quant(DType t) { return t == DType::int8 || t == DType::int4; }
bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::fp8_e4m3;
}

double Format::bits_per_element(double cols) const {
  double bits = dtype_bits(dtype);
  if (!has_scales()) return bits;
  double scale_bits = dtype_bits(scale_dtype);
  double groups_per_row = group > 0 ? std::ceil(cols / group) : 1.0;
  return bits + scale_bits * groups_per_row / cols;
}

double Format::bytes(double rows, double cols) const {
  double payload = rows * cols * dtype_bits(dtype) / 8.0;
  if (!has_scales()) return payload;
  double groups_per_row = group > 0 ? std::ceil(cols / group) : 1.0;
  return payload + rows * groups_per_row * dtype_bits(scale_dtype) / 8.0;
}

std::optional<Format> parse_weight_format(std::string_view s, std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<Format> {
    if (why) *why = std::move(msg);
    return std::nullopt;
  };
  if (s == "q8_0") return Format{DType::int8, 32, DType::f16};
  if (s == "q4_0") return Format{DType::int4, 32, DType::f16};
  std::string_view base = s, suffix;
  if (auto colon = s.find(':'); colon != std::string_view::npos) {
    base = s.substr(0, colon);
    suffix = s.substr(colon + 1);
  }
  auto t = parse_dtype(base);
  if (!t || *t == DType::i32)
    return fail("unknown weight format '" + std::string(s) + "' (expected one of " +
                std::string(kWeightFormatSpellings) + ")");
  Format f{*t, 0, DType::f16};
  if (*t == DType::fp8_e4m3) f.scale_dtype = DType::f32;
  if (*t == DType::int4) f.group = 128;  // default group when none is given
  if (!suffix.empty()) {
    if (!is_integer_quant(*t))
      return fail("format '" + std::string(s) + "': only int8 and int4 take a group size");
    if (suffix.size() < 2 || suffix[0] != 'g')
      return fail("format '" + std::string(s) + "': group must be written g32, g64 or g128");
    int g = 0;
    for (char c : suffix.substr(1)) {
      if (c < '0' || c > '9') return fail("format '" + std::string(s) + "': bad group size");
      g = g * 10 + (c - '0');
      if (g > 4096) break;
    }
    if (g != 32 && g != 64 && g != 128)
      return fail("format '" + std::string(s) + "': group size must be 32, 64 or 128");
    if (*t == DType::int8 && g != 32)
      return fail("format '" + std::string(s) + "': int8 supports per-channel or g32 (q8_0)");
    f.group = g;
  }
  return f;
}

std::optional<DType> parse_float_dtype(std::string_view s) {
  auto t = parse_dtype(s);
  if (t && (*t == DType::f32 || *t == DType::f16 || *t == DType::bf16)) return t;
  return std::nullopt;
}

std::optional<DType> parse_kv_dtype(std::string_view s, std::string* why) {
  auto t = parse_dtype(s);
  if (!t || *t == DType::i32) {
    if (why)
      *why = "unknown KV dtype '" + std::string(s) + "' (expected one of " +
             std::string(kKvDtypeSpellings) + ")";
    return std::nullopt;
  }
  return t;
}

std::string format_name(const Format& f) {
  std::string s(dtype_name(f.dtype));
  if (is_integer_quant(f.dtype) && f.group > 0) s += ":g" + std::to_string(f.group);
  return s;
}

}  // namespace lathe
