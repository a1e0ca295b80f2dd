// Launchers of our own CUDA matmul (warp_matmul_kernel.cuh): the dispatch table below is the
// one place weight formats meet kernels.
#include "deepinfer/kernels/cuda/launch_check.h"
#include "deepinfer/kernels/cuda/warp_matmul_kernel.cuh"

namespace deepinfer::cuda {
namespace {

using namespace detail::warp;

struct Entry {
  Kind kind;
  void (*kernel)(Args);
  const char* name;
};

// The dispatch table: weight format -> kernel instance. Anything absent is refused loudly.
constexpr Entry kTable[] = {
    {Kind::kF32, warp_matmul_kernel<Kind::kF32>, "warp_matmul<f32>"},
    {Kind::kF16, warp_matmul_kernel<Kind::kF16>, "warp_matmul<f16>"},
    {Kind::kBF16, warp_matmul_kernel<Kind::kBF16>, "warp_matmul<bf16>"},
    {Kind::kQ8_0, warp_matmul_kernel<Kind::kQ8_0>, "warp_matmul<q8_0>"},
    {Kind::kQ4_1, warp_matmul_kernel<Kind::kQ4_1>, "warp_matmul<q4_1>"},
    {Kind::kFp8Block, warp_matmul_kernel<Kind::kFp8Block>, "warp_matmul<fp8_e4m3 block>"},
    {Kind::kFp4, warp_matmul_kernel<Kind::kFp4>, "warp_matmul<fp4_e2m1 ue8m0>"},
};

const Entry* find_entry(Kind k) {
  for (const Entry& e : kTable)
    if (e.kind == k) return &e;
  return nullptr;
}

bool kind_of(DType t, Kind* k) {
  switch (t) {
    case DType::kF32:
      *k = Kind::kF32;
      return true;
    case DType::kF16:
      *k = Kind::kF16;
      return true;
    case DType::kBF16:
      *k = Kind::kBF16;
      return true;
    case DType::kQ8_0:
      *k = Kind::kQ8_0;
      return true;
    case DType::kQ4_1:
      *k = Kind::kQ4_1;
      return true;
    default:
      return false;
  }
}

unsigned clamp_grid(int64_t v) {
  return static_cast<unsigned>(v < 1 ? 1 : v < kMaxGridYZ ? v : kMaxGridYZ);
}

// grid: x = column groups, y = groups of rows (experts), z = slices of a group's row tiles.
void launch(Kind k, const Args& a, int64_t n_groups, int64_t rows_per_group, cudaStream_t stream) {
  const Entry* e = find_entry(k);
  if (!e)
    detail::launch_failed("warp_matmul (weight format without a kernel)", cudaErrorInvalidValue);
  if (a.n_rows <= 0 || a.n_out <= 0) return;
  const dim3 grid(static_cast<unsigned>((a.n_out + kWarps - 1) / kWarps), clamp_grid(n_groups),
                  clamp_grid((rows_per_group + kRowTile - 1) / kRowTile));
  e->kernel<<<grid, kWarps * 32, 0, stream>>>(a);
  detail::check_launch(e->name);
}

template <typename P>
Args plain_args(const P& p) {
  Args a;
  a.weight_row_bytes = p.weight_row_bytes;
  a.n_out = p.n_out;
  a.n_in = p.n_in;
  a.n_rows = p.n_rows;
  a.input = p.input;
  a.input_stride = p.input_stride;
  a.output = p.output;
  a.output_stride = p.output_stride;
  return a;
}

template <typename T>
__global__ void convert_kernel(const float* src, int64_t n_rows, int64_t n_in, int64_t src_stride,
                               T* dst) {
  const int64_t total = n_rows * n_in;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = src[(i / n_in) * src_stride + i % n_in];
    dst[i] = T(v);  // round to nearest even (__float2half_rn / __float2bfloat16_rn)
  }
}

}  // namespace

bool warp_matmul_supports(DType weight_type) {
  Kind k;
  return kind_of(weight_type, &k);
}

void warp_matmul(const MatmulParams& p, cudaStream_t stream) {
  Kind k;
  if (!kind_of(p.weight_type, &k))
    detail::launch_failed("warp_matmul (weight type without a kernel)", cudaErrorInvalidValue);
  Args a = plain_args(p);
  a.weight = p.weight;
  launch(k, a, 1, p.n_rows, stream);
}

void fp8_matmul(const Fp8MatmulParams& p, cudaStream_t stream) {
  Args a = plain_args(p);
  a.weight = p.weight;
  a.scale = p.scale_inv;
  a.scale_stride = p.scale_stride;
  a.block = p.block;
  launch(Kind::kFp8Block, a, 1, p.n_rows, stream);
}

void fp4_matmul(const Fp4MatmulParams& p, cudaStream_t stream) {
  Args a = plain_args(p);
  a.weight = p.weight;
  a.scale = p.scale;
  a.scale_stride = p.scale_stride;
  launch(Kind::kFp4, a, 1, p.n_rows, stream);
}

void grouped_matmul(const GroupedMatmulParams& p, cudaStream_t stream) {
  Args a = plain_args(p);
  a.weights = p.weights;
  a.scales = p.scales;
  a.offsets = p.group_offsets;
  a.input_rows = p.input_rows;
  a.scale_stride = p.scale_stride;
  a.block = p.block;
  launch(p.format, a, p.n_groups, p.max_group_rows > 0 ? p.max_group_rows : 1, stream);
}

void convert_rows_f32(const float* src, int64_t n_rows, int64_t n_in, int64_t src_stride, void* dst,
                      DType dst_type, cudaStream_t stream) {
  const int64_t total = n_rows * n_in;
  if (total <= 0) return;
  const int64_t blocks64 = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(blocks64 < 65535 ? blocks64 : 65535);
  if (dst_type == DType::kF16)
    convert_kernel<__half>
        <<<blocks, 256, 0, stream>>>(src, n_rows, n_in, src_stride, static_cast<__half*>(dst));
  else if (dst_type == DType::kBF16)
    convert_kernel<__nv_bfloat16><<<blocks, 256, 0, stream>>>(src, n_rows, n_in, src_stride,
                                                              static_cast<__nv_bfloat16*>(dst));
  else
    detail::launch_failed("convert_rows_f32 (destination neither f16 nor bf16)",
                          cudaErrorInvalidValue);
  detail::check_launch("convert_rows_f32");
}

}  // namespace deepinfer::cuda
