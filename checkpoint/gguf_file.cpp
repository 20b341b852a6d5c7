#include "checkpoint/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ir/assert.h"
#include "ir/atomic_file.h"

namespace lathe::gguf {

namespace {

constexpr uint64_t kMaxDims = 4;  // GGML_MAX_DIMS

// Little-endian reads with bounds checks; every failure names the file and what was
// being read.
struct Cursor {
  const uint8_t* p;
  size_t size;
  size_t pos = 0;
  const std::string& file;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(file + ": " + what + " (at byte " + std::to_string(pos) + " of " +
                std::to_string(size) + ")");
  }
  void need(uint64_t n, const std::string& what) const {
    if (n > size - pos) fail("truncated: " + what + " runs past the end of the file");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    uint64_t n = read<uint64_t>(what);
    need(n, what + " (a string of " + std::to_string(n) + " bytes)");
    std::string s(reinterpret_cast<const char*>(p + pos), size_t(n));
    pos += size_t(n);
    return s;
  }
};

size_t scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
      return 8;
    default:
      return 0;
  }
}

double read_number(Cursor& c, ValueType t, const std::string& what) {
  switch (t) {
    case ValueType::u8:
      return c.read<uint8_t>(what);
    case ValueType::i8:
      return c.read<int8_t>(what);
    case ValueType::boolean: {
      uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + ": a bool of value " + std::to_string(b));
      return b;
    }
    case ValueType::u16:
      return c.read<uint16_t>(what);
    case ValueType::i16:
      return c.read<int16_t>(what);
    case ValueType::u32:
      return c.read<uint32_t>(what);
    case ValueType::i32:
      return c.read<int32_t>(what);
    case ValueType::f32:
      return c.read<float>(what);
    case ValueType::u64:
      return double(c.read<uint64_t>(what));
    case ValueType::i64:
      return double(c.read<int64_t>(what));
    case ValueType::f64:
      return c.read<double>(what);
    default:
      LATHE_ASSERT(false, "not a scalar type");
  }
}

Value read_value(Cursor& c, uint32_t raw_type, const std::string& what) {
  if (raw_type > uint32_t(ValueType::f64))
    c.fail(what + ": unknown value type " + std::to_string(raw_type));
  Value v;
  v.type = ValueType(raw_type);
  if (v.type == ValueType::string) {
    v.text = c.string(what);
    return v;
  }
  if (v.type != ValueType::array) {
    v.number = read_number(c, v.type, what);
    return v;
  }
  uint32_t elem = c.read<uint32_t>(what + " (array element type)");
  if (elem > uint32_t(ValueType::f64))
    c.fail(what + ": unknown array element type " + std::to_string(elem));
  v.elem = ValueType(elem);
  if (v.elem == ValueType::array) c.fail(what + ": arrays of arrays are not supported");
  uint64_t n = c.read<uint64_t>(what + " (array length)");
  // Each element takes at least one byte (strings eight): a count beyond that cannot
  // fit in the rest of the file, so nothing huge is ever allocated.
  uint64_t min_elem = v.elem == ValueType::string ? 8 : scalar_bytes(v.elem);
  if (n > (c.size - c.pos) / min_elem)
    c.fail("truncated: " + what + " holds " + std::to_string(n) + " elements");
  if (v.elem == ValueType::string) {
    v.strings.reserve(size_t(n));
    for (uint64_t i = 0; i < n; ++i)
      v.strings.push_back(c.string(what + "[" + std::to_string(i) + "]"));
  } else {
    v.numbers.reserve(size_t(n));
    for (uint64_t i = 0; i < n; ++i) v.numbers.push_back(read_number(c, v.elem, what));
  }
  return v;
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "unknown";
}

