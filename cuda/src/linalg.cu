// GPU kernels of the np.linalg operators (engine/src/ops/linalg_*.cc): cuSOLVER (dense, one
// call per matrix of the batch, on the worker's stream) for inv, det, slogdet, solve (getrf,
// getrs), cholesky (potrf), eigh (syevd), eig (Xgeev), svd (gesvdj, Jacobi) and qr (geqrf,
// orgqr), and plain kernels for the gradient helpers _linalg_tril_half and _linalg_gap_inverse.
//
// As on the CPU, a row-major block is, to cuSOLVER (column-major), the transpose of the matrix;
// each kernel says how it uses this. Scratch memory (LU factors, pivots, cuSOLVER's workspace,
// info values) comes from the op's workspace, so from the caching allocator.
//
// Note [Checking cuSOLVER's info on the host]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// inv, solve, cholesky, eigh, eig and svd must raise LinAlgError for a singular, indefinite or
// non-convergent matrix (and eig for complex eigenvalues: Note [Complex eigenvalues of eig] in
// linalg_common.h), as on the CPU, and cuSOLVER reports that in device memory. These kernels
// copy the info values to the host and synchronise the worker's stream before returning, so that
// the error is thrown by the op's kernel and stored on its outputs like any other. The cost is a
// round trip per call, small next to the factorisations. det, slogdet and qr need no check: the
// determinant kernels read the info values on the device (a singular matrix has determinant 0),
// and geqrf/orgqr cannot fail on valid arguments. A CUDA graph
// cannot capture a synchronisation, so inside a capture these kernels refuse (the capture is then
// dropped and the ops run directly; Note [CUDA graphs for bulk replays]).
#include <climits>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "capture_state.h"
#include "cusolver_loader.h"
#include "kernel_util.cuh"
#include "launch.h"
#include "ops/linalg_common.h"

namespace pymx {
namespace gpu {
namespace {

// out[b][c][r] = in[b][r][c] for `batch` rows x cols matrices.
template <typename T>
__global__ void transpose_kernel(const T* in, T* out, int64_t batch, int64_t rows, int64_t cols) {
  PMX_GRID_STRIDE_LOOP(i, batch * rows * cols) {
    const int64_t c = i % cols;
    const int64_t r = (i / cols) % rows;
    const int64_t b = i / (rows * cols);
    out[(b * cols + c) * rows + r] = in[i];
  }
}

template <typename T>
void transpose(const OpContext& ctx, const T* in, T* out, int64_t batch, int64_t rows, int64_t cols) {
  const int64_t n = batch * rows * cols;
  if (n == 0) return;
  transpose_kernel<T><<<grid_for(n), kBlock, 0, stream_of(ctx)>>>(in, out, batch, rows, cols);
  PMX_KERNEL_LAUNCH_CHECK();
}

// Identity matrices (batch, n, n).
template <typename T>
__global__ void eye_kernel(T* out, int64_t batch, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, batch * n * n) {
    out[i] = (i / n) % n == i % n ? T(1) : T(0);
  }
}

// Each (n, n) matrix's entries above (upper = false) or below the diagonal set to zero, and the
// diagonal multiplied by `diagonal_scale`; `in` may be `out`.
template <typename T>
__global__ void triangle_kernel(const T* in, T* out, int64_t batch, int64_t n, bool lower,
                                T diagonal_scale) {
  PMX_GRID_STRIDE_LOOP(i, batch * n * n) {
    const int64_t c = i % n;
    const int64_t r = (i / n) % n;
    out[i] = r == c ? in[i] * diagonal_scale : (lower ? c < r : c > r) ? in[i] : T(0);
  }
}

template <typename T>
void triangle(const OpContext& ctx, const T* in, T* out, int64_t batch, int64_t n, bool lower,
              T diagonal_scale) {
  const int64_t total = batch * n * n;
  if (total == 0) return;
  triangle_kernel<T><<<grid_for(total), kBlock, 0, stream_of(ctx)>>>(in, out, batch, n, lower,
                                                                     diagonal_scale);
  PMX_KERNEL_LAUNCH_CHECK();
}

// f[b][i][j] = 1 / (w[b][j] - w[b][i]) off the diagonal, 0 on it.
template <typename T>
__global__ void gap_inverse_kernel(const T* w, T* f, int64_t batch, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, batch * n * n) {
    const int64_t c = i % n;
    const int64_t r = (i / n) % n;
    const T* wb = w + (i / (n * n)) * n;
    f[i] = r == c ? T(0) : T(1) / (wb[c] - wb[r]);
  }
}

// From LU factors (getrf of each matrix, pivots 1-based, info > 0 for a singular one): det, or
// sign and log|det| (either pair of pointers may be null). One thread per matrix.
template <typename T>
__global__ void lu_determinant_kernel(const T* lu, const int* ipiv, const int* info, int64_t batch,
                                      int64_t n, T* det, T* sign, T* logabs) {
  PMX_GRID_STRIDE_LOOP(b, batch) {
    const T* m = lu + b * n * n;
    T d = 1, s = 1, l = 0;
    for (int64_t j = 0; j < n; ++j) {
      const T u = m[j * n + j];
      if (ipiv[b * n + j] != j + 1) {
        d = -d;
        s = -s;
      }
      if (u < 0) s = -s;
      d *= u;
      l += log(fabs(u));
    }
    if (info[b] > 0) {
      d = 0;
      s = 0;
      l = -INFINITY;
    }
    if (det != nullptr) det[b] = d;
    if (sign != nullptr) {
      sign[b] = s;
      logabs[b] = l;
    }
  }
}

// Scratch pieces carved one after another from the op's workspace (taken once per kernel run).
class Scratch {
 public:
  // `bytes` of each piece, in the order take() will ask for them.
  Scratch(const OpContext& ctx, std::initializer_list<size_t> bytes) {
    size_t total = 0;
    for (size_t b : bytes) total += workspace_aligned(b);
    base_ = static_cast<char*>(total > 0 ? ctx.workspace(total) : nullptr);
  }
  template <typename T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += workspace_aligned(count * sizeof(T));
    return p;
  }

