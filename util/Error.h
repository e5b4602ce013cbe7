// Error types shared by every gradzip module. User mistakes (bad config, bad
// data, unreachable peer) throw one of these with a message that names the cause;
// broken internal invariants use GZ_ASSERT, which says "please report a bug".
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace gradzip {

// Bad input from the user: config, data files, command line.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A configuration file problem; the message starts with "file:line: key.path:".
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};

// A communication failure: dead peer, timeout, refused rendezvous.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The first line of an exception message: c10::Error appends a C++ backtrace
// after it, and users need only the cause.
inline std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

namespace detail {
[[noreturn]] void internalAssertFail(const char* expr, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace gradzip

// Throws gradzip::UserError(fmt::format(...)) unless cond holds.
#define GZ_CHECK(cond, ...)                                                  \
  do {                                                                       \
    if (!(cond)) throw ::gradzip::UserError(fmt::format(__VA_ARGS__));       \
  } while (0)

// A broken invariant of gradzip itself (a bug), never a user error.
#define GZ_ASSERT(cond, ...)                                                             \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::gradzip::detail::internalAssertFail(#cond, __FILE__, __LINE__,                   \
                                            fmt::format("" __VA_ARGS__));                \
  } while (0)
