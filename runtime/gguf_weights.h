// Weights from and to GGUF files (checkpoint/ reads and writes the container; this file
// moves tensor bytes between it and the runtime's formats).
//
// Loading: a tensor stored in the format the plan keeps (F32/F16/BF16 as f32/f16/
// bf16, Q8_0 as int8:g32, Q4_0 as int4:g32) is copied from the mapping, Q8_0/Q4_0
// blocks split into payload and f16 scales, never through f32. Any other pairing
// (a Q8_0 file run with --weights int4:g32, F32 norms in an f16 plan) is dequantized
// to f32 and packed into the plan's format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "ir/model.h"
#include "runtime/weights.h"

namespace lathe {

// Throws lathe::Error naming the file, tensor and element when a float tensor (F32,
// F16, BF16) holds a NaN or an infinity, or a Q8_0/Q4_0 block has a non-finite scale:
// such a weight turns every logit into NaN. Loading checks each tensor it reads.
void gguf_check_values(const gguf::File& f, const gguf::TensorInfo& t);

// The f32 values of a GGUF tensor (F32, F16, BF16, Q8_0, Q4_0). Throws lathe::Error
// naming the file and tensor for other types and for non-finite values or scales.
void gguf_dequantize(const gguf::File& f, const gguf::TensorInfo& t, float* out);

// The weights of `graphs` from `file` (shapes must match: a --tp split is refused).
WeightStore load_gguf_weights(const std::vector<const Graph*>& graphs,
                              std::shared_ptr<const gguf::File> file, int threads);

// The format each weight of a model takes in a file written with matrices in
// `matrices`: GEMM matrices take it; norms, the embedding table and the MoE router
// stay F32 (as `lathe run --weights` leaves them in an f32 model).
Format gguf_tensor_format(const std::string& lathe_name, const std::vector<int64_t>& shape,
                          const Format& matrices);

// The smallest vocabulary a synthetic SentencePiece vocabulary fits in (3 special
// tokens, 256 bytes and 3 more).
constexpr int64_t kMinSyntheticVocab = 262;

// Writes `m` with the synthetic values of `seed` (runtime synthetic_values, packed
// into `matrices` exactly as `lathe run --weights` packs them) as a llama-architecture
// GGUF v3 file with a synthetic SentencePiece vocabulary (a model with fewer than
// kMinSyntheticVocab tokens gets llama.cpp's "no_vocab" marker instead). Atomic.
// What a write put in the file (so that a caller need not read back an output that is
// a pipe or /dev/null).
struct GgufWritten {
  size_t tensors = 0;
  uint64_t bytes = 0;  // the tensors' data
};
GgufWritten write_synthetic_gguf(const ModelSpec& m, uint64_t seed, const Format& matrices,
                                 const std::string& path);
// The same with the values of `source` (f32 values under lathe's weight names, e.g. a
// Hugging Face checkpoint's), with the synthetic vocabulary or none (`vocabulary`).
GgufWritten write_gguf(const ModelSpec& m, const WeightSource& source, const Format& matrices,
                       const std::string& path, bool vocabulary);

}  // namespace lathe
