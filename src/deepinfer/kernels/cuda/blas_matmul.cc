// cuBLASLt path of the CUDA matmul with one algorithm fixed per weight shape (blas_matmul.h).
#include "deepinfer/kernels/cuda/blas_matmul.h"

#include <cublasLt.h>

#include <cstring>
#include <utility>

namespace deepinfer::cuda {
namespace {

Status blas_status(cublasStatus_t st, const char* call) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return {StatusCode::kInternal,
          fmt::format("{} failed: {} ({})", call, cublasLtGetStatusString(st),
                      cublasLtGetStatusName(st))};
}

#define DI_BLAS_RETURN_IF_ERROR(call) DI_RETURN_IF_ERROR(blas_status((call), #call))

cudaDataType_t cuda_type(DType t) { return t == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

// Descriptors and the fixed algorithm of one weight shape; B and D layouts are rebuilt per call
// (they carry the row count).
struct BlasMatmul::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

namespace {

// Column-major views: W (row-major [n_out, n_in]) is A = [n_in, n_out] used transposed; the
// activations are B = [n_in, rows]; the output is D = [n_out, rows].
struct RowLayouts {
  cublasLtMatrixLayout_t b = nullptr, d = nullptr;
  ~RowLayouts() {
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
  Status make(const MatmulParams& p, int64_t rows) {
    DI_BLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&b, cuda_type(p.weight_type), p.n_in, rows, p.n_in));
    DI_BLAS_RETURN_IF_ERROR(
        cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, p.n_out, rows, p.output_stride));
    return Status::ok();
  }
};

}  // namespace

Status check_blas_matmul(const MatmulParams& p) {
  if (p.weight_type != DType::kF16 && p.weight_type != DType::kBF16)
    return invalid_argument("blas matmul: weights must be f16 or bf16, got {}",
                            dtype_name(p.weight_type));
  if (p.n_out <= 0 || p.n_in <= 0 || p.n_rows < 0)
    return invalid_argument("blas matmul: bad sizes");
  if (p.weight_row_bytes < row_bytes(p.weight_type, p.n_in) || p.weight_row_bytes % 16 != 0)
    return invalid_argument("blas matmul: weight_row_bytes {} must be >= {} and a multiple of 16",
                            p.weight_row_bytes, row_bytes(p.weight_type, p.n_in));
  if (!aligned16(p.weight) || !aligned16(p.output) || p.output_stride % 4 != 0)
    return invalid_argument(
        "blas matmul: weight and output must be 16-byte aligned, output_stride a multiple of 4");
  if (p.input_stride < p.n_in || p.output_stride < p.n_out)
    return invalid_argument("blas matmul: input_stride {} < n_in {} or output_stride {} < n_out {}",
                            p.input_stride, p.n_in, p.output_stride, p.n_out);
  if (p.n_rows > 0 && (!p.weight || !p.input || !p.output))
    return invalid_argument("blas matmul: weight, input and output must be set");
  return Status::ok();
}

Result<BlasMatmul> BlasMatmul::create() {
  BlasMatmul m;
  cublasLtHandle_t h = nullptr;
  DI_BLAS_RETURN_IF_ERROR(cublasLtCreate(&h));
  m.handle_ = h;
  return m;
}

BlasMatmul::~BlasMatmul() {
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

BlasMatmul::BlasMatmul(BlasMatmul&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)), plans_(std::move(o.plans_)) {}

BlasMatmul& BlasMatmul::operator=(BlasMatmul&& o) noexcept {
  if (this != &o) {
    plans_.clear();
    if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
    handle_ = std::exchange(o.handle_, nullptr);
    plans_ = std::move(o.plans_);
  }
  return *this;
}

size_t BlasMatmul::activation_bytes(const MatmulParams& p) {
  return static_cast<size_t>(p.n_rows) * static_cast<size_t>(p.n_in) * 2;
}

Result<const BlasMatmul::Plan*> BlasMatmul::plan(const MatmulParams& p) {
  const Key key{p.weight_type, p.n_out, p.n_in, p.weight_row_bytes, p.output_stride};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  DI_BLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DI_BLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  DI_BLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const int64_t lda = static_cast<int64_t>(p.weight_row_bytes / 2);
  DI_BLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->a, cuda_type(p.weight_type), p.n_in, p.n_out, lda));
  RowLayouts rows;
  DI_RETURN_IF_ERROR(rows.make(p, kPlanRows));

  cublasLtMatmulPreference_t pref = nullptr;
  DI_BLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const size_t workspace = 0;  // no workspace: no split-K reduction buffers
  const uint32_t align = 16;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), plan->op, plan->a,
                                        rows.b, rows.d, rows.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  DI_RETURN_IF_ERROR(blas_status(st, "cublasLtMatmulAlgoGetHeuristic"));
  if (found < 1)
    return Status(StatusCode::kUnsupported,
                  fmt::format("cuBLASLt has no algorithm for {} x {} {} weights", p.n_out, p.n_in,
                              dtype_name(p.weight_type)));
  plan->algo = result.algo;
  const int32_t one_split = 1;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  DI_BLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoConfigSetAttribute(
      &plan->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split, sizeof one_split));
  DI_BLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoConfigSetAttribute(
      &plan->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction, sizeof no_reduction));
  const Plan* out = plan.get();
  plans_.emplace(key, std::move(plan));
  return out;
}

Status BlasMatmul::run(const MatmulParams& p, void* activations, cudaStream_t stream) {
  DI_RETURN_IF_ERROR(check_blas_matmul(p));
  if (p.n_rows == 0) return Status::ok();
  DI_ASSIGN_OR_RETURN(const Plan* plan, this->plan(p));
  convert_rows_f32(p.input, p.n_rows, p.n_in, p.input_stride, activations, p.weight_type, stream);
  RowLayouts rows;
  DI_RETURN_IF_ERROR(rows.make(p, p.n_rows));
  const auto h = static_cast<cublasLtHandle_t>(handle_);
  cublasLtMatmulHeuristicResult_t check{};
  DI_BLAS_RETURN_IF_ERROR(
      cublasLtMatmulAlgoCheck(h, plan->op, plan->a, rows.b, rows.d, rows.d, &plan->algo, &check));
  const float alpha = 1.0f, beta = 0.0f;
  DI_BLAS_RETURN_IF_ERROR(cublasLtMatmul(h, plan->op, &alpha, p.weight, plan->a, activations,
                                         rows.b, &beta, p.output, rows.d, p.output, rows.d,
                                         &plan->algo, nullptr, 0, stream));
  return Status::ok();
}

}  // namespace deepinfer::cuda
