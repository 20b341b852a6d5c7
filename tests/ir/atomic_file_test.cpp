#include "ir/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/assert.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lathe-atomic-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  size_t entries() const { return size_t(std::distance(fs::directory_iterator(dir_), fs::directory_iterator())); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, CommitsAndLeavesNothingOnFailure) {
  {
    AtomicFile f(path("out.txt"));
    f.write("partial");
  }  // not committed
  EXPECT_FALSE(fs::exists(path("out.txt")));
  EXPECT_EQ(entries(), 0u);
  AtomicFile f(path("out.txt"));
  f.write("done\n");
  f.commit();
  EXPECT_EQ(read(path("out.txt")), "done\n");
  EXPECT_EQ(entries(), 1u);
}

// finish() flushes and closes, reporting a write error before anything is in place, so
// a command writing two files (simulate --plot --trace) finishes both, then commits:
// a full disk under the second leaves neither. /dev/full takes a small write into the
// stdio buffer and fails at the flush.
TEST_F(AtomicFileTest, FinishReportsErrorsBeforeAnyCommit) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full";
  {
    AtomicFile a(path("a.txt")), b("/dev/full");
    a.write("first");
    b.write("x");
    a.finish();
    EXPECT_THROW(b.finish(), Error);
  }
  EXPECT_FALSE(fs::exists(path("a.txt")));
  EXPECT_EQ(entries(), 0u) << "a temporary file was left";
  {
    AtomicFile a(path("a.txt"));
    a.write("data");
    a.finish();
    a.finish();  // a second finish does nothing
    a.commit();
  }
  EXPECT_EQ(read(path("a.txt")), "data");
}

TEST_F(AtomicFileTest, FollowsSymbolicLinksAndKeepsThem) {
  fs::create_directories(dir_ / "real");
  std::ofstream(path("real/target.csv")) << "old";
  fs::create_symlink("real/target.csv", dir_ / "link.csv");  // relative to the link's folder
  AtomicFile f(path("link.csv"));
  f.write("new");
  f.commit();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("link.csv"))));
  EXPECT_EQ(read(path("real/target.csv")), "new");
  // A dangling link creates the file it names.
  fs::create_symlink("real/fresh.csv", dir_ / "dangling.csv");
  AtomicFile g(path("dangling.csv"));
  g.write("x");
  g.commit();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("dangling.csv"))));
  EXPECT_EQ(read(path("real/fresh.csv")), "x");
}

TEST_F(AtomicFileTest, WritesDevicesAndFifosInPlace) {
  // /dev/null stays a character device.
  {
    AtomicFile f("/dev/null");
    f.write("discarded");
    f.commit();
  }
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A full device is a write error, not a replaced file.
  if (::access("/dev/full", W_OK) == 0) {
    EXPECT_THROW(
        {
          AtomicFile f("/dev/full");
          f.write(std::string(1 << 16, 'x'));
          f.commit();
        },
        Error);
    ASSERT_EQ(::stat("/dev/full", &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
  // A FIFO is checked without being opened (opening it for writing would wait for a
  // reader) and stays a FIFO.
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  AtomicFile::check(path("fifo"));
  ASSERT_EQ(::stat(path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(entries(), 1u);
  // /dev/fd/N (like /dev/stdout) reaches the open stream, here a pipe; so does a link
  // to it.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    AtomicFile f("/dev/fd/" + std::to_string(fds[1]));
    f.write("through the pipe");
    f.commit();
  }
  fs::create_symlink("/dev/fd/" + std::to_string(fds[1]), dir_ / "to-pipe");
  {
    AtomicFile f(path("to-pipe"));
    f.write(", and a link");
    f.commit();
  }
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("to-pipe"))));
  ::close(fds[1]);
  char buf[64] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof buf - 1), 28);
  EXPECT_STREQ(buf, "through the pipe, and a link");
  ::close(fds[0]);
}

// A regular file under /dev (a /dev/shm scratch file) is an ordinary file: replaced,
// not appended to, and a new one can be created.
TEST_F(AtomicFileTest, RegularFilesUnderDevAreReplaced) {
  std::error_code ec;
  if (!fs::is_directory("/dev/shm", ec) || ::access("/dev/shm", W_OK) != 0) GTEST_SKIP() << "no writable /dev/shm";
  std::string p = "/dev/shm/lathe-atomic-" + std::to_string(::getpid());
  AtomicFile::check(p);
  EXPECT_FALSE(fs::exists(p));
  for (const char* text : {"first\n", "second\n"}) {
    AtomicFile f(p);
    f.write(text);
    f.commit();
  }
  EXPECT_EQ(read(p), "second\n");
  fs::remove(p);
}

TEST_F(AtomicFileTest, CheckNamesTheProblemAndWritesNothing) {
  AtomicFile::check(path("fine.txt"));
  EXPECT_EQ(entries(), 0u);
  try {
    AtomicFile::check(path("missing/out.txt"));
    FAIL() << "a missing directory should be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  try {
    AtomicFile::check(dir_.string());
    FAIL() << "a directory should be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  fs::create_symlink(dir_, dir_ / "to-dir");
  EXPECT_THROW(AtomicFile::check(path("to-dir")), Error);
  fs::create_symlink("loop-b", dir_ / "loop-a");
  fs::create_symlink("loop-a", dir_ / "loop-b");
  try {
    AtomicFile::check(path("loop-a"));
    FAIL() << "a symbolic link loop should be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic links"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
