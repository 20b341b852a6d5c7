#include "ir/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <limits.h>  // NAME_MAX
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "ir/assert.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// The descriptor /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N names, or -1.
int inherited_fd(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"})
    if (path.starts_with(prefix)) {
      std::string_view n = std::string_view(path).substr(prefix.size());
      int fd = 0;
      auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), fd);
      if (ec == std::errc() && end == n.data() + n.size() && !n.empty()) return fd;
    }
  return -1;
}

struct Destination {
  std::string path;       // symbolic links followed, unless in place
  bool in_place = false;  // an open descriptor, a device, a FIFO
  int fd = -1;            // the descriptor of /dev/stdout and the like
};

// What the path names. Symbolic links are followed (a dangling one names the file it
// would create). A name for an open descriptor anywhere on the way (/dev/stdout,
// /dev/fd/3: renaming over it would replace the link, not write to the stream) and an
// existing target that is not a regular file (a device, a FIFO) are written in place.
Destination resolve(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  for (int hops = 0;; ++hops) {
    if (int fd = inherited_fd(p.string()); fd >= 0) return {path, true, fd};
    if (!fs::is_symlink(fs::symlink_status(p, ec))) break;
    if (hops == 40) throw Error(path + ": too many levels of symbolic links");
    fs::path to = fs::read_symlink(p, ec);
    if (ec) throw Error(path + ": cannot read symbolic link (" + ec.message() + ")");
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  fs::file_status st = fs::status(p, ec);
  if (fs::is_directory(st)) throw Error(path + ": is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) return {p.string(), true, -1};
  if (p.has_parent_path() && !fs::is_directory(p.parent_path(), ec))
    throw Error(path + (fs::exists(p.parent_path(), ec) ? ": " + p.parent_path().string() + " is not a directory"
                                                         : ": directory " + p.parent_path().string() + " does not exist"));
  return {p.string(), false, -1};
}

}  // namespace

namespace {

// Temporary files of live AtomicFiles, for the signal handler: fixed storage (a handler
// may not allocate) and one atomic state per slot (0 free, 1 being filled, 2 live).
constexpr int kTmpSlots = 64;
char g_tmp_paths[kTmpSlots][PATH_MAX];
std::atomic<int> g_tmp_state[kTmpSlots];

int register_tmp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTmpSlots; ++i) {
    int free = 0;
    if (g_tmp_state[i].compare_exchange_strong(free, 1)) {
      std::memcpy(g_tmp_paths[i], path.c_str(), path.size() + 1);
      g_tmp_state[i].store(2);
      return i;
    }
  }
  return -1;  // more than 64 at once: that one is not removed on a signal
}

void release_tmp(int slot) {
  if (slot >= 0) g_tmp_state[slot].store(0);
}

