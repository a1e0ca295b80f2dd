// Matmul driver: checks the params (bad ones are bugs here; callers use matmul_check), quantizes each activation
// row once, then splits output columns across threads and walks register tiles of rows (or, with
// many rows, blocks of columns unpacked once: matmul_high_block.h, matmul_int8_block.h).
#include "deepinfer/kernels/cpu/matmul.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "deepinfer/base/aligned_buffer.h"
#include "deepinfer/base/check.h"
#include "deepinfer/kernels/cpu/matmul_high_block.h"
#include "deepinfer/kernels/cpu/matmul_int8_block.h"
#include "deepinfer/kernels/cpu/matmul_tile.h"
#include "deepinfer/kernels/cpu/quantize_activation.h"
#include "deepinfer/tensor/quant_blocks.h"

#ifdef DEEPINFER_HAVE_BLAS
#include <cblas.h>
#endif

namespace deepinfer::kernels {
namespace {

using matmul_detail::ActKind;
using matmul_detail::HighBlock;
using matmul_detail::Int8Block;
using matmul_detail::Tile;

// Below this many rows BLAS sgemm is not faster than our FMA kernel (and not batch-invariant).
constexpr int64_t kBlasMinRows = 32;
// Output columns per cache block: the block's weight rows stay in L1/L2 while every row tile
// of activations passes over them.
constexpr size_t kColBlockBytes = 48 * 1024;

size_t act_row_bytes(DType type, int64_t n_in) {
  switch (matmul_detail::act_kind(type)) {
    case ActKind::kQ8_32: return static_cast<size_t>(n_in / 32) * sizeof(ActBlock32);
    case ActKind::kQ8_K: return static_cast<size_t>(n_in / kQKK) * sizeof(BlockQ8_K);
    case ActKind::kFloat: break;
  }
  return 0;
}

// Quantized activations of the current call (one slot per matmul of a matmul_group); grows to
// the largest call, never shrinks, so the steady state allocates nothing. Thread-local because
// the calling thread fills it.
AlignedBuffer<uint8_t>& act_scratch(int slot, size_t bytes) {
  thread_local std::array<AlignedBuffer<uint8_t>, kMaxMatmulGroup> bufs;
  auto& buf = bufs[static_cast<size_t>(slot)];
  if (buf.size() < bytes) buf.resize(bytes + bytes / 4);
  return buf;
}

// The fp32 weights of the current thread's kHigh column block (see act_scratch for why it
// only grows).
float* high_scratch(size_t floats) {
  thread_local AlignedBuffer<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

// The unpacked int8 weights of the current thread's kInt8 column block.
uint8_t* int8_scratch(size_t bytes) {
  thread_local AlignedBuffer<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

struct Kernel {
  void (*fn)(const Tile&);
  ActSign sign;  // how Q8_32 activations must be stored for fn
  int tile_rows;  // rows per tile fn handles
  void (*high_block)(const HighBlock&) = nullptr;  // kHigh for many rows, where the ISA has one
  void (*int8_block)(const Int8Block&) = nullptr;  // kInt8 for many rows, where the ISA has one
  // Q8_32 activation quantizer: all give the scalar one's bytes.
  void (*quant32)(const float*, ActBlock32*, int64_t, ActSign) = quantize_act_q8_32;
};

Kernel kernel_for(IsaLevel isa) {
  const IsaLevel best = best_isa();
  if (static_cast<int>(isa) > static_cast<int>(best)) isa = best;
  switch (isa) {
    case IsaLevel::kAvx512:
      return {matmul_detail::compute_tile_avx512, ActSign::kUnsigned, matmul_detail::kMaxTileRows,
              matmul_detail::compute_high_block_avx512, matmul_detail::compute_int8_block_avx512,
              quantize_act_q8_32_avx512};
    case IsaLevel::kAvx2:
      return {matmul_detail::compute_tile_avx2, ActSign::kSigned, matmul_detail::kAvx2TileRows,
              matmul_detail::compute_high_block_avx2};
    case IsaLevel::kScalar: break;
  }
  return {matmul_detail::compute_tile_scalar, ActSign::kSigned, matmul_detail::kMaxTileRows};
}

#ifdef DEEPINFER_HAVE_BLAS
void matmul_blas(const MatmulParams& p) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(p.n_rows), static_cast<int>(p.n_out),
              static_cast<int>(p.n_in), 1.0f, p.input, static_cast<int>(p.input_stride),
              static_cast<const float*>(p.weight), static_cast<int>(p.weight_row_bytes / 4), 0.0f, p.output,
              static_cast<int>(p.output_stride));
}
#endif

// Thread i of n's share of n_out output columns (multiples of 8, so threads don't share output
// cache lines); below 16 columns thread 0 takes them all.
std::pair<int64_t, int64_t> column_share(int64_t n_out, int i, int n) {
  if (n_out < 16) return i == 0 ? std::pair<int64_t, int64_t>{0, n_out} : std::pair<int64_t, int64_t>{0, 0};
  const int64_t chunks = (n_out + 7) / 8;
  return {std::min(n_out, chunks * i / n * 8), std::min(n_out, chunks * (i + 1) / n * 8)};
}

// Calls work(c0, c1) on every thread with its share of the output columns.
template <typename Work>
void split_columns(const MatmulParams& p, ThreadPool* pool, const Work& work) {
  const int nt = pool ? pool->num_threads() : 1;
  if (nt == 1 || p.n_out < 16) {
    work(0, p.n_out);
    return;
  }
  pool->run([&](int i, int n) {
    const auto [c0, c1] = column_share(p.n_out, i, n);
    if (c0 < c1) work(c0, c1);
  });
}

// The blocked kernels' walk: passes of up to row_chunk rows, each over columns [c0, c1) in
// blocks of `cols`; block(first row, rows, first column, end column).
template <typename Block>
void for_each_block(int64_t n_rows, int64_t row_chunk, int64_t c0, int64_t c1, int64_t cols, const Block& block) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += row_chunk)
    for (int64_t cb = c0; cb < c1; cb += cols)
      block(r0, std::min(row_chunk, n_rows - r0), cb, std::min(c1, cb + cols));
}

