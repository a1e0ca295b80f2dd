// Which SIMD instruction sets this CPU (and OS) supports, read once from CPUID/XGETBV.
// DEEPINFER_ISA=scalar|avx2|avx512 caps the level for tests and comparisons.
#pragma once

namespace deepinfer {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;

  // The sets our kernels are built against.
  bool has_avx2() const { return avx2 && fma && f16c; }
  bool has_avx512() const { return has_avx2() && avx512f && avx512bw && avx512vl && avx512dq; }
};

enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// What the hardware has.
const CpuFeatures& cpu_features();
// The best level the hardware supports, capped by DEEPINFER_ISA.
IsaLevel best_isa();
const char* isa_name(IsaLevel level);

}  // namespace deepinfer
