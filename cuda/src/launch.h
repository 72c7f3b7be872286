// Host-side helpers shared by the kernel files (no device code): dtype conversion of whole
// blobs, and the GEMM entry point. Called on an engine GPU worker, inside an
// op, with ctx.run.stream as the stream every launch goes to.
#pragma once

#include <cstddef>
#include <vector>

#include "pymx/gpu.h"
#include "pymx/op.h"

namespace pymx {
namespace gpu {

// `bytes` rounded up to 256: pieces carved one after another from one workspace stay aligned for
// vector loads, cuDNN and CUB.
inline size_t workspace_aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Converts every element of `in` into `out` (same element count, any dtypes) on `stream`.
void cast_blob(const TBlob& in, const TBlob& out, void* stream);

// Fills `out` with `value` converted to its dtype.
void fill_blob(const TBlob& out, double value, void* stream);

// dst[i] = src[offset + index_i . strides] for every row-major index of `shape` (strides in
// elements, possibly 0 or negative), elements of `elem_size` bytes; dst is contiguous.
void strided_copy(const void* src, int64_t offset, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst, size_t elem_size, void* stream);

// Returns `blobs` with blob i in dtype `dtypes[i]`: blobs already in it are returned as they are,
// the others are cast into the op's workspace (ctx.workspace: call at most once per kernel run).
std::vector<TBlob> blobs_as(const OpContext& ctx, const std::vector<TBlob>& blobs,
                            const std::vector<DType>& dtypes);
// The same with one dtype for all.
std::vector<TBlob> blobs_as(const OpContext& ctx, const std::vector<TBlob>& blobs, DType dtype);

// Row-major C = alpha * op(A) * op(B) + beta * C with op(A) M x K, op(B) K x N, through cuBLAS
// on ctx's stream, `batch` times with element strides stride_a/b/c between the matrices
// (0 repeats a matrix). float32, float64 and float16 (float accumulation).
void gemm(const OpContext& ctx, DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, double alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
          double beta, void* c, int64_t ldc, int64_t batch = 1, int64_t stride_a = 0,
          int64_t stride_b = 0, int64_t stride_c = 0);

}  // namespace gpu
}  // namespace pymx