bool use_high_block(const MatmulParams& p, const Kernel& k) {
  return k.high_block && p.precision == MatmulPrecision::kHigh &&
         p.n_rows >= matmul_detail::kHighBlockMinRows &&
         matmul_detail::act_kind(p.weight_type) != ActKind::kFloat;
}

void run_high_block(const MatmulParams& p, ThreadPool* pool, Kernel k) {
  const int64_t cols = matmul_detail::high_block_cols(p.n_in);
  const int64_t rows = matmul_detail::high_block_row_chunk(p.n_in);
  split_columns(p, pool, [&](int64_t c0, int64_t c1) {
    HighBlock b{p.weight_type, static_cast<const uint8_t*>(p.weight), p.weight_row_bytes, p.n_in,
                0, 0, nullptr, p.input_stride, 0, nullptr, p.output_stride,
                high_scratch(matmul_detail::high_block_scratch_floats(cols, p.n_in))};
    for_each_block(p.n_rows, rows, c0, c1, cols, [&](int64_t r0, int64_t nr, int64_t cb, int64_t ce) {
      b.act = p.input + r0 * p.input_stride, b.out = p.output + r0 * p.output_stride;
      b.n_rows = nr, b.col_begin = cb, b.col_end = ce;
      k.high_block(b);
    });
  });
}

// A matmul of the per-column path ready for its column loop: activations (quantized into
// act_scratch(slot) when the precision asks) and the column blocking.
struct ColumnJob {
  const MatmulParams* p = nullptr;
  const uint8_t* act = nullptr;
  size_t act_row = 0;
  bool high = true;
  int64_t col_block = 0;
};

// With many rows the pool quantizes them (each row alone, so the bytes are the same).
constexpr int64_t kParallelQuantRows = 64;

// `same_act`: a prepared job of the same group whose quantized activations this one can use (same
// input rows, same activation format), or null.
ColumnJob prepare_columns(const MatmulParams& p, const Kernel& k, int slot, ThreadPool* pool = nullptr,
                          const ColumnJob* same_act = nullptr) {
  ColumnJob j{&p, reinterpret_cast<const uint8_t*>(p.input), static_cast<size_t>(p.input_stride) * sizeof(float),
              p.precision == MatmulPrecision::kHigh, 0};
  const ActKind kind = j.high ? ActKind::kFloat : matmul_detail::act_kind(p.weight_type);
  if (kind != ActKind::kFloat && same_act) {
    j.act_row = same_act->act_row, j.act = same_act->act;
  } else if (kind != ActKind::kFloat) {
    j.act_row = act_row_bytes(p.weight_type, p.n_in);
    uint8_t* buf = act_scratch(slot, j.act_row * static_cast<size_t>(p.n_rows)).data();
    const auto quantize = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* x = p.input + r * p.input_stride;
        uint8_t* dst = buf + r * j.act_row;
        if (kind == ActKind::kQ8_32) k.quant32(x, reinterpret_cast<ActBlock32*>(dst), p.n_in, k.sign);
        else quantize_act_q8_k(x, dst, p.n_in);
      }
    };
    if (pool && pool->num_threads() > 1 && p.n_rows >= kParallelQuantRows)
      pool->run([&](int i, int n) { quantize(p.n_rows * i / n, p.n_rows * (i + 1) / n); });
    else
      quantize(0, p.n_rows);
    j.act = buf;
  }
  j.col_block = std::max<int64_t>(8, static_cast<int64_t>(kColBlockBytes / p.weight_row_bytes));
  return j;
}

