// Runs CUDA kernel source as host code, for logic checks on machines without a GPU: every
// thread of a block is a fiber (ucontext) and __syncthreads() hands control to the next one,
// so barriers, shared memory (a static) and block-wide reductions behave as on the device,
// one block at a time. What it does not check: the device's math library (exp here is
// glibc's; fmaf is exact on both), memory coalescing, races (the fibers never interleave between
// barriers). Warp shuffles are emulated with two block barriers, so every live thread of the
// block must shuffle the same number of times (true of the kernels that use them here).
// Include it before the kernel's .cuh, in a test file named *_emulated_test.cc (CMake turns
// off g++'s warning about the kernels' `#pragma unroll` for those).
#pragma once

#include <cuda_bf16.h>  // first, with their own host_defines, which are replaced below
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>  // ::isnan, ::exp, INFINITY as the kernel spells them
#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#undef __host__
#undef __device__
#undef __global__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __host__
#define __device__
#define __global__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

struct EmulatedDim {
  unsigned x = 0, y = 0, z = 0;
};
inline EmulatedDim threadIdx, blockIdx, blockDim, gridDim;

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline long long __double_as_longlong(double d) {
  long long v;
  std::memcpy(&v, &d, 8);
  return v;
}
inline double __longlong_as_double(long long v) {
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}
// The fibers never run concurrently: plain read-modify-write is atomic here.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p += v;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p += v;
  return old;
}

namespace deepinfer::cuda::emulation {

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
};

inline ucontext_t g_scheduler;
inline Fiber* g_current = nullptr;
inline const std::function<void()>* g_body = nullptr;

inline void fiber_entry() {
  (*g_body)();
  g_current->done = true;  // returning resumes g_scheduler (uc_link)
}

// Runs `body` (the kernel call) for every thread of every block of `grid`, blocks in order.
inline void launch(EmulatedDim grid, unsigned threads, const std::function<void()>& body) {
  g_body = &body;
  gridDim = grid;
  blockDim = {threads, 1, 1};
  std::vector<Fiber> fibers(threads);
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  for (uint64_t b = 0; b < blocks; ++b) {
    blockIdx = {static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                static_cast<unsigned>(b / grid.x / grid.y)};
    for (Fiber& f : fibers) {
      f.done = false;
      f.stack.resize(size_t{1} << 18);
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.data();
      f.ctx.uc_stack.ss_size = f.stack.size();
      f.ctx.uc_link = &g_scheduler;
      makecontext(&f.ctx, fiber_entry, 0);
    }
    // Round robin: each live thread runs to its next barrier (or its end), then the next.
    for (bool live = true; live;) {
      live = false;
      for (unsigned t = 0; t < threads; ++t) {
        if (fibers[t].done) continue;
        threadIdx = {t, 0, 0};
        g_current = &fibers[t];
        swapcontext(&g_scheduler, &fibers[t].ctx);
        live = live || !fibers[t].done;
      }
    }
  }
}

}  // namespace deepinfer::cuda::emulation

inline void __syncthreads() {
  using deepinfer::cuda::emulation::g_current;
  using deepinfer::cuda::emulation::g_scheduler;
  swapcontext(&g_current->ctx, &g_scheduler);
}

// Lane l gets the value of lane l ^ lane_mask of its warp.
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  static float slots[1024];
  slots[threadIdx.x] = v;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  const float r = slots[threadIdx.x - lane + (lane ^ static_cast<unsigned>(lane_mask))];
  __syncthreads();
  return r;
}
