#include "runtime/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ir/assert.h"
#include "ir/json_fields.h"

namespace lathe {

namespace {

using Json = nlohmann::json;

// A header larger than this is not a real checkpoint's (they hold a few MB at most).
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;

float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      u = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int safetensors_dtype_bytes(std::string_view d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

int64_t SafetensorsTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block
  if (fd < 0) throw Error(path + ": cannot open file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  f->size_ = size_t(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error(path + ": cannot map file: " + std::strerror(errno));
    }
    f->map_ = p;
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  f->index();
  return f;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_bytes(std::string bytes,
                                                             const std::string& source) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = source;
  f->bytes_ = std::move(bytes);
  f->data_ = reinterpret_cast<const uint8_t*>(f->bytes_.data());
  f->size_ = f->bytes_.size();
  f->index();
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

void SafetensorsFile::index() {
  const std::string& p = path_;
  if (size_ < 8)
    throw Error(p + ": not a safetensors file (" + std::to_string(size_) +
                " bytes; the 8-byte header length is missing)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | data_[i];
  if (n > kMaxHeader || n > size_ - 8)
    throw Error(p + ": corrupt safetensors header length " + std::to_string(n) + " (the file has " +
                std::to_string(size_) + " bytes)");
  data_start_ = 8 + size_t(n);
  const uint64_t data_bytes = size_ - data_start_;
  const char* h = reinterpret_cast<const char*>(data_ + 8);
  Json j;
  try {
    j = parse_json_unique_keys(h, h + n, p + ": safetensors header");
  } catch (const Json::exception& e) {
    throw Error(p + ": safetensors header is not valid JSON: " + json_error_text(e.what()));
  }
  if (!j.is_object()) throw Error(p + ": safetensors header is not a JSON object");
  struct Range {
    uint64_t begin, end;
    std::string name;
    bool operator<(const Range& o) const { return begin != o.begin ? begin < o.begin : end < o.end; }
  };
  std::vector<Range> ranges;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& why) { throw Error(p + ": tensor '" + name + "': " + why); };
    const Json& v = it.value();
    if (!v.is_object()) bad("expected an object with dtype, shape and data_offsets");
    SafetensorsTensor t;
    auto d = v.find("dtype");
    if (d == v.end() || !d->is_string()) bad("missing dtype");
    t.dtype = d->get<std::string>();
    int bytes = safetensors_dtype_bytes(t.dtype);
    if (bytes == 0) bad("unknown dtype '" + t.dtype + "'");
    auto s = v.find("shape");
    if (s == v.end() || !s->is_array()) bad("missing shape");
    uint64_t elements = 1;
    for (const Json& x : *s) {
      if (!x.is_number_unsigned())
        bad("shape " + s->dump() + " is not a list of non-negative integers");
      uint64_t dim = x.get<uint64_t>();
      if (dim > (uint64_t(1) << 40) || (dim && elements > (uint64_t(1) << 50) / dim))
        bad("shape " + s->dump() + " is too large");
      elements *= dim;
      t.shape.push_back(int64_t(dim));
    }
    auto o = v.find("data_offsets");
    if (o == v.end() || !o->is_array() || o->size() != 2 || !(*o)[0].is_number_unsigned() ||
        !(*o)[1].is_number_unsigned())
      bad("data_offsets must be [begin, end]");
    t.begin = (*o)[0].get<uint64_t>();
    t.end = (*o)[1].get<uint64_t>();
    if (t.begin > t.end) bad("data_offsets " + o->dump() + " end before they begin");
    if (t.end > data_bytes)
      bad("data_offsets " + o->dump() + " run past the end of the file (the data section has " +
          std::to_string(data_bytes) + " bytes; truncated?)");
    if (t.end - t.begin != elements * uint64_t(bytes))
      bad("data_offsets " + o->dump() + " hold " + std::to_string(t.end - t.begin) +
          " bytes but shape " + s->dump() + " of " + t.dtype + " needs " +
          std::to_string(elements * uint64_t(bytes)));
    ranges.push_back({t.begin, t.end, name});
    tensors_[name] = std::move(t);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end && ranges[i].begin != ranges[i].end &&
        ranges[i - 1].begin != ranges[i - 1].end)
      throw Error(p + ": tensors '" + ranges[i - 1].name + "' and '" + ranges[i].name +
                  "' overlap in the data section at byte " + std::to_string(ranges[i].begin));
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsFile::read_f32(const std::string& name, int64_t offset, int64_t count,
                               float* out) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw Error(path_ + ": no tensor '" + name + "'");
  LATHE_ASSERT(offset >= 0 && count >= 0 && offset + count <= t->elements(),
               "read_f32 out of range: " + name);
  const uint8_t* src = data_ + data_start_ + t->begin;
  if (t->dtype == "F32") {
    std::memcpy(out, src + offset * 4,
                size_t(count) * 4);  // little-endian hosts only, as the kernels
  } else if (t->dtype == "BF16" || t->dtype == "F16") {
    const bool bf = t->dtype == "BF16";
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, src + (offset + i) * 2, 2);
      out[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    throw Error(path_ + ": tensor '" + name + "': dtype " + t->dtype +
                " is not supported (expected F32, F16 or BF16)");
  }
}

std::string safetensors_bytes(const std::vector<SafetensorsEntry>& entries) {
  Json h = Json::object();
  uint64_t at = 0;
  std::string data;
  for (const SafetensorsEntry& e : entries) {
    h[e.name] = {
        {"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + e.data.size()}}};
    at += e.data.size();
    data += e.data;
  }
  std::string header = h.dump();
  while ((8 + header.size()) % 8) header += ' ';
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

}  // namespace lathe
