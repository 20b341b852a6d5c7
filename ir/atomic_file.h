// A file written under a temporary name and renamed into place on commit(), so that a
// failure never leaves a partial file behind (the destructor removes the temporary).
// Errors throw lathe::Error naming the path.
//
// A symbolic link is followed: the temporary file is made beside the file it points to
// and renamed over that file, so the link stays a link. Names of open descriptors
// (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) are written through the
// descriptor, and existing targets that are not regular files (/dev/null, a FIFO) in
// place: they cannot be replaced atomically, and output that already reached them
// cannot be taken back.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdint>
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
  // Flushes and closes the file, throwing on a write error (a full disk); the data is
  // not in place yet. commit() does this itself; call it first when several files must
  // all be written before any replaces its destination.
  void finish();
  void commit();

  // Throws the error the constructor would (missing directory, a directory, no
  // permission) without writing anything: no temporary file is left, and a FIFO or
  // device is checked for permission rather than opened.
  static void check(const std::string& path);

 private:
  std::string path_;  // as the user named it, for messages
  std::string dest_;  // where the data goes: path_ with symbolic links followed
  std::string tmp_;   // empty when writing in place
  std::FILE* f_ = nullptr;
  bool committed_ = false;
  int slot_ = -1;  // in the table of temporaries a signal removes (-1: none)
};

// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove the temporary files of
// every AtomicFile not yet committed, then die of the signal as before: Ctrl-C during
// `sweep -o rows.csv` left rows.csv.tmp.PID behind (megabytes of partial rows). Call
// once, early in main().
void remove_temporaries_on_signals();

// Reads a file into a string; throws lathe::Error naming the path when unreadable,
// larger than max_bytes (spec-sized inputs by default: 256 MiB) or too large for memory.
// A named pipe nobody writes to reads as empty instead of blocking forever; pipes that
// have a writer (`<(cmd)`, /dev/stdin) are read to the end.
std::string read_file(const std::string& path, uint64_t max_bytes = uint64_t(256) << 20);

}  // namespace lathe