 private:
  char* base_ = nullptr;
  size_t used_ = 0;
};

// The batch's info values, copied to the host (see Note [Checking cuSOLVER's info on the host]).
std::vector<int> infos_on_host(const OpContext& ctx, const int* device_infos, int64_t batch,
                               const char* op) {
  if (capturing_on_this_thread())
    PMX_THROW(Status::kCuda, op, ": checks cuSOLVER's info values on the host, which a CUDA graph "
              "capture cannot hold");
  std::vector<int> infos(static_cast<size_t>(batch));
  PMX_CUDA_CHECK(cudaMemcpyAsync(infos.data(), device_infos, batch * sizeof(int),
                                 cudaMemcpyDeviceToHost, stream_of(ctx)));
  PMX_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  for (int info : infos) PMX_ASSERT(info >= 0, op, ": cuSOLVER rejected argument ", -info);
  return infos;
}

template <typename T>
auto pick(const T& typed, float) { return typed.s; }
template <typename T>
auto pick(const T& typed, double) { return typed.d; }

// LU factors of every matrix (getrf of the row-major blocks, that is of each A^T) into `lu`
// (batch n x n blocks), 1-based pivots into `ipiv` and info values into `info` (device memory);
// `work` holds getrf's workspace.
template <typename T>
void lu_factor_all(const OpContext& ctx, cusolverDnHandle_t handle, const T* a, T* lu, int* ipiv,
                   int* info, T* work, int64_t batch, int n) {
  const CusolverApi& api = cusolver();
  PMX_CUDA_CHECK(cudaMemcpyAsync(lu, a, sizeof(T) * batch * n * n, cudaMemcpyDeviceToDevice,
                                 stream_of(ctx)));
  for (int64_t b = 0; b < batch; ++b)
    check_cusolver(pick(api.getrf, T())(handle, n, n, lu + b * n * n, n, work, ipiv + b * n, info + b),
                   "cusolverDn<t>getrf");
}

