// Wall-clock helpers for stats and benchmarks.
#pragma once

#include <chrono>

namespace deepinfer {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace deepinfer