TypeInfo type_info(uint32_t t) {
  switch (t) {
    case 0:
      return {"F32", 1, 4};
    case 1:
      return {"F16", 1, 2};
    case 2:
      return {"Q4_0", 32, 18};
    case 3:
      return {"Q4_1", 32, 20};
    case 6:
      return {"Q5_0", 32, 22};
    case 7:
      return {"Q5_1", 32, 24};
    case 8:
      return {"Q8_0", 32, 34};
    case 9:
      return {"Q8_1", 32, 36};
    case 10:
      return {"Q2_K", 256, 84};
    case 11:
      return {"Q3_K", 256, 110};
    case 12:
      return {"Q4_K", 256, 144};
    case 13:
      return {"Q5_K", 256, 176};
    case 14:
      return {"Q6_K", 256, 210};
    case 15:
      return {"Q8_K", 256, 292};
    case 16:
      return {"IQ2_XXS", 256, 66};
    case 17:
      return {"IQ2_XS", 256, 74};
    case 18:
      return {"IQ3_XXS", 256, 98};
    case 19:
      return {"IQ1_S", 256, 50};
    case 20:
      return {"IQ4_NL", 32, 18};
    case 21:
      return {"IQ3_S", 256, 110};
    case 22:
      return {"IQ2_S", 256, 82};
    case 23:
      return {"IQ4_XS", 256, 136};
    case 24:
      return {"I8", 1, 1};
    case 25:
      return {"I16", 1, 2};
    case 26:
      return {"I32", 1, 4};
    case 27:
      return {"I64", 1, 8};
    case 28:
      return {"F64", 1, 8};
    case 29:
      return {"IQ1_M", 256, 56};
    case 30:
      return {"BF16", 1, 2};
    case 34:
      return {"TQ1_0", 256, 54};
    case 35:
      return {"TQ2_0", 256, 66};
    case 39:
      return {"MXFP4", 32, 17};
    default:
      return {};
  }
}

std::string type_name(uint32_t t) {
  TypeInfo i = type_info(t);
  return i.name ? std::string(i.name) : "type " + std::to_string(t);
}

bool type_supported(uint32_t t) {
  return t == 0 || t == 1 || t == 2 || t == 8 || t == 30;
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

uint64_t tensor_bytes(uint32_t type, const std::vector<int64_t>& ne, const std::string& where) {
  TypeInfo info = type_info(type);
  if (!info.name) throw Error(where + ": unknown tensor type " + std::to_string(type));
  if (ne.empty()) throw Error(where + ": no dimensions");
  if (ne[0] % info.block != 0)
    throw Error(where + ": " + info.name + " needs the first dimension (" + std::to_string(ne[0]) +
                ") to be a multiple of " + std::to_string(info.block));
  uint64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) throw Error(where + ": dimension " + std::to_string(d) + " is not positive");
    if (n > (uint64_t(1) << 60) / uint64_t(d)) throw Error(where + ": the shape is too large");
    n *= uint64_t(d);
  }
  return n / uint64_t(info.block) * uint64_t(info.block_bytes);
}

File::~File() {
  if (map_) ::munmap(map_, map_size_);
}

std::shared_ptr<const File> File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO must not block
  if (fd < 0) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  std::shared_ptr<File> f(new File());
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(path + ": cannot memory-map (" + std::strerror(err) + ")");
    }
    f->map_ = m;
    f->map_size_ = f->size_;
    f->bytes_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  f->parse_all();
  return f;
}

std::shared_ptr<const File> File::parse(const uint8_t* data, size_t size, const std::string& name) {
  std::shared_ptr<File> f(new File());
  f->path_ = name;
  f->bytes_ = data;
  f->size_ = size;
  f->parse_all();
  return f;
}