// getrf's workspace for n x n matrices; the query reads no data, `a` stands in for the matrix.
template <typename T>
int getrf_workspace(cusolverDnHandle_t handle, const T* a, int n) {
  int lwork = 0;
  check_cusolver(pick(cusolver().getrf_buffer_size, T())(handle, n, n, const_cast<T*>(a), n, &lwork),
                 "cusolverDn<t>getrf_bufferSize");
  return lwork;
}

cusolverDnHandle_t handle_of(const OpContext& ctx) {
  return cusolver_handle(ctx.run.device.id, stream_of(ctx));
}

// ---- inv: getrf of A^T, then getrs solving A^T X = I: X = inv(A)^T column-major, which reads
// back row-major as inv(A).
template <typename T>
void inv_gpu(const OpContext& ctx, const T* a, T* out, int64_t batch, int n) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const int lwork = getrf_workspace<T>(handle, a, n);
  Scratch scratch(ctx, {sizeof(T) * n * n, sizeof(T) * lwork, sizeof(int) * n, sizeof(int) * batch,
                        sizeof(int)});
  T* lu = scratch.take<T>(int64_t(n) * n);
  T* work = scratch.take<T>(lwork);
  int* ipiv = scratch.take<int>(n);
  int* info = scratch.take<int>(batch);
  int* solve_info = scratch.take<int>(1);
  const int64_t total = batch * n * n;
  eye_kernel<T><<<grid_for(total), kBlock, 0, stream_of(ctx)>>>(out, batch, n);
  PMX_KERNEL_LAUNCH_CHECK();
  const CusolverApi& api = cusolver();
  for (int64_t b = 0; b < batch; ++b) {
    PMX_CUDA_CHECK(cudaMemcpyAsync(lu, a + b * n * n, sizeof(T) * n * n, cudaMemcpyDeviceToDevice,
                                   stream_of(ctx)));
    check_cusolver(pick(api.getrf, T())(handle, n, n, lu, n, work, ipiv, info + b), "cusolverDn<t>getrf");
    check_cusolver(pick(api.getrs, T())(handle, CUBLAS_OP_N, n, n, lu, n, ipiv, out + b * n * n, n,
                                        solve_info),
                   "cusolverDn<t>getrs");
  }
  linalg::check_singular(infos_on_host(ctx, info, batch, "inv"), "inv", "getrf");
}

// ---- det / slogdet: every LU kept, then one thread per matrix reads its diagonal.
template <typename T>
void determinant_gpu(const OpContext& ctx, const T* a, int64_t batch, int n, T* det, T* sign, T* logabs) {
  int lwork = 0;
  cusolverDnHandle_t handle = nullptr;
  if (n > 0) {
    handle = handle_of(ctx);
    lwork = getrf_workspace<T>(handle, a, n);
  }
  Scratch scratch(ctx, {sizeof(T) * batch * n * n, sizeof(T) * lwork, sizeof(int) * batch * n,
                        sizeof(int) * batch});
  T* lu = scratch.take<T>(batch * n * n);
  T* work = scratch.take<T>(lwork);
  int* ipiv = scratch.take<int>(batch * n);
  int* info = scratch.take<int>(batch);
  if (n > 0) {
    lu_factor_all<T>(ctx, handle, a, lu, ipiv, info, work, batch, n);
  } else {
    PMX_CUDA_CHECK(cudaMemsetAsync(info, 0, sizeof(int) * batch, stream_of(ctx)));
  }
  lu_determinant_kernel<T><<<grid_for(batch), kBlock, 0, stream_of(ctx)>>>(lu, ipiv, info, batch, n,
                                                                           det, sign, logabs);
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---- solve: getrf of A^T, then getrs with 'T' solves A X = B for column-major B and X, which
// are transposed in and out of the row-major blocks.
template <typename T>
void solve_gpu(const OpContext& ctx, const T* a, const T* b, T* x, int64_t batch, int n, int k) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const int lwork = getrf_workspace<T>(handle, a, n);
  Scratch scratch(ctx, {sizeof(T) * n * n, sizeof(T) * lwork, sizeof(int) * n, sizeof(int) * batch,
                        sizeof(int), sizeof(T) * batch * n * k});
  T* lu = scratch.take<T>(int64_t(n) * n);
  T* work = scratch.take<T>(lwork);
  int* ipiv = scratch.take<int>(n);
  int* info = scratch.take<int>(batch);
  int* solve_info = scratch.take<int>(1);
  T* rhs = scratch.take<T>(batch * n * k);
  transpose<T>(ctx, b, rhs, batch, n, k);
  const CusolverApi& api = cusolver();
  for (int64_t i = 0; i < batch; ++i) {
    PMX_CUDA_CHECK(cudaMemcpyAsync(lu, a + i * n * n, sizeof(T) * n * n, cudaMemcpyDeviceToDevice,
                                   stream_of(ctx)));
    check_cusolver(pick(api.getrf, T())(handle, n, n, lu, n, work, ipiv, info + i), "cusolverDn<t>getrf");
    check_cusolver(pick(api.getrs, T())(handle, CUBLAS_OP_T, n, k, lu, n, ipiv, rhs + i * n * k, n,
                                        solve_info),
                   "cusolverDn<t>getrs");
  }
  transpose<T>(ctx, rhs, x, batch, k, n);
  linalg::check_singular(infos_on_host(ctx, info, batch, "solve"), "solve", "getrf");
}

