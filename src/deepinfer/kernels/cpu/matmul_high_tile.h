// Internal to matmul's kHigh mode: quantized weights dequantized to fp32 in 32-element chunks
// and FMA'd against fp32 activations, in one fixed order shared by the scalar and SIMD code.
#pragma once

#include "deepinfer/kernels/cpu/matmul_tile.h"

namespace deepinfer::kernels::matmul_detail {

// The order (the SIMD kernels follow it bit for bit, so all ISAs give identical results):
//  * weight element j of chunk c (elements 32c..32c+31 of the row) is
//      w = fma(j < 16 ? d0 : d1, float(q_j), m)
//    with q_j the stored integer (offset removed), d0/d1 the chunk's scales (different only for
//    Q6_K, whose scales cover 16 elements) and m the chunk's min (negated for K formats);
//  * 16 fp32 accumulators per row: element j of every chunk goes to acc[j % 16] via fma, chunks
//    in order (two 8-lane vectors per row: enough independent chains for decode);
//  * result = hsum8(acc[0..7] + acc[8..15]) with hsum8(v) = ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)).
// Error is that of an fp32 dot product of the dequantized weights (no activation rounding).
void compute_high_tile_scalar(const Tile& t);

}  // namespace deepinfer::kernels::matmul_detail
