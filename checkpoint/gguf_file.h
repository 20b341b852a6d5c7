// GGUF (version 2 and 3) files: a memory-mapped reader that validates the whole
// header up front, and a streaming writer. The format (ggml's docs/gguf.md):
//
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 value type, value),
//   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset),
//   padding to general.alignment (default 32), tensor data (each tensor aligned).
//
// Strings are u64 length + bytes; arrays are u32 element type + u64 count + elements.
// ne[0] is the contiguous dimension, so lathe's row-major shape [..., rows, K] is the
// reverse of ne. Every malformed input throws lathe::Error naming the file and the key
// or tensor; nothing is read outside the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lathe::gguf {

enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
const char* value_type_name(ValueType t);

// A metadata value. Scalars keep their number in `number` (exact for integers below
// 2^53) or their text in `text`; arrays hold numbers or strings by element type.
struct Value {
  ValueType type = ValueType::u32;
  ValueType elem = ValueType::u8;  // arrays only
  double number = 0;
  std::string text;
  std::vector<double> numbers;       // numeric / bool arrays
  std::vector<std::string> strings;  // string arrays
  size_t size() const { return elem == ValueType::string ? strings.size() : numbers.size(); }
  bool is_array() const { return type == ValueType::array; }
  bool is_number() const { return type != ValueType::string && type != ValueType::array; }
};

// ggml tensor types (ggml.h numbering). lathe loads F32, F16, BF16, Q8_0, Q4_0;
// the others are known by name and size so errors can name them.
enum class TensorType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, BF16 = 30 };
struct TypeInfo {
  const char* name = nullptr;  // nullptr: unknown type id
  int64_t block = 0;           // elements per block
  int64_t block_bytes = 0;
};
TypeInfo type_info(uint32_t ggml_type);
std::string type_name(uint32_t ggml_type);  // "Q4_K", or "type 77" when unknown
bool type_supported(uint32_t ggml_type);    // F32 F16 BF16 Q8_0 Q4_0

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] contiguous
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // inside the mapping
  int64_t elements() const;
  // lathe's row-major shape: ne reversed.
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

class File {
 public:
  // Maps and validates `path`: magic, version, every key, every tensor info, types,
  // alignment, and that each tensor's data lies inside the file.
  static std::shared_ptr<const File> open(const std::string& path);
  // The same from bytes in memory (tests, fuzzing); `name` is used in messages.
  static std::shared_ptr<const File> parse(const uint8_t* data, size_t size,
                                           const std::string& name);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, Value>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  const Value* get(const std::string& key) const;

  // Typed metadata access; throw lathe::Error "path: key 'k': ..." when missing (the
  // *_or forms return the default) or of the wrong type.
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  std::optional<int64_t> get_int_opt(const std::string& key) const;
  std::optional<double> get_float_opt(const std::string& key) const;
  const Value& get_array(const std::string& key, ValueType elem) const;

 private:
  File() = default;
  void parse_all();
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

// Builds a GGUF v3 file: metadata in insertion order, tensors whose bytes come from a
// callback at write time (so a model is never held twice in memory).
class Writer {
 public:
  void add(const std::string& key, Value v);
  void add_string(const std::string& key, const std::string& s);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_strings(const std::string& key, std::vector<std::string> v);
  void add_numbers(const std::string& key, ValueType elem, std::vector<double> v);
  // `fill(out)` writes exactly the tensor's bytes (ne and type fix the size).
  using Fill = std::function<void(uint8_t* out)>;
  void add_tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, Fill fill);
  // Writes to a temporary sibling, then renames onto `path`; on any error the
  // temporary is removed and lathe::Error names `path`.
  void write(const std::string& path) const;
  // The tensors added so far and their bytes (as written, without padding).
  size_t tensor_count() const { return tensors_.size(); }
  uint64_t tensor_bytes_total() const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type;
    Fill fill;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
};

// Bytes of a tensor of `ne` in `type`; throws when ne[0] is not a multiple of the
// block or the size overflows.
uint64_t tensor_bytes(uint32_t type, const std::vector<int64_t>& ne, const std::string& where);

}  // namespace lathe::gguf