// ---- cholesky: the row-major lower triangle is cuSOLVER's upper one; potrf('U') gives U with
// A = U^T U, which reads back row-major as L = U^T. The other triangle is then cleared.
template <typename T>
void cholesky_gpu(const OpContext& ctx, const T* a, T* l, int64_t batch, int n) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const CusolverApi& api = cusolver();
  int lwork = 0;
  check_cusolver(pick(api.potrf_buffer_size, T())(handle, CUBLAS_FILL_MODE_UPPER, n, l, n, &lwork),
                 "cusolverDn<t>potrf_bufferSize");
  Scratch scratch(ctx, {sizeof(T) * lwork, sizeof(int) * batch});
  T* work = scratch.take<T>(lwork);
  int* info = scratch.take<int>(batch);
  PMX_CUDA_CHECK(cudaMemcpyAsync(l, a, sizeof(T) * batch * n * n, cudaMemcpyDeviceToDevice,
                                 stream_of(ctx)));
  for (int64_t b = 0; b < batch; ++b)
    check_cusolver(pick(api.potrf, T())(handle, CUBLAS_FILL_MODE_UPPER, n, l + b * n * n, n, work,
                                        lwork, info + b),
                   "cusolverDn<t>potrf");
  triangle<T>(ctx, l, l, batch, n, true, T(1));
  linalg::check_positive_definite(infos_on_host(ctx, info, batch, "cholesky"), "cholesky", "potrf");
}

// ---- eigh: syevd on each block (its triangles swapped: row-major lower is cuSOLVER's upper);
// the eigenvectors come back in columns, column-major, and are transposed into v.
template <typename T>
void eigh_gpu(const OpContext& ctx, const T* a, T* w, T* v, int64_t batch, int n, bool lower) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const CusolverApi& api = cusolver();
  const cublasFillMode_t uplo = lower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  int lwork = 0;
  check_cusolver(pick(api.syevd_buffer_size, T())(handle, CUSOLVER_EIG_MODE_VECTOR, uplo, n, a, n, w,
                                                  &lwork),
                 "cusolverDn<t>syevd_bufferSize");
  Scratch scratch(ctx, {sizeof(T) * batch * n * n, sizeof(T) * lwork, sizeof(int) * batch});
  T* vectors = scratch.take<T>(batch * n * n);
  T* work = scratch.take<T>(lwork);
  int* info = scratch.take<int>(batch);
  PMX_CUDA_CHECK(cudaMemcpyAsync(vectors, a, sizeof(T) * batch * n * n, cudaMemcpyDeviceToDevice,
                                 stream_of(ctx)));
  for (int64_t b = 0; b < batch; ++b)
    check_cusolver(pick(api.syevd, T())(handle, CUSOLVER_EIG_MODE_VECTOR, uplo, n, vectors + b * n * n,
                                        n, w + b * n, work, lwork, info + b),
                   "cusolverDn<t>syevd");
  transpose<T>(ctx, vectors, v, batch, n, n);
  linalg::check_converged(infos_on_host(ctx, info, batch, "eigh"), "eigh", "syevd");
}

