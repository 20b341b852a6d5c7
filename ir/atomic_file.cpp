#include "ir/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ir/assert.h"

namespace lathe {

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path() && !fs::exists(p.parent_path(), ec))
    throw Error(path + ": directory " + p.parent_path().string() + " does not exist");
  if (fs::is_directory(p, ec)) throw Error(path + ": is a directory");
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_) std::remove(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, f_) != bytes)
    throw Error(path_ + ": write failed (" + std::strerror(errno) + ")");
}

void AtomicFile::commit() {
  if (std::fclose(f_) != 0) {
    f_ = nullptr;
    throw Error(path_ + ": write failed");
  }
  f_ = nullptr;
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) throw Error(path_ + ": cannot rename into place (" + ec.message() + ")");
  committed_ = true;
}

}  // namespace lathe
