// Layout operators, matmul and where on the GPU (CPU definitions: engine/src/ops/shape.cc,
// matmul.cc). Layout ops are one strided copy each (launch.h strided_copy), with the strides the
// CPU computes; concatenate / stack / split are 2-D memcpys.
//
// | op                          | inputs      | attrs                     |
// |-----------------------------|-------------|---------------------------|
// | reshape expand_dims squeeze | x           | newshape / axis           |
// | transpose / swapaxes        | x           | axes / axis1, axis2       |
// | broadcast_to                | x           | shape                     |
// | tile / repeat               | x           | reps / repeats, axis      |
// | flip                        | x           | axis                      |
// | concatenate / stack         | x0, x1, ... | axis                      |
// | split                       | x           | indices, axis             |
// | where                       | cond, x, y  |                           |
// | matmul                      | a, b        | transpose_a, transpose_b  |
#include <numeric>

#include "kernel_util.cuh"
#include "launch.h"
#include "ops/elemwise.h"

namespace pymx {
namespace gpu {
namespace {

void copy_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  cast_blob(in[0], out[0], ctx.run.stream);  // same dtype: one device-to-device memcpy
}

std::vector<int> transpose_perm(const Attrs& attrs, int nd, bool swapaxes) {
  std::vector<int> perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  if (swapaxes) {
    std::swap(perm[ops::normalize_axis(attrs.get_int("axis1"), nd, "swapaxes")],
              perm[ops::normalize_axis(attrs.get_int("axis2"), nd, "swapaxes")]);
  } else if (!attrs.has("axes")) {
    std::reverse(perm.begin(), perm.end());
  } else {
    const Shape axes = attrs.get_shape("axes");
    for (int d = 0; d < nd; ++d) perm[d] = ops::normalize_axis(axes[d], nd, "transpose");
  }
  return perm;
}

ComputeFn transpose_compute(bool swapaxes) {
  return [swapaxes](const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
    const std::vector<int> perm = transpose_perm(*ctx.attrs, in[0].ndim(), swapaxes);
    const std::vector<int64_t> st = ops::contiguous_strides(in[0].shape);
    std::vector<int64_t> strides(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) strides[d] = st[perm[d]];
    strided_copy(in[0].dptr, 0, out[0].shape, strides, out[0].dptr, dtype_size(in[0].dtype),
                 ctx.run.stream);
  };
}

void broadcast_to_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                          const std::vector<TBlob>& out) {
  strided_copy(in[0].dptr, 0, out[0].shape, broadcast_strides(in[0].shape, out[0].shape),
               out[0].dptr, dtype_size(in[0].dtype), ctx.run.stream);
}

// tile: x (s0, s1) read as (1, s0, 1, s1) into (r0, s0, r1, s1).
void tile_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  Shape reps = ctx.attrs->get_shape("reps");
  Shape s = in[0].shape;
  while (reps.size() < s.size()) reps.insert(reps.begin(), 1);
  while (s.size() < reps.size()) s.insert(s.begin(), 1);
  const std::vector<int64_t> st = ops::contiguous_strides(s);
  Shape view;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < s.size(); ++d) {
    view.insert(view.end(), {reps[d], s[d]});
    strides.insert(strides.end(), {0, st[d]});
  }
  strided_copy(in[0].dptr, 0, view, strides, out[0].dptr, dtype_size(in[0].dtype), ctx.run.stream);
}

// repeat: along `axis` of length n, read (n, 1) as (n, k).
void repeat_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                    const std::vector<TBlob>& out) {
  const int64_t k = ctx.attrs->get_int("repeats");
  Shape s = in[0].shape;
  int axis = 0;
  if (!ctx.attrs->has("axis")) {
    s = {in[0].size()};
  } else {
    axis = ops::normalize_axis(ctx.attrs->get_int("axis"), in[0].ndim(), "repeat");
  }
  std::vector<int64_t> strides = ops::contiguous_strides(s);
  strides.insert(strides.begin() + axis + 1, 0);
  s.insert(s.begin() + axis + 1, k);
  strided_copy(in[0].dptr, 0, s, strides, out[0].dptr, dtype_size(in[0].dtype), ctx.run.stream);
}