// ---- eig: Xgeev (the 64-bit generic API) on each block transposed to column-major, as on the
// CPU. With every data type real, Xgeev writes each matrix's n real eigenvalue parts and then
// its n imaginary parts into W (2n values), and the eigenvectors into the columns of VR,
// column-major, which are transposed into v.

// Xgeev's options, created and destroyed with one call of eig_gpu.
class DnParams {
 public:
  DnParams() { check_cusolver(cusolver().create_params(&params_), "cusolverDnCreateParams"); }
  // The status is ignored: a destructor cannot throw, and a failed destroy leaks a small host
  // object.
  ~DnParams() { cusolver().destroy_params(params_); }
  DnParams(const DnParams&) = delete;
  DnParams& operator=(const DnParams&) = delete;
  cusolverDnParams_t get() const { return params_; }

 private:
  cusolverDnParams_t params_ = nullptr;
};

// flags[b] = 1 when matrix b (`size` elements) holds an inf or NaN. The flags start at 0; the
// racing stores of one matrix all write 1.
template <typename T>
__global__ void non_finite_matrices_kernel(const T* a, int* flags, int64_t batch, int64_t size) {
  PMX_GRID_STRIDE_LOOP(i, batch * size) {
    if (!isfinite(a[i])) flags[i / size] = 1;
  }
}

// w[b][j] = parts[b][j]: the real parts out of Xgeev's W of each matrix.
template <typename T>
__global__ void real_parts_kernel(const T* parts, T* w, int64_t batch, int64_t n) {
  PMX_GRID_STRIDE_LOOP(i, batch * n) {
    w[i] = parts[(i / n) * 2 * n + i % n];
  }
}

template <typename T>
void eig_gpu(const OpContext& ctx, const T* a, T* w, T* v, int64_t batch, int64_t n) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const CusolverApi& api = cusolver();
  const cudaDataType type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
  const DnParams params;
  size_t device_bytes = 0, host_bytes = 0;
  // The query reads no data: `a` stands in for the matrix and W, and ldvl is 1 (no left vectors).
  check_cusolver(api.xgeev_buffer_size(handle, params.get(), CUSOLVER_EIG_MODE_NOVECTOR,
                                       CUSOLVER_EIG_MODE_VECTOR, n, type, a, n, type, a, type, nullptr,
                                       1, type, a, n, type, &device_bytes, &host_bytes),
                 "cusolverDnXgeev_bufferSize");
  Scratch scratch(ctx, {sizeof(T) * batch * n * n, sizeof(T) * batch * 2 * n, sizeof(T) * batch * n * n,
                        device_bytes, sizeof(int) * batch});
  T* col = scratch.take<T>(batch * n * n);
  T* parts = scratch.take<T>(batch * 2 * n);
  T* vectors = scratch.take<T>(batch * n * n);
  char* work = scratch.take<char>(device_bytes);
  int* info = scratch.take<int>(batch);
  std::vector<char> host_work(host_bytes);
  // As on the CPU, infs and NaNs raise before the decomposition, naming the first matrix with
  // one: what Xgeev makes of them is undocumented.
  PMX_CUDA_CHECK(cudaMemsetAsync(info, 0, sizeof(int) * batch, stream_of(ctx)));
  non_finite_matrices_kernel<T><<<grid_for(batch * n * n), kBlock, 0, stream_of(ctx)>>>(
      a, info, batch, n * n);
  PMX_KERNEL_LAUNCH_CHECK();
  const std::vector<int> non_finite = infos_on_host(ctx, info, batch, "eig");
  for (int64_t b = 0; b < batch; ++b)
    if (non_finite[b])
      PMX_THROW(Status::kLinAlg, "eig: matrix ", b, " of the batch contains infs or NaNs; the "
                "array must not contain infs or NaNs");
  transpose<T>(ctx, a, col, batch, n, n);
  for (int64_t b = 0; b < batch; ++b)
    check_cusolver(api.xgeev(handle, params.get(), CUSOLVER_EIG_MODE_NOVECTOR, CUSOLVER_EIG_MODE_VECTOR,
                             n, type, col + b * n * n, n, type, parts + b * 2 * n, type, nullptr, 1,
                             type, vectors + b * n * n, n, type, work, device_bytes,
                             host_work.data(), host_bytes, info + b),
                   "cusolverDnXgeev");
  transpose<T>(ctx, vectors, v, batch, n, n);
  real_parts_kernel<T><<<grid_for(batch * n), kBlock, 0, stream_of(ctx)>>>(parts, w, batch, n);
  PMX_KERNEL_LAUNCH_CHECK();
  linalg::check_converged(infos_on_host(ctx, info, batch, "eig"), "eig", "Xgeev");
  // infos_on_host has refused a capture and waited for the stream, so this copy is a plain one.
  std::vector<T> host_parts(static_cast<size_t>(batch * 2 * n));
  PMX_CUDA_CHECK(cudaMemcpyAsync(host_parts.data(), parts, sizeof(T) * batch * 2 * n,
                                 cudaMemcpyDeviceToHost, stream_of(ctx)));
  PMX_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  for (int64_t b = 0; b < batch; ++b) {
    const T* matrix_parts = host_parts.data() + b * 2 * n;
    linalg::check_real_eigenvalues(matrix_parts, matrix_parts + n, n, b, "eig");
  }
}

