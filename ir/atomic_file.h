// A file written under a temporary name and renamed into place on commit(), so that a
// failure never leaves a partial file behind (the destructor removes the temporary).
// Errors throw lathe::Error naming the path.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace lathe {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t bytes);
  void write(const std::string& chunk) { write(chunk.data(), chunk.size()); }
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace lathe