void flip_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                  const std::vector<TBlob>& out) {
  std::vector<int64_t> strides = ops::contiguous_strides(in[0].shape);
  int64_t offset = 0;
  for (int a : ops::reduce_axes(*ctx.attrs, in[0].ndim(), "flip")) {
    offset += (in[0].shape[a] - 1) * strides[a];
    strides[a] = -strides[a];
  }
  strided_copy(in[0].dptr, offset, in[0].shape, strides, out[0].dptr, dtype_size(in[0].dtype),
               ctx.run.stream);
}

// Each piece is a run of `chunk` elements per outer index, at column `col` of rows of `row`
// elements in the joined array: one 2-D memcpy per piece.
void copy_columns(const TBlob& piece, const TBlob& joined, int64_t outer, int64_t col, bool into,
                  cudaStream_t s) {
  const size_t elem = dtype_size(joined.dtype);
  const int64_t chunk = outer == 0 ? 0 : piece.size() / outer;
  const int64_t row = outer == 0 ? 0 : joined.size() / outer;
  if (chunk == 0) return;
  char* whole = static_cast<char*>(joined.dptr) + col * elem;
  if (into) {
    PMX_CUDA_CHECK(cudaMemcpy2DAsync(whole, row * elem, piece.dptr, chunk * elem, chunk * elem,
                                     outer, cudaMemcpyDeviceToDevice, s));
  } else {
    PMX_CUDA_CHECK(cudaMemcpy2DAsync(piece.dptr, chunk * elem, whole, row * elem, chunk * elem,
                                     outer, cudaMemcpyDeviceToDevice, s));
  }
}

int64_t outer_of(const Shape& s, int axis) {
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  return outer;
}

ComputeFn join_compute(const char* op) {
  return [op](const OpContext& ctx, const std::vector<TBlob>& inputs,
              const std::vector<TBlob>& out) {
    const int axis = ops::normalize_axis(ctx.attrs->get_int("axis", 0), out[0].ndim(), op);
    const std::vector<TBlob> in = blobs_as(ctx, inputs, out[0].dtype);
    const int64_t outer = outer_of(out[0].shape, axis);
    int64_t col = 0;
    for (const TBlob& piece : in) {
      copy_columns(piece, out[0], outer, col, true, stream_of(ctx));
      col += outer == 0 ? 0 : piece.size() / outer;
    }
  };
}

void split_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const int axis = ops::normalize_axis(ctx.attrs->get_int("axis", 0), in[0].ndim(), "split");
  const int64_t outer = outer_of(in[0].shape, axis);
  int64_t col = 0;
  for (const TBlob& piece : out) {
    copy_columns(piece, in[0], outer, col, false, stream_of(ctx));
    col += outer == 0 ? 0 : piece.size() / outer;
  }
}

template <typename T>
__global__ void where_kernel(const bool* cond, const T* x, const T* y, T* out, int64_t n,
                             StridedIndex ic, StridedIndex ix, StridedIndex iy) {
  PMX_GRID_STRIDE_LOOP(i, n) out[i] = cond[ic.offset(i)] ? x[ix.offset(i)] : y[iy.offset(i)];
}