// From geqrf's column-major m x n factors `col` of each matrix: r (k x n, row-major) its upper
// triangle's first k rows, zero below.
template <typename T>
__global__ void qr_r_kernel(const T* col, T* r, int64_t batch, int64_t m, int64_t n, int64_t k) {
  PMX_GRID_STRIDE_LOOP(i, batch * k * n) {
    const int64_t c = i % n;
    const int64_t row = (i / n) % k;
    const int64_t b = i / (k * n);
    r[i] = c >= row ? col[b * m * n + c * m + row] : T(0);
  }
}

// From orgqr's column-major output (the first k columns of each m x n block): q (m x k, row-major).
template <typename T>
__global__ void qr_q_kernel(const T* col, T* q, int64_t batch, int64_t m, int64_t n, int64_t k) {
  PMX_GRID_STRIDE_LOOP(i, batch * m * k) {
    const int64_t c = i % k;
    const int64_t row = (i / k) % m;
    const int64_t b = i / (m * k);
    q[i] = col[b * m * n + c * m + row];
  }
}

// ---- qr: each matrix transposed into column-major `col` (cuSOLVER needs A itself, not A^T),
// geqrf, R read out of it, orgqr forms Q in place, Q read out. The workspace queries read no
// data; they get the input (m x n) and r (at least k values) as stand-ins for A and tau, since
// the scratch can be taken only once its size is known.
template <typename T>
void qr_gpu(const OpContext& ctx, const T* a, T* q, T* r, int64_t batch, int m, int n) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const CusolverApi& api = cusolver();
  const int k = m < n ? m : n;
  T* stand_in = const_cast<T*>(a);
  int lwork_qr = 0, lwork_q = 0;
  check_cusolver(pick(api.geqrf_buffer_size, T())(handle, m, n, stand_in, m, &lwork_qr),
                 "cusolverDn<t>geqrf_bufferSize");
  check_cusolver(pick(api.orgqr_buffer_size, T())(handle, m, k, k, stand_in, m, r, &lwork_q),
                 "cusolverDn<t>orgqr_bufferSize");
  const int lwork = lwork_qr > lwork_q ? lwork_qr : lwork_q;
  Scratch scratch(ctx, {sizeof(T) * batch * m * n, sizeof(T) * k, sizeof(T) * lwork, sizeof(int)});
  T* col = scratch.take<T>(batch * m * n);
  T* tau = scratch.take<T>(k);
  T* work = scratch.take<T>(lwork);
  int* info = scratch.take<int>(1);  // reports argument errors only: never read
  transpose<T>(ctx, a, col, batch, m, n);
  for (int64_t b = 0; b < batch; ++b) {
    T* block = col + b * m * n;
    check_cusolver(pick(api.geqrf, T())(handle, m, n, block, m, tau, work, lwork, info),
                   "cusolverDn<t>geqrf");
    qr_r_kernel<T><<<grid_for(int64_t(k) * n), kBlock, 0, stream_of(ctx)>>>(block, r + b * k * n, 1, m,
                                                                             n, k);
    PMX_KERNEL_LAUNCH_CHECK();
    check_cusolver(pick(api.orgqr, T())(handle, m, k, k, block, m, tau, work, lwork, info),
                   "cusolverDn<t>orgqr");
  }
  qr_q_kernel<T><<<grid_for(batch * m * k), kBlock, 0, stream_of(ctx)>>>(col, q, batch, m, n, k);
  PMX_KERNEL_LAUNCH_CHECK();
}

