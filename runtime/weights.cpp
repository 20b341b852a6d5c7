#include "runtime/weights.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sys/mman.h>
#include <thread>

#include "codegen/cpu/kernel_prelude.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "ir/hash.h"
#include "ir/host.h"

namespace lathe {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  // Large buffers (weights, KV cache, arenas) are 2 MB aligned and ask for
  // transparent huge pages: streaming GEMVs lose bandwidth to TLB misses otherwise.
  constexpr size_t kHuge = size_t(2) << 20;
  size_t align = bytes >= kHuge ? kHuge : 64;
  size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
#ifdef MADV_HUGEPAGE
  if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  ptr_.reset(p);
}
void AlignedBuffer::Free::operator()(void* p) const { std::free(p); }

int64_t WeightTensor::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
  return r;
}

// fp8 e4m3 (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, max 448, no
// infinities), round to nearest even, saturating.
uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  double a = std::fabs(double(f));
  if (a >= 448.0) return sign | 0x7e;
  if (a < std::ldexp(1.0, -6)) {  // subnormal: m x 2^-9, m in 0..7
    double m = std::nearbyint(a / std::ldexp(1.0, -9));
    return sign | uint8_t(m);  // m == 8 is exactly the smallest normal (0x08)
  }
  int e = std::ilogb(a);
  double mant = a / std::ldexp(1.0, e) - 1.0;
  double m = std::nearbyint(mant * 8.0);
  if (m >= 8.0) m = 0, ++e;
  if (e > 8) return sign | 0x7e;
  return sign | uint8_t(((e + 7) << 3) | int(m));
}

float e4m3_to_float(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  double v = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return float((c & 0x80) ? -v : v);
}

size_t packed_bytes(const Format& f, int64_t rows, int64_t K) {
  return size_t(double(rows) * double(K) * dtype_bits(f.dtype) / 8.0);
}

size_t scale_count(const Format& f, int64_t rows, int64_t K) {
  if (!f.has_scales()) return 0;
  return size_t(rows * (f.group > 0 ? K / f.group : 1));
}

void pack_rows(const float* x, int64_t rows, int64_t K, const Format& f, void* payload, uint16_t* scales) {
  switch (f.dtype) {
    case DType::f32: std::memcpy(payload, x, size_t(rows * K) * 4); return;
    case DType::f16:
      for (int64_t i = 0; i < rows * K; ++i) static_cast<uint16_t*>(payload)[i] = lk::f2h(x[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < rows * K; ++i) static_cast<uint16_t*>(payload)[i] = lk::f2bf(x[i]);
      return;
    case DType::int8: {
      int g = f.group > 0 ? f.group : int(K);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < K; k += g)
          lk::quant_i8(x + r * K + k, g, static_cast<lk::i8*>(payload) + r * K + k, scales + (r * K + k) / g);
      return;
    }
    case DType::int4: {
      int g = f.group;
      LATHE_ASSERT(g % 32 == 0 && K % g == 0, "int4 groups must be multiples of 32 dividing K");
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < K; k += g)
          lk::quant_i4(x + r * K + k, g, static_cast<uint8_t*>(payload) + (r * K + k) / 2, scales + (r * K + k) / g);
      return;
    }
    case DType::fp8_e4m3: {
      // One f32 scale per row: amax / 448 (the scales buffer holds floats).
      float* sc = reinterpret_cast<float*>(scales);
      for (int64_t r = 0; r < rows; ++r) {
        float amax = 0;
        for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[r * K + k]));
        float d = amax / 448.0f, id = d > 0 ? 1.0f / d : 0.0f;
        sc[r] = d;
        for (int64_t k = 0; k < K; ++k) static_cast<uint8_t*>(payload)[r * K + k] = float_to_e4m3(x[r * K + k] * id);
      }
      return;
    }
    default: throw Error("cannot pack weights as " + format_name(f) + " on the host");
  }
}

