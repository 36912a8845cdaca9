// Internal error type. Every failure inside the core is an mrt::Error carrying a
// code from the public ABI; the C boundary turns it into an MrtStatus.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "mosaicrt/mosaicrt.h"

namespace mrt {

class Error : public std::runtime_error {
 public:
  Error(MrtErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  MrtErrorCode code() const noexcept { return code_; }

 private:
  MrtErrorCode code_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// Concatenate all arguments with operator<< into one message.
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(MrtErrorCode code, const Args&... args) {
  throw Error(code, str_cat(args...));
}

}  // namespace mrt

// MRT_ENFORCE(cond, code, msg parts...) throws mrt::Error when cond is false.
#define MRT_ENFORCE(cond, code, ...)          \
  do {                                        \
    if (!(cond)) ::mrt::fail(code, __VA_ARGS__); \
  } while (0)

// Shorthands used by kernels for bad inputs / unsupported configurations.
#define MRT_CHECK_ARG(cond, ...) MRT_ENFORCE(cond, MRT_INVALID_ARGUMENT, __VA_ARGS__)
#define MRT_CHECK_IMPL(cond, ...) MRT_ENFORCE(cond, MRT_NOT_IMPLEMENTED, __VA_ARGS__)