// ---- svd: gesvdj (one-sided Jacobi, singular values sorted descending) on each block, which
// cuSOLVER sees as A^T (n x m) = V S U^T: its U, column-major n x k, is row-major Vh and is
// written into vh in place; its V, column-major m x k, is U^T row-major and is transposed into u.
// The workspace query gets the outputs as stand-ins (see qr_gpu).
template <typename T>
void svd_gpu(const OpContext& ctx, const T* a, T* u, T* s, T* vh, int64_t batch, int m, int n) {
  cusolverDnHandle_t handle = handle_of(ctx);
  const CusolverApi& api = cusolver();
  const int k = m < n ? m : n;
  gesvdjInfo_t params = nullptr;
  check_cusolver(api.create_gesvdj_info(&params), "cusolverDnCreateGesvdjInfo");
  // Destroyed on every path: a throwing check below must not leak it.
  struct ParamsGuard {
    const CusolverApi& api;
    gesvdjInfo_t params;
    ~ParamsGuard() { (void)api.destroy_gesvdj_info(params); }  // a destructor: status ignored
  } guard{api, params};
  int lwork = 0;
  check_cusolver(pick(api.gesvdj_buffer_size, T())(handle, CUSOLVER_EIG_MODE_VECTOR, 1, n, m, a, n, s,
                                                   vh, n, u, m, &lwork, params),
                 "cusolverDn<t>gesvdj_bufferSize");
  Scratch scratch(ctx, {sizeof(T) * m * n, sizeof(T) * batch * m * k, sizeof(T) * lwork,
                        sizeof(int) * batch});
  T* copy = scratch.take<T>(int64_t(m) * n);
  T* u_transposed = scratch.take<T>(batch * m * k);
  T* work = scratch.take<T>(lwork);
  int* info = scratch.take<int>(batch);
  for (int64_t b = 0; b < batch; ++b) {
    PMX_CUDA_CHECK(cudaMemcpyAsync(copy, a + b * m * n, sizeof(T) * m * n, cudaMemcpyDeviceToDevice,
                                   stream_of(ctx)));  // gesvdj destroys its input
    check_cusolver(pick(api.gesvdj, T())(handle, CUSOLVER_EIG_MODE_VECTOR, 1, n, m, copy, n, s + b * k,
                                         vh + b * k * n, n, u_transposed + b * m * k, m, work, lwork,
                                         info + b, params),
                   "cusolverDn<t>gesvdj");
  }
  transpose<T>(ctx, u_transposed, u, batch, k, m);
  linalg::check_converged(infos_on_host(ctx, info, batch, "svd"), "svd", "gesvdj");
}

#define PMX_LINALG_FLOAT_SWITCH(dtype, T, ...)                                                  \
  switch (dtype) {                                                                              \
    PMX_GPU_CASE_(kFloat32, float, T, __VA_ARGS__)                                              \
    PMX_GPU_CASE_(kFloat64, double, T, __VA_ARGS__)                                             \
    default:                                                                                    \
      PMX_THROW(Status::kType, "expected float32 or float64, got ", dtype_name(dtype));         \
  }

void inv_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "inv");
  if (s.batch == 0 || s.rows == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    inv_gpu<T>(ctx, in[0].data<T>(), out[0].data<T>(), s.batch, static_cast<int>(s.rows));
  });
}