void unpack_rows(const void* payload, const uint16_t* scales, int64_t rows, int64_t K, const Format& f, float* out) {
  switch (f.dtype) {
    case DType::f32: std::memcpy(out, payload, size_t(rows * K) * 4); return;
    case DType::f16:
      for (int64_t i = 0; i < rows * K; ++i) out[i] = lk::h2f(static_cast<const uint16_t*>(payload)[i]);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < rows * K; ++i) out[i] = lk::bf2f(static_cast<const uint16_t*>(payload)[i]);
      return;
    case DType::int8: {
      int64_t g = f.group > 0 ? f.group : K;
      for (int64_t i = 0; i < rows * K; ++i)
        out[i] = float(static_cast<const int8_t*>(payload)[i]) * lk::h2f(scales[i / g]);
      return;
    }
    case DType::int4: {
      const uint8_t* p = static_cast<const uint8_t*>(payload);
      for (int64_t i = 0; i < rows * K; i += 32)
        for (int j = 0; j < 16; ++j) {
          float sc = lk::h2f(scales[i / f.group]);
          out[i + j] = float(int(p[i / 2 + j] & 15) - 8) * sc;
          out[i + j + 16] = float(int(p[i / 2 + j] >> 4) - 8) * sc;
        }
      return;
    }
    case DType::fp8_e4m3: {
      const float* sc = reinterpret_cast<const float*>(scales);
      for (int64_t i = 0; i < rows * K; ++i) out[i] = e4m3_to_float(static_cast<const uint8_t*>(payload)[i]) * sc[i / K];
      return;
    }
    default: throw Error("cannot unpack " + format_name(f));
  }
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}


}  // namespace

void synthetic_values(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape, float* out) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  int64_t K = shape.empty() ? 1 : shape.back();
  bool norm = shape.size() == 1;
  bool embedding = name == "tok_embeddings";
  double sigma = norm ? 0.1 : (embedding ? 1.0 : 1.0 / std::sqrt(double(K)));
  double half_width = sigma * std::sqrt(3.0);  // uniform [-a, a] has std a / sqrt(3)
  uint64_t base = splitmix64(seed ^ fnv1a(name));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = splitmix64(base + uint64_t(i));
    double u = double(r >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    double v = (2.0 * u - 1.0) * half_width;
    out[i] = float(norm ? 1.0 + v : v);
  }
}

WeightSource synthetic_source(uint64_t seed) {
  return [seed](const std::string& name, const std::vector<int64_t>& shape, float* out) {
    synthetic_values(seed, name, shape, out);
  };
}

void WeightStore::add(WeightTensor t) {
  std::string name = t.name;
  tensors_[name] = std::move(t);
}

const WeightTensor& WeightStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("weights: no tensor '" + name + "'");
  return it->second;
}

double WeightStore::bytes() const {
  double s = 0;
  for (const auto& [n, t] : tensors_) s += double(t.payload.size() + t.scales.size());
  return s;
}

WeightStore WeightStore::build(const std::vector<const Graph*>& graphs, const WeightSource& source, int threads,
                               const DirectFill& direct) {
  WeightStore store;
  std::vector<const Value*> todo;
  for (const Graph* g : graphs)
    for (ValueId v : g->values_of(ValueKind::weight)) {
      const Value& w = g->value(v);
      if (store.has(w.name)) continue;
      WeightTensor t;
      t.name = w.name;
      t.format = w.format;
      for (const Dim& d : w.shape) {
        LATHE_ASSERT(d.is_const(), "weight with a symbolic dim: " + w.name);
        t.shape.push_back(d.coef);
      }
      store.add(std::move(t));
      todo.push_back(&w);
    }
  // Tensors are independent: generate and pack them on all threads.
  std::vector<WeightTensor*> list;
  for (auto& [n, t] : store.tensors_) list.push_back(&t);
  std::atomic<size_t> next{0};
  std::vector<std::string> errors(size_t(std::max(1, threads)));
  auto worker = [&](int id) {
    try {
      for (size_t i; (i = next.fetch_add(1)) < list.size();) {
        WeightTensor& t = *list[i];
        int64_t rows = t.rows(), K = t.cols();
        t.payload = AlignedBuffer(packed_bytes(t.format, rows, K));
        size_t ns = scale_count(t.format, rows, K);
        if (ns) t.scales = AlignedBuffer(ns * size_t(dtype_bits(t.format.scale_dtype) / 8));
        if (direct && direct(t)) continue;
        std::vector<float> values(size_t(rows * K));
        source(t.name, t.shape, values.data());
        pack_rows(values.data(), rows, K, t.format, t.payload.data(), static_cast<uint16_t*>(t.scales.data()));
      }
    } catch (const std::exception& e) {
      errors[size_t(id)] = e.what();
      next = list.size();
    }
  };
  std::vector<std::thread> pool;
  start_threads(pool, threads - 1, worker, 1);  // as many as start; this one works too
  worker(0);
  for (std::thread& t : pool) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error(e);
  return store;
}

}  // namespace lathe
