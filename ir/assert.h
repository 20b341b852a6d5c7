// Internal invariant checks and the user-error exception.
//
// LATHE_ASSERT is for bugs in lathe: it prints file, line and message and aborts.
// lathe::Error is for bad input from users (specs, CLI arguments, weight files, plans):
// the CLI prints its message and exits with code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace lathe {

[[noreturn]] void assert_fail(const char* cond, const char* file, int line, const std::string& msg);

// Text for a terminal: control bytes other than newline and tab (NUL included) as \xNN,
// so a file's bytes quoted in a message can neither cut it short nor drive the terminal.
std::string printable(const std::string& s);

// A user error: printed as "lathe: error: MESSAGE", exit code 2. The message is kept
// printable().
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(printable(msg)) {}
};

// A JSON library message without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(const std::string& what);

// A plan that does not fit the memory left on the device (a lathe::Error like any
// other for the CLI; the tuner catches it to time two plans one after the other).
class OutOfDeviceMemory : public Error {
 public:
  using Error::Error;
};

}  // namespace lathe

#define LATHE_ASSERT(cond, msg)                                          \
  do {                                                                   \
    if (!(cond)) ::lathe::assert_fail(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