void det_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "det");
  if (s.batch == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    determinant_gpu<T>(ctx, in[0].data<T>(), s.batch, static_cast<int>(s.rows), out[0].data<T>(),
                       nullptr, nullptr);
  });
}

void slogdet_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "slogdet");
  if (s.batch == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    determinant_gpu<T>(ctx, in[0].data<T>(), s.batch, static_cast<int>(s.rows), nullptr,
                       out[0].data<T>(), out[1].data<T>());
  });
}

void solve_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "solve");
  const int64_t k = in[1].shape.back();
  if (s.batch == 0 || s.rows == 0 || k == 0) return;
  PMX_CHECK(k <= INT_MAX, "solve: ", k, " right-hand sides exceed cuSOLVER's limit of ", INT_MAX);
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    solve_gpu<T>(ctx, in[0].data<T>(), in[1].data<T>(), out[0].data<T>(), s.batch,
                 static_cast<int>(s.rows), static_cast<int>(k));
  });
}

void cholesky_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "cholesky");
  if (s.batch == 0 || s.rows == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    cholesky_gpu<T>(ctx, in[0].data<T>(), out[0].data<T>(), s.batch, static_cast<int>(s.rows));
  });
}

void eigh_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "eigh");
  if (s.batch == 0 || s.rows == 0) return;
  const bool lower = ctx.attrs->get_str("UPLO", "L") == "L";
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    eigh_gpu<T>(ctx, in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch,
                static_cast<int>(s.rows), lower);
  });
}

void eig_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "eig");
  if (s.batch == 0 || s.rows == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    eig_gpu<T>(ctx, in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch, s.rows);
  });
}

void svd_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::matrix_stack(in[0].shape, "svd");
  if (s.batch == 0 || s.rows == 0 || s.cols == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    svd_gpu<T>(ctx, in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), out[2].data<T>(), s.batch,
               static_cast<int>(s.rows), static_cast<int>(s.cols));
  });
}

void qr_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::matrix_stack(in[0].shape, "qr");
  if (s.batch == 0 || s.rows == 0 || s.cols == 0) return;
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    qr_gpu<T>(ctx, in[0].data<T>(), out[0].data<T>(), out[1].data<T>(), s.batch,
              static_cast<int>(s.rows), static_cast<int>(s.cols));
  });
}

void tril_half_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const linalg::MatrixStack s = linalg::square_stack(in[0].shape, "_linalg_tril_half");
  const bool lower = ctx.attrs->get_bool("lower", true);
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    triangle<T>(ctx, in[0].data<T>(), out[0].data<T>(), s.batch, s.rows, lower, T(0.5));
  });
}

void gap_inverse_compute(const OpContext& ctx, const std::vector<TBlob>& in, const std::vector<TBlob>& out) {
  const int64_t total = out[0].size();
  if (total == 0) return;
  const int64_t n = in[0].shape.back();
  PMX_LINALG_FLOAT_SWITCH(in[0].dtype, T, {
    gap_inverse_kernel<T><<<grid_for(total), kBlock, 0, stream_of(ctx)>>>(
        in[0].data<T>(), out[0].data<T>(), in[0].size() / n, n);
    PMX_KERNEL_LAUNCH_CHECK();
  });
}

const bool registered = [] {
  op_registry::get_or_create("linalg_inv").set_gpu(inv_compute);
  op_registry::get_or_create("linalg_det").set_gpu(det_compute);
  op_registry::get_or_create("linalg_slogdet").set_gpu(slogdet_compute);
  op_registry::get_or_create("linalg_solve").set_gpu(solve_compute);
  op_registry::get_or_create("linalg_cholesky").set_gpu(cholesky_compute);
  op_registry::get_or_create("linalg_eigh").set_gpu(eigh_compute);
  op_registry::get_or_create("linalg_eig").set_gpu(eig_compute);
  op_registry::get_or_create("linalg_svd").set_gpu(svd_compute);
  op_registry::get_or_create("linalg_qr").set_gpu(qr_compute);
  op_registry::get_or_create("_linalg_tril_half").set_gpu(tril_half_compute);
  op_registry::get_or_create("_linalg_gap_inverse").set_gpu(gap_inverse_compute);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace pymx
