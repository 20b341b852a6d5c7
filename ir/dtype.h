// Element types and storage formats of tensors.
//
// A DType is the element type of an activation or of the quantized payload of a
// weight. A Format is how a weight (or the KV cache) is stored: the element type,
// plus, for integer types, the quantization group along the reduction axis and the
// dtype of the per-group scales. Bytes are counted in bits so that int4 is exact.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe {

enum class DType : uint8_t { f32, f16, bf16, fp8_e4m3, int8, int4, i32 };

// Bits per element (int4 = 4).
int dtype_bits(DType t);
// Canonical spelling: f32 f16 bf16 fp8 int8 int4 i32.
std::string_view dtype_name(DType t);
// Accepts the canonical spellings plus fp8_e4m3, fp16, float32, float16, bfloat16.
std::optional<DType> parse_dtype(std::string_view s);
// f32, f16 or bf16 (a model's dtype, the activation dtype); nullopt for anything else.
std::optional<DType> parse_float_dtype(std::string_view s);
bool is_integer_quant(DType t);  // int8 / int4: need scales
bool is_float(DType t);

// Storage format of a weight matrix [N, K] (rows = output features, K contiguous) or
// of KV cache vectors [head_dim].
//  - floats (f32/f16/bf16): group = 0, no scales.
//  - fp8: per-output-row f32 scale (group = 0).
//  - int8: group = 0 means one scale per output row (per channel); group = 32 is
//    block-32 like GGUF Q8_0.
//  - int4: group g in {32, 64, 128}; symmetric, value = (q - 8) * scale, like GGUF Q4_0
//    for g = 32.
// For KV caches integer formats use one scale per (token, head): group = head_dim.
struct Format {
  DType dtype = DType::f32;
  int group = 0;                 // elements per scale along K; 0 = one scale per row
  DType scale_dtype = DType::f16;

  bool operator==(const Format&) const = default;

  bool has_scales() const { return is_integer_quant(dtype) || dtype == DType::fp8_e4m3; }
  // Bytes to store a [rows, cols] matrix in this format, scales included.
  double bytes(double rows, double cols) const;
  // Average bits per element including scales (int4:g128 with f16 scales = 4.125).
  double bits_per_element(double cols) const;
};

// Weight spellings: f32 f16 bf16 fp8 int8 int8:g32 q8_0 int4 int4:g32|g64|g128 q4_0.
// Returns nullopt and sets *why on a bad spelling.
std::optional<Format> parse_weight_format(std::string_view s, std::string* why = nullptr);
// KV spellings: f32 f16 bf16 fp8 int8 int4 (integer KV: per-(token, head) scales).
std::optional<DType> parse_kv_dtype(std::string_view s, std::string* why = nullptr);
std::string format_name(const Format& f);

inline constexpr std::string_view kWeightFormatSpellings =
    "f32, f16, bf16, fp8, int8, int8:g32 (q8_0), int4:g32 (q4_0), int4:g64, int4:g128";
inline constexpr std::string_view kKvDtypeSpellings = "f32, f16, bf16, fp8, int8, int4";

}  // namespace lathe
