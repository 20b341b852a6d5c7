// Weights in the formats a plan asks for, as the kernels read them (see
// codegen/cpu/kernel_prelude.h for the byte layouts), and the seeded synthetic
// initialization used when no checkpoint is given.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"

namespace lathe {

// 64-byte aligned bytes.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  void* data() { return ptr_.get(); }
  const void* data() const { return ptr_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> ptr_;
  size_t size_ = 0;
};

struct WeightTensor {
  std::string name;
  Format format;
  std::vector<int64_t> shape;  // [..., rows, K]; rows x K is the matrix packed
  AlignedBuffer payload;
  AlignedBuffer scales;  // f16 per group (f32 per row for fp8; empty for float formats)
  int64_t rows() const;
  int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
};

// Packs `rows` rows of K floats into `f` (payload and scales sized by the caller via
// packed_bytes / scale_count).
size_t packed_bytes(const Format& f, int64_t rows, int64_t K);
size_t scale_count(const Format& f, int64_t rows, int64_t K);
void pack_rows(const float* x, int64_t rows, int64_t K, const Format& f, void* payload, uint16_t* scales);
// fp8 e4m3 codes (round to nearest even, saturating at +-448).
uint8_t float_to_e4m3(float f);
float e4m3_to_float(uint8_t c);
// Unpacks back to floats (tests, the reference's view of quantized checkpoints).
void unpack_rows(const void* payload, const uint16_t* scales, int64_t rows, int64_t K, const Format& f, float* out);

// The deterministic synthetic value of every element of a weight, by name and seed:
// uniform with a standard deviation that keeps activations O(1): 1/sqrt(K) for
// matrices, 1 for the embedding table, 1 +- 0.1 for norm gains.
void synthetic_values(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape, float* out);

// Where weight values come from: fills `out` with the f32 values of a tensor.
using WeightSource = std::function<void(const std::string& name, const std::vector<int64_t>& shape, float* out)>;
WeightSource synthetic_source(uint64_t seed);

// Fills a tensor (format, shape, payload and scales already allocated) straight from
// a checkpoint's bytes; returns false when the stored format differs, and the tensor
// then comes from the WeightSource (f32 values packed into the format).
using DirectFill = std::function<bool(WeightTensor& t)>;

class WeightStore {
 public:
  // One tensor per weight of the graphs, in the graph's format, from `direct` when it
  // can, else from `source` (no f32 copy of the model is kept).
  static WeightStore build(const std::vector<const Graph*>& graphs, const WeightSource& source, int threads,
                           const DirectFill& direct = {});
  const WeightTensor& get(const std::string& name) const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  double bytes() const;
  void add(WeightTensor t);
  const std::map<std::string, WeightTensor>& tensors() const { return tensors_; }

 private:
  std::map<std::string, WeightTensor> tensors_;
};

}  // namespace lathe
