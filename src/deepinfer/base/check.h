// DI_CHECK: abort with a message when an internal invariant is broken (never for bad input).
#pragma once

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace deepinfer::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond,
                                      const std::string& msg) {
  std::fprintf(stderr, "%s:%d: check failed: %s %s\n", file, line, cond, msg.c_str());
  std::abort();
}
}  // namespace deepinfer::detail

#define DI_CHECK(cond, ...)                                                          \
  do {                                                                               \
    if (!(cond)) [[unlikely]]                                                        \
      ::deepinfer::detail::check_failed(__FILE__, __LINE__, #cond,                   \
                                        ::fmt::format("" __VA_ARGS__));              \
  } while (0)