void File::parse_all() {
  static const uint8_t empty = 0;
  Cursor c{bytes_ ? bytes_ : &empty, size_, 0, path_};
  if (size_ < 4 || std::memcmp(c.p, "GGUF", 4) != 0)
    throw Error(path_ + ": not a GGUF file (wrong magic; expected \"GGUF\")");
  c.pos = 4;
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    throw Error(path_ + ": GGUF version " + std::to_string(version_) +
                " is not supported (expected 2 or 3)");
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key takes at least 12 bytes, a tensor info at least 28: bound the counts by
  // the file size before looping.
  if (n_kv > size_ / 12)
    c.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  if (n_tensors > size_ / 28)
    c.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");
  // A key or tensor name with control bytes or past 256 bytes is a misread string
  // length (a corrupt file), not a name: quoted whole, it put kilobytes of raw bytes
  // into the error.
  auto name_ok = [](const std::string& n) {
    if (n.size() > 256) return false;
    for (unsigned char ch : n)
      if (ch < 0x20 || ch == 0x7f) return false;
    return true;
  };
  auto bad_name = [&](const std::string& what, const std::string& n) {
    throw Error(path_ + ": " + what + " is not a name (" + std::to_string(n.size()) +
                " bytes with control characters or past 256 bytes: a corrupt string length?)");
  };
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string("metadata key #" + std::to_string(i));
    if (!name_ok(key)) bad_name("metadata key #" + std::to_string(i), key);
    uint32_t type = c.read<uint32_t>("type of key '" + key + "'");
    Value v = read_value(c, type, "key '" + key + "'");
    if (!kv_.emplace(key, std::move(v)).second)
      throw Error(path_ + ": key '" + key + "' appears twice");
  }
  if (const Value* a = get("general.alignment")) {
    if (!a->is_number() || a->number < 1 || a->number > 65536 ||
        (uint64_t(a->number) & (uint64_t(a->number) - 1)))
      throw Error(path_ + ": key 'general.alignment': expected a power of two, got " +
                  (a->is_number() ? std::to_string(int64_t(a->number))
                                  : std::string(value_type_name(a->type))));
    alignment_ = uint64_t(a->number);
  }
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = c.string("name of tensor #" + std::to_string(i));
    if (!name_ok(t.name)) bad_name("the name of tensor #" + std::to_string(i), t.name);
    std::string where = path_ + ": tensor '" + t.name + "'";
    uint32_t nd = c.read<uint32_t>("dimension count of tensor '" + t.name + "'");
    if (nd == 0 || nd > kMaxDims)
      throw Error(where + ": " + std::to_string(nd) + " dimensions (expected 1 to 4)");
    for (uint32_t d = 0; d < nd; ++d) {
      uint64_t n = c.read<uint64_t>("dimensions of tensor '" + t.name + "'");
      if (n == 0 || n > (uint64_t(1) << 40))
        throw Error(where + ": dimension " + std::to_string(d) + " is " + std::to_string(n) +
                    " (expected 1 to 2^40 elements)");
      t.ne.push_back(int64_t(n));
    }
    t.type = c.read<uint32_t>("type of tensor '" + t.name + "'");
    t.offset = c.read<uint64_t>("offset of tensor '" + t.name + "'");
    if (!type_info(t.type).name)
      throw Error(where + ": unknown tensor type " + std::to_string(t.type));
    t.bytes = tensor_bytes(t.type, t.ne, where);
    if (t.offset % alignment_ != 0)
      throw Error(where + ": data offset " + std::to_string(t.offset) +
                  " is not a multiple of the alignment " + std::to_string(alignment_));
    if (!by_name_.emplace(t.name, tensors_.size()).second) throw Error(where + ": appears twice");
    tensors_.push_back(std::move(t));
  }
  uint64_t data_start = (uint64_t(c.pos) + alignment_ - 1) / alignment_ * alignment_;
  for (TensorInfo& t : tensors_) {
    if (t.offset > size_ || t.bytes > size_ || data_start + t.offset + t.bytes > size_)
      throw Error(path_ + ": tensor '" + t.name + "': data (" + std::to_string(t.bytes) +
                  " bytes at " + std::to_string(data_start + t.offset) +
                  ") runs past the end of the file (" + std::to_string(size_) +
                  " bytes; truncated?)");
    t.data = bytes_ + data_start + t.offset;
  }
  // Two tensors sharing bytes would alias each other's weights (writers pack them one
  // after another, each aligned).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo &a = *by_offset[i - 1], &b = *by_offset[i];
    if (a.offset + a.bytes > b.offset)
      throw Error(path_ + ": tensor '" + b.name + "': its data (at offset " + std::to_string(b.offset) +
                  ") overlaps tensor '" + a.name + "' (" + std::to_string(a.bytes) + " bytes at offset " +
                  std::to_string(a.offset) + ")");
  }
  // The tensors end the file (writers pad each to the alignment). Bytes past the last
  // one mean the header was read wrong: a tensor count one short (its tensor dropped,
  // the data section starting early) or another alignment shifted every tensor, and the
  // model ran on misread weights.
  if (!by_offset.empty()) {
    const TensorInfo& last = *by_offset.back();
    const uint64_t end = data_start + last.offset + last.bytes;
    if (size_ - end >= alignment_)
      throw Error(path_ + ": " + std::to_string(size_ - end) + " bytes after the last tensor's data ('" + last.name +
                  "' ends at byte " + std::to_string(end) + " of " + std::to_string(size_) +
                  "): the header's tensor count or alignment does not match the data (a corrupt file?)");
  }
}