extern "C" void remove_temporaries_and_die(int sig) {
  for (int i = 0; i < kTmpSlots; ++i)
    if (g_tmp_state[i].load() == 2) ::unlink(g_tmp_paths[i]);  // async-signal-safe
  std::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void remove_temporaries_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa = {};
    sa.sa_handler = remove_temporaries_and_die;
    sigemptyset(&sa.sa_mask);
    struct sigaction old = {};
    // A signal the shell set to be ignored (`nohup`, a background job's SIGINT) stays so.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  Destination d = resolve(path);
  dest_ = d.path;
  if (d.fd >= 0) {
    // /dev/stdout and friends: write through a duplicate of the descriptor, sharing its
    // offset, so output redirected to a file interleaves with what the command prints
    // instead of overwriting it. What was printed so far goes first.
    std::fflush(nullptr);
    int dup = ::dup(d.fd);
    f_ = dup >= 0 ? ::fdopen(dup, "wb") : nullptr;
    if (!f_ && dup >= 0) ::close(dup);
  } else if (d.in_place) {
    // A device or FIFO. Opened without blocking, so a FIFO nobody reads is an error
    // (ENXIO) instead of a wait for ever; then written blocking, as the reader reads.
    int fd = ::open(dest_.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    const int err = errno;
    std::error_code ec;
    if (fd < 0 && err == ENXIO && fs::is_fifo(dest_, ec))
      throw Error(path + ": cannot write (a FIFO that nobody is reading)");
    errno = err;
    if (fd >= 0) {
      int fl = ::fcntl(fd, F_GETFL);
      if (fl != -1) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
      f_ = ::fdopen(fd, "ab");
      if (!f_) ::close(fd);
    }
  } else {
    // The temporary name beside the file; a short one where the file's name is near the
    // NAME_MAX-byte limit of a name (numbered: two such files of one process in one directory).
    static std::atomic<int> short_names{0};
    const std::string suffix = ".tmp." + std::to_string(::getpid());
    fs::path dp(dest_);
    // Refused here, before any work, rather than at the rename after it.
    if (dp.filename().string().size() > NAME_MAX)
      throw Error(path + ": cannot write (" + std::strerror(ENAMETOOLONG) + ")");
    tmp_ = dp.filename().string().size() + suffix.size() <= NAME_MAX
               ? dest_ + suffix
               : (dp.parent_path() / (".lathe" + suffix + "." + std::to_string(short_names++))).string();
    slot_ = register_tmp(tmp_);
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) {
      const int err = errno;
      release_tmp(slot_);
      throw Error(path + ": cannot write (" + std::strerror(err) + ")");
    }
  }
  if (!f_) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
}

void AtomicFile::check(const std::string& path) {
  Destination d = resolve(path);
  if (d.in_place) {
    bool ok = d.fd >= 0 ? ::fcntl(d.fd, F_GETFL) != -1 : ::access(d.path.c_str(), W_OK) == 0;
    if (!ok) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
    return;
  }
  AtomicFile probe(path);  // opens its temporary file; removed again, never committed
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_ && !tmp_.empty()) std::remove(tmp_.c_str());
  release_tmp(slot_);
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, f_) != bytes)
    throw Error(path_ + ": write failed (" + std::strerror(errno) + ")");
}

void AtomicFile::finish() {
  if (!f_) return;
  bool ok = std::fflush(f_) == 0;  // a device such as /dev/full reports ENOSPC here
  int err = ok ? 0 : errno;
  if (std::fclose(f_) != 0 && ok) ok = false, err = errno;
  f_ = nullptr;
  if (!ok) throw Error(path_ + ": write failed (" + std::strerror(err) + ")");
}

void AtomicFile::commit() {
  finish();
  if (!tmp_.empty()) {
    std::error_code ec;
    fs::rename(tmp_, dest_, ec);
    if (ec) throw Error(path_ + ": cannot rename into place (" + ec.message() + ")");
    release_tmp(slot_);
    slot_ = -1;
  }
  committed_ = true;
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, expected a file");
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait for one forever.
  // Reads block as usual once it is cleared (a FIFO with no writer then reads as EOF).
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw Error(path + ": cannot open file (" + std::strerror(errno) + ")");
  // A character device other than a terminal (/dev/zero, /dev/urandom) is an endless
  // stream: commands without a size limit (calibrate, merge) read gigabytes of it.
  struct stat st {};
  if (::fstat(f.fd, &st) == 0 && S_ISCHR(st.st_mode) && !::isatty(f.fd))
    throw Error(path + ": is a device, not a file");
  int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  // Read in pieces up to a limit, so /dev/zero or a wrong multi-gigabyte file is an
  // error naming the file rather than memory exhaustion.
  std::string out;
  try {
    std::vector<char> buf(1 << 20);
    while (true) {
      ssize_t n = ::read(f.fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(path + ": read error (" + std::strerror(errno) + ")");
      if (n == 0) break;
      out.append(buf.data(), size_t(n));
      if (out.size() > max_bytes)
        throw Error(path + ": larger than " + std::to_string(max_bytes >> 20) + " MiB; is it the right file?");
    }
  } catch (const std::bad_alloc&) {
    throw Error(path + ": out of memory after reading " + std::to_string(out.size() >> 20) + " MiB of it");
  }
  return out;
}

}  // namespace lathe