// Columns [c0, c1) of a prepared matmul, in register tiles of rows.
void run_columns(const ColumnJob& j, const Kernel& k, int64_t c0, int64_t c1) {
  const MatmulParams& p = *j.p;
  for (int64_t cb = c0; cb < c1; cb += j.col_block) {
    Tile t{p.weight_type, static_cast<const uint8_t*>(p.weight), p.weight_row_bytes, p.n_in,
           cb, std::min(c1, cb + j.col_block), nullptr, j.act_row, 0, nullptr, p.output_stride, j.high};
    for (int64_t r = 0; r < p.n_rows; r += k.tile_rows) {
      t.rows = static_cast<int>(std::min<int64_t>(k.tile_rows, p.n_rows - r));
      t.act = j.act + r * j.act_row;
      t.out = p.output + r * p.output_stride;
      k.fn(t);
    }
  }
}

bool use_int8_block(const MatmulParams& p, const Kernel& k) {
  return k.int8_block && p.precision == MatmulPrecision::kInt8 && matmul_detail::int8_block_supports(p.weight_type) &&
         p.n_rows >= matmul_detail::int8_block_min_rows(p.weight_type);
}

// kInt8 with many rows, columns [c0, c1) of a prepared matmul (activations quantized as for the
// tiles): blocks of columns unpacked once per pass of rows (matmul_int8_block.h).
void run_int8_block_columns(const ColumnJob& j, const Kernel& k, int64_t c0, int64_t c1) {
  const MatmulParams& p = *j.p;
  const int64_t cols = matmul_detail::int8_block_cols(p.n_in);
  const int64_t rows = matmul_detail::int8_block_row_chunk(p.n_in);
  Int8Block b{p.weight_type, static_cast<const uint8_t*>(p.weight), p.weight_row_bytes, p.n_in, 0, 0, nullptr,
              j.act_row, 0, nullptr, p.output_stride,
              int8_scratch(matmul_detail::int8_block_scratch_bytes(cols, p.n_in))};
  for_each_block(p.n_rows, rows, c0, c1, cols, [&](int64_t r0, int64_t nr, int64_t cb, int64_t ce) {
    b.act = j.act + r0 * j.act_row, b.out = p.output + r0 * p.output_stride;
    b.n_rows = nr, b.col_begin = cb, b.col_end = ce;
    k.int8_block(b);
  });
}

void run(const MatmulParams& p, ThreadPool* pool, Kernel k) {
  DI_CHECK(matmul_check(p).is_ok(), "matmul: {}", matmul_check(p).message());
  if (p.n_rows == 0 || p.n_out == 0) return;
  if (use_high_block(p, k)) return run_high_block(p, pool, k);
  const ColumnJob j = prepare_columns(p, k, 0, pool);
  const bool block = use_int8_block(p, k);
  split_columns(p, pool, [&](int64_t c0, int64_t c1) {
    if (block) run_int8_block_columns(j, k, c0, c1);
    else run_columns(j, k, c0, c1);
  });
}

#ifdef DEEPINFER_HAVE_BLAS
bool goes_to_blas(const MatmulParams& p) {
  // sgemm's blocking (and so its rounding) depends on the shape: not batch-invariant.
  return p.weight_type == DType::kF32 && !p.batch_invariant && p.n_rows >= kBlasMinRows && p.weight_row_bytes % 4 == 0;
}
#else
bool goes_to_blas(const MatmulParams&) { return false; }
#endif

}  // namespace