const TensorInfo* File::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

const Value* File::get(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<std::string> File::get_string_opt(const std::string& key) const {
  const Value* v = get(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::string)
    throw Error(path_ + ": key '" + key + "': expected a string, got " + value_type_name(v->type));
  return v->text;
}

std::string File::get_string(const std::string& key) const {
  auto s = get_string_opt(key);
  if (!s) throw Error(path_ + ": missing key '" + key + "'");
  return *s;
}

std::optional<int64_t> File::get_int_opt(const std::string& key) const {
  const Value* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number() || v->type == ValueType::f32 || v->type == ValueType::f64)
    throw Error(path_ + ": key '" + key + "': expected an integer, got " +
                value_type_name(v->type));
  // A u64 past int64's range (converting it was undefined: "got -9223372036854775808").
  if (!(v->number < 0x1p63 && v->number >= -0x1p63)) {
    char got[400];
    std::snprintf(got, sizeof got, "%.0f", v->number);
    throw Error(path_ + ": key '" + key + "': " + got + " is out of range");
  }
  return int64_t(v->number);
}

int64_t File::get_int(const std::string& key) const {
  auto i = get_int_opt(key);
  if (!i) throw Error(path_ + ": missing key '" + key + "'");
  return *i;
}

std::optional<double> File::get_float_opt(const std::string& key) const {
  const Value* v = get(key);
  if (!v) return std::nullopt;
  if (!v->is_number())
    throw Error(path_ + ": key '" + key + "': expected a number, got " + value_type_name(v->type));
  if (!std::isfinite(v->number)) throw Error(path_ + ": key '" + key + "': not a finite number");
  return v->number;
}

const Value& File::get_array(const std::string& key, ValueType elem) const {
  const Value* v = get(key);
  if (!v) throw Error(path_ + ": missing key '" + key + "'");
  bool ok = v->is_array() &&
            (v->elem == elem || (elem != ValueType::string && v->elem != ValueType::string));
  if (!ok)
    throw Error(path_ + ": key '" + key + "': expected an array of " + value_type_name(elem) +
                ", got " +
                (v->is_array() ? "an array of " + std::string(value_type_name(v->elem))
                               : value_type_name(v->type)));
  return *v;
}

// ---------------------------------------------------------------- writer

void Writer::add(const std::string& key, Value v) {
  kv_.emplace_back(key, std::move(v));
}

void Writer::add_string(const std::string& key, const std::string& s) {
  Value v;
  v.type = ValueType::string;
  v.text = s;
  add(key, std::move(v));
}

void Writer::add_u32(const std::string& key, uint32_t x) {
  Value v;
  v.type = ValueType::u32;
  v.number = x;
  add(key, std::move(v));
}

void Writer::add_i32(const std::string& key, int32_t x) {
  Value v;
  v.type = ValueType::i32;
  v.number = x;
  add(key, std::move(v));
}