void where_compute(const OpContext& ctx, const std::vector<TBlob>& in,
                   const std::vector<TBlob>& out) {
  const int64_t n = out[0].size();
  if (n == 0) return;
  const DType t = out[0].dtype;
  const std::vector<TBlob> args = blobs_as(ctx, in, {DType::kBool, t, t});
  const std::vector<StridedIndex> idx =
      make_strided({args[0].shape, args[1].shape, args[2].shape}, out[0].shape);
  PMX_GPU_TYPE_SWITCH(t, T, {
    where_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(
        args[0].data<bool>(), args[1].data<T>(), args[2].data<T>(), out[0].data<T>(), n, idx[0],
        idx[1], idx[2]);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---------------------------------------------------------------------------------------------
// matmul: batch axes broadcast; float dtypes through cuBLAS strided-batched GEMM, the others by
// a plain kernel (one thread per output element, accumulating in the compute type). With
// transpose_a / transpose_b an operand is read with its last two axes swapped, in place (cuBLAS's
// transpose operations; the plain kernel's strides).
// ---------------------------------------------------------------------------------------------
template <typename T>
__global__ void matmul_kernel(const T* a, const T* b, T* c, int64_t batch, int64_t n, int64_t k,
                              int64_t m, bool trans_a, bool trans_b, StridedIndex ia,
                              StridedIndex ib) {
  using C = AccT<T>;
  // Element strides of op(a)'s rows and columns and op(b)'s, in the stored layouts.
  const int64_t a_row = trans_a ? 1 : k, a_col = trans_a ? n : 1;
  const int64_t b_row = trans_b ? 1 : m, b_col = trans_b ? k : 1;
  PMX_GRID_STRIDE_LOOP(e, batch * n * m) {
    const int64_t j = e % m, i = (e / m) % n, q = e / (n * m);
    const T* ap = a + ia.offset(q) * n * k + i * a_row;
    const T* bp = b + ib.offset(q) * k * m + j * b_col;
    C acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc = C(acc + convert<C>(ap[p * a_col]) * convert<C>(bp[p * b_row]));
    c[e] = convert<T>(acc);
  }
}

// Batch index q of the broadcast batch shape -> matrix index of an operand with batch `own`.
StridedIndex batch_index(const Shape& operand, const Shape& batch) {
  const Shape own(operand.begin(), operand.end() - 2);
  std::vector<int64_t> strides(batch.size(), 0);
  const std::vector<int64_t> st = ops::contiguous_strides(own);
  const size_t lead = batch.size() - own.size();
  for (size_t d = 0; d < own.size(); ++d) strides[lead + d] = own[d] == 1 ? 0 : st[d];
  return merge_strided(batch, {strides})[0];
}

// The matrix stride for strided-batched GEMM, or -1 when the batch walk is not affine.
int64_t affine_stride(const StridedIndex& idx, int64_t matrix) {
  if (idx.ndim == 0) return 0;
  if (idx.ndim == 1 && (idx.stride[0] == 0 || idx.stride[0] == 1)) return idx.stride[0] * matrix;
  return -1;
}

void matmul_compute(const OpContext& ctx, const std::vector<TBlob>& inputs,
                    const std::vector<TBlob>& out) {
  const TBlob& c = out[0];
  if (c.size() == 0) return;
  const std::vector<TBlob> in = blobs_as(ctx, inputs, c.dtype);
  const Shape& sa = in[0].shape;
  const Shape& sb = in[1].shape;
  const bool trans_a = ctx.attrs->get_bool("transpose_a", false);
  const bool trans_b = ctx.attrs->get_bool("transpose_b", false);
  const int64_t n = trans_a ? sa.back() : sa[sa.size() - 2];
  const int64_t k = trans_a ? sa[sa.size() - 2] : sa.back();
  const int64_t m = trans_b ? sb[sb.size() - 2] : sb.back();
  const Shape batch(c.shape.begin(), c.shape.end() - 2);
  const int64_t nbatch = shape_size(batch);
  if (k == 0) {
    fill_blob(c, 0.0, ctx.run.stream);
    return;
  }
  const StridedIndex ia = batch_index(sa, batch), ib = batch_index(sb, batch);
  const int64_t stride_a = affine_stride(ia, n * k), stride_b = affine_stride(ib, k * m);
  if (is_float(c.dtype) && stride_a >= 0 && stride_b >= 0) {
    gemm(ctx, c.dtype, trans_a, trans_b, n, m, k, 1.0, in[0].dptr, trans_a ? n : k, in[1].dptr,
         trans_b ? k : m, 0.0, c.dptr, m, nbatch, stride_a, stride_b, n * m);
    return;
  }
  PMX_GPU_TYPE_SWITCH(c.dtype, T, {
    matmul_kernel<T><<<grid_for(c.size()), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), in[1].data<T>(), c.data<T>(), nbatch, n, k, m, trans_a, trans_b, ia, ib);
  });
  PMX_KERNEL_LAUNCH_CHECK();
}

const bool registered = [] {
  for (const char* name : {"reshape", "expand_dims", "squeeze"})
    op_registry::get_or_create(name).set_gpu(copy_compute);
  op_registry::get_or_create("transpose").set_gpu(transpose_compute(false));
  op_registry::get_or_create("swapaxes").set_gpu(transpose_compute(true));
  op_registry::get_or_create("broadcast_to").set_gpu(broadcast_to_compute);
  op_registry::get_or_create("tile").set_gpu(tile_compute);
  op_registry::get_or_create("repeat").set_gpu(repeat_compute);
  op_registry::get_or_create("flip").set_gpu(flip_compute);
  op_registry::get_or_create("concatenate").set_gpu(join_compute("concatenate"));
  op_registry::get_or_create("stack").set_gpu(join_compute("stack"));
  op_registry::get_or_create("split").set_gpu(split_compute);
  op_registry::get_or_create("where").set_gpu(where_compute);
  op_registry::get_or_create("matmul").set_gpu(matmul_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