bool matmul_supports(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

Status matmul_check(const MatmulParams& p) {
  if (!matmul_supports(p.weight_type))
    return unsupported("matmul: weight type {} is not supported", dtype_name(p.weight_type));
  if (p.precision != MatmulPrecision::kHigh && p.precision != MatmulPrecision::kInt8)
    return invalid_argument("matmul: unknown precision {}", static_cast<int>(p.precision));
  if (p.n_out < 0 || p.n_in <= 0 || p.n_rows < 0)
    return invalid_argument("matmul: bad shape n_out={} n_in={} n_rows={}", p.n_out, p.n_in, p.n_rows);
  const int64_t block = dtype_info(p.weight_type)->block_elems;
  if (p.n_in % block != 0)
    return invalid_argument("matmul: n_in={} is not a multiple of the {} block size {}", p.n_in,
                            dtype_name(p.weight_type), block);
  if (p.weight_row_bytes < row_bytes(p.weight_type, p.n_in))
    return invalid_argument("matmul: weight_row_bytes={} < {} needed for n_in={}", p.weight_row_bytes,
                            row_bytes(p.weight_type, p.n_in), p.n_in);
  if (p.input_stride < p.n_in || p.output_stride < p.n_out)
    return invalid_argument("matmul: strides too small (input {} < n_in {} or output {} < n_out {})",
                            p.input_stride, p.n_in, p.output_stride, p.n_out);
  if (p.n_rows > 0 && p.n_out > 0 && (!p.weight || !p.input || !p.output))
    return invalid_argument("matmul: null weight, input or output pointer");
  return Status::ok();
}

void matmul(const MatmulParams& p, ThreadPool& pool) { matmul_with_isa(p, pool, best_isa()); }

void matmul_with_isa(const MatmulParams& p, ThreadPool& pool, IsaLevel isa) {
#ifdef DEEPINFER_HAVE_BLAS
  if (goes_to_blas(p)) {
    DI_CHECK(matmul_check(p).is_ok(), "matmul: {}", matmul_check(p).message());
    matmul_blas(p);
    return;
  }
#endif
  run(p, &pool, kernel_for(isa));
}

void matmul_group(std::span<const MatmulParams> ps, ThreadPool& pool) { matmul_group_with_isa(ps, pool, best_isa()); }

void matmul_group_with_isa(std::span<const MatmulParams> ps, ThreadPool& pool, IsaLevel isa) {
  DI_CHECK(ps.size() <= static_cast<size_t>(kMaxMatmulGroup), "matmul_group: {} matmuls, at most {}", ps.size(),
           kMaxMatmulGroup);
  const Kernel k = kernel_for(isa);
  // The per-column paths (tiles, and kInt8's blocked kernel, which batched decode's q/k/v and
  // gate/up reach from 9 rows) share a run; the others (BLAS, the blocked kHigh kernel) are
  // already one hand-off each for much more work.
  bool shared = pool.num_threads() > 1 && ps.size() > 1;
  for (const MatmulParams& p : ps) {
    DI_CHECK(matmul_check(p).is_ok(), "matmul: {}", matmul_check(p).message());
    shared = shared && !goes_to_blas(p) && !use_high_block(p, k);
  }
  if (!shared) {
    for (const MatmulParams& p : ps) matmul_with_isa(p, pool, isa);
    return;
  }
  // q/k/v (or gate/up) read the same input: it is quantized once.
  const auto same_act = [&](size_t g, size_t h) {
    const MatmulParams &a = ps[g], &b = ps[h];
    return a.precision == MatmulPrecision::kInt8 && b.precision == MatmulPrecision::kInt8 && a.input == b.input &&
           a.input_stride == b.input_stride && a.n_in == b.n_in && a.n_rows == b.n_rows &&
           matmul_detail::act_kind(a.weight_type) == matmul_detail::act_kind(b.weight_type);
  };
  std::array<ColumnJob, kMaxMatmulGroup> jobs;
  for (size_t g = 0; g < ps.size(); ++g) {
    const ColumnJob* reuse = nullptr;
    for (size_t h = 0; h < g && !reuse; ++h)
      if (same_act(g, h)) reuse = &jobs[h];
    jobs[g] = prepare_columns(ps[g], k, static_cast<int>(g), &pool, reuse);
  }
  pool.run([&](int i, int n) {
    for (size_t g = 0; g < ps.size(); ++g) {
      if (ps[g].n_rows == 0) continue;
      const auto [c0, c1] = column_share(ps[g].n_out, i, n);
      if (c0 >= c1) continue;
      if (use_int8_block(ps[g], k)) run_int8_block_columns(jobs[g], k, c0, c1);
      else run_columns(jobs[g], k, c0, c1);
    }
  });
}

void matmul_reference(const MatmulParams& p) { run(p, nullptr, {matmul_detail::compute_tile_scalar, ActSign::kSigned, matmul_detail::kMaxTileRows}); }

}  // namespace deepinfer::kernels