void Writer::add_f32(const std::string& key, float x) {
  Value v;
  v.type = ValueType::f32;
  v.number = x;
  add(key, std::move(v));
}

void Writer::add_bool(const std::string& key, bool x) {
  Value v;
  v.type = ValueType::boolean;
  v.number = x ? 1 : 0;
  add(key, std::move(v));
}

void Writer::add_strings(const std::string& key, std::vector<std::string> s) {
  Value v;
  v.type = ValueType::array;
  v.elem = ValueType::string;
  v.strings = std::move(s);
  add(key, std::move(v));
}

void Writer::add_numbers(const std::string& key, ValueType elem, std::vector<double> n) {
  Value v;
  v.type = ValueType::array;
  v.elem = elem;
  v.numbers = std::move(n);
  add(key, std::move(v));
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type,
                        Fill fill) {
  tensors_.push_back({name, std::move(ne), type, std::move(fill)});
}

uint64_t Writer::tensor_bytes_total() const {
  uint64_t sum = 0;
  for (const Tensor& t : tensors_) sum += tensor_bytes(t.type, t.ne, t.name);
  return sum;
}

namespace {

struct Out {
  std::string buf;
  template <typename T>
  void put(T v) {
    buf.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    buf += s;
  }
  void number(ValueType t, double x) {
    switch (t) {
      case ValueType::u8:
        put<uint8_t>(uint8_t(x));
        return;
      case ValueType::i8:
        put<int8_t>(int8_t(x));
        return;
      case ValueType::boolean:
        put<uint8_t>(x != 0);
        return;
      case ValueType::u16:
        put<uint16_t>(uint16_t(x));
        return;
      case ValueType::i16:
        put<int16_t>(int16_t(x));
        return;
      case ValueType::u32:
        put<uint32_t>(uint32_t(x));
        return;
      case ValueType::i32:
        put<int32_t>(int32_t(x));
        return;
      case ValueType::f32:
        put<float>(float(x));
        return;
      case ValueType::u64:
        put<uint64_t>(uint64_t(x));
        return;
      case ValueType::i64:
        put<int64_t>(int64_t(x));
        return;
      case ValueType::f64:
        put<double>(x);
        return;
      default:
        LATHE_ASSERT(false, "not a scalar type");
    }
  }
};

}  // namespace

void Writer::write(const std::string& path) const {
  constexpr uint64_t kAlign = 32;
  Out o;
  o.buf += "GGUF";
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const auto& [key, v] : kv_) {
    o.str(key);
    o.put<uint32_t>(uint32_t(v.type));
    if (v.type == ValueType::string)
      o.str(v.text);
    else if (v.type != ValueType::array)
      o.number(v.type, v.number);
    else {
      o.put<uint32_t>(uint32_t(v.elem));
      o.put<uint64_t>(v.size());
      if (v.elem == ValueType::string)
        for (const std::string& s : v.strings) o.str(s);
      else
        for (double x : v.numbers) o.number(v.elem, x);
    }
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    uint64_t bytes = tensor_bytes(t.type, t.ne, path + ": tensor '" + t.name + "'");
    sizes.push_back(bytes);
    o.str(t.name);
    o.put<uint32_t>(uint32_t(t.ne.size()));
    for (int64_t d : t.ne) o.put<uint64_t>(uint64_t(d));
    o.put<uint32_t>(t.type);
    o.put<uint64_t>(offset);
    offset += (bytes + kAlign - 1) / kAlign * kAlign;
  }
  o.buf.resize((o.buf.size() + kAlign - 1) / kAlign * kAlign, '\0');

  AtomicFile f(path);
  f.write(o.buf.data(), o.buf.size());
  std::vector<uint8_t> data;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    uint64_t padded = (sizes[i] + kAlign - 1) / kAlign * kAlign;
    data.assign(size_t(padded), 0);
    tensors_[i].fill(data.data());
    f.write(data.data(), data.size());
  }
  f.commit();
}

}  // namespace lathe::gguf
