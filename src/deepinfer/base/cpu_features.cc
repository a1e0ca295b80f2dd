#include "deepinfer/base/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace deepinfer {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool fma = c & (1u << 12);
  const bool f16c = c & (1u << 29);
  if (!osxsave) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = ymm_ok && (b & (1u << 5));
  f.fma = ymm_ok && fma;
  f.f16c = ymm_ok && f16c;
  f.avx512f = zmm_ok && (b & (1u << 16));
  f.avx512dq = zmm_ok && (b & (1u << 17));
  f.avx512bw = zmm_ok && (b & (1u << 30));
  f.avx512vl = zmm_ok && (b & (1u << 31));
  f.avx512_vnni = zmm_ok && (c & (1u << 11));
  unsigned a1, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = zmm_ok && (a1 & (1u << 5));
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

IsaLevel best_isa() {
  static const IsaLevel level = [] {
    const CpuFeatures& f = cpu_features();
    IsaLevel hw = f.has_avx512() ? IsaLevel::kAvx512 : f.has_avx2() ? IsaLevel::kAvx2 : IsaLevel::kScalar;
    const char* cap = std::getenv("DEEPINFER_ISA");
    if (cap) {
      IsaLevel c = IsaLevel::kAvx512;
      if (!std::strcmp(cap, "scalar")) c = IsaLevel::kScalar;
      else if (!std::strcmp(cap, "avx2")) c = IsaLevel::kAvx2;
      if (c < hw) hw = c;
    }
    return hw;
  }();
  return level;
}

const char* isa_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar: return "scalar";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace deepinfer
