// A reader of safetensors files (the Hugging Face weight format): an 8-byte
// little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of
// the header), then the data. The file is memory-mapped; tensors are read on demand.
//
// Every check a malformed file can fail (short file, header length past the end,
// JSON errors, unknown dtypes, offsets past the end or not matching the shape,
// overlapping tensors) throws lathe::Error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

struct SafetensorsTensor {
  std::string dtype;  // "F32", "F16", "BF16", ... as written in the header
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // Maps and indexes the file at `path`.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // Indexes bytes held in memory (tests, fuzzing); `source` names them in messages.
  static std::shared_ptr<SafetensorsFile> from_bytes(std::string bytes, const std::string& source);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // Converts the tensor's elements [offset, offset + count) to f32 (F32, F16 and BF16;
  // other dtypes throw).
  void read_f32(const std::string& name, int64_t offset, int64_t count, float* out) const;

 private:
  SafetensorsFile() = default;
  void index();
  std::string path_;
  const uint8_t* data_ = nullptr;  // the whole file
  size_t size_ = 0;
  size_t data_start_ = 0;  // 8 + header length
  void* map_ = nullptr;    // mmap'ed region (nullptr for from_bytes)
  std::string bytes_;      // the bytes of from_bytes
  std::map<std::string, SafetensorsTensor> tensors_;
};

// Bytes per element of a safetensors dtype name, 0 when unknown.
int safetensors_dtype_bytes(std::string_view dtype);

// Writes a safetensors file (F32, F16 or BF16 data given as raw little-endian bytes);
// for tests and fixtures.
struct SafetensorsEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string data;
};
std::string safetensors_bytes(const std::vector<SafetensorsEntry>& entries);

}  // namespace lathe
