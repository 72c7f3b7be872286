// LAPACK from the scipy-openblas32 wheel, as overloads on float and double so the kernels in
// linalg_*.cc are written once. The wheel's lapack.h declares the Fortran routines under the name
// LAPACK_GLOBAL makes, and its symbols carry the same prefix as its CBLAS ones (blas.h): we define
// LAPACK_GLOBAL to spell them (scipy_dgetrf_). Routines that take characters get their hidden
// Fortran string lengths (always 1) passed explicitly.
//
// Every routine works on column-major matrices; pymx arrays are row-major, so a row-major (m, n)
// block is, to LAPACK, the column-major (n, m) matrix of its transpose. Each kernel says how it
// uses this. All functions are thread-safe (OpenBLAS's LAPACK keeps no global state) and block
// the calling thread while they run.
#pragma once

#include <cstdint>

#include "blas.h"

#define LAPACK_GLOBAL(lcname, UCNAME) PMX_BLAS_CAT(PYMX_BLAS_PREFIX, lcname##_)
#include <lapack.h>

namespace pymx {
namespace lapack {

using lint = lapack_int;

// LU factorisation with partial pivoting of the n x n matrix a (getrf).
inline void getrf(lint n, float* a, lint* ipiv, lint* info) { LAPACK_sgetrf(&n, &n, a, &n, ipiv, info); }
inline void getrf(lint n, double* a, lint* ipiv, lint* info) { LAPACK_dgetrf(&n, &n, a, &n, ipiv, info); }

// The inverse from getrf's factors, in place (getri). lwork = -1 queries the size into work[0].
inline void getri(lint n, float* a, const lint* ipiv, float* work, lint lwork, lint* info) {
  LAPACK_sgetri(&n, a, &n, ipiv, work, &lwork, info);
}
inline void getri(lint n, double* a, const lint* ipiv, double* work, lint lwork, lint* info) {
  LAPACK_dgetri(&n, a, &n, ipiv, work, &lwork, info);
}

// Solves op(A) X = B for the n x nrhs matrix b from getrf's factors of A (getrs).
inline void getrs(char trans, lint n, lint nrhs, const float* a, const lint* ipiv, float* b, lint* info) {
  LAPACK_sgetrs_base(&trans, &n, &nrhs, a, &n, ipiv, b, &n, info, 1);
}
inline void getrs(char trans, lint n, lint nrhs, const double* a, const lint* ipiv, double* b, lint* info) {
  LAPACK_dgetrs_base(&trans, &n, &nrhs, a, &n, ipiv, b, &n, info, 1);
}

// Cholesky factorisation of the `uplo` triangle, in place (potrf).
inline void potrf(char uplo, lint n, float* a, lint* info) { LAPACK_spotrf_base(&uplo, &n, a, &n, info, 1); }
inline void potrf(char uplo, lint n, double* a, lint* info) { LAPACK_dpotrf_base(&uplo, &n, a, &n, info, 1); }

// Eigenvalues (ascending) and, for jobz 'V', eigenvectors (in place of a) of the symmetric
// matrix whose `uplo` triangle a holds, by divide and conquer (syevd). lwork = liwork = -1
// query the sizes into work[0] and iwork[0].
inline void syevd(char jobz, char uplo, lint n, float* a, float* w, float* work, lint lwork,
                  lint* iwork, lint liwork, lint* info) {
  LAPACK_ssyevd_base(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
inline void syevd(char jobz, char uplo, lint n, double* a, double* w, double* work, lint lwork,
                  lint* iwork, lint liwork, lint* info) {
  LAPACK_dsyevd_base(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info, 1, 1);
}

// Eigenvalues (real parts wr, imaginary parts wi) and right eigenvectors (the columns of vr,
// ldvr n) of the general n x n matrix a (destroyed), without left ones (geev, jobvl 'N'). A
// complex pair's vectors share two columns: the real part, then the imaginary part. lwork = -1
// queries the size into work[0].
inline void geev(lint n, float* a, float* wr, float* wi, float* vr, float* work, lint lwork, lint* info) {
  const char jobvl = 'N', jobvr = 'V';
  const lint ldvl = 1;
  LAPACK_sgeev_base(&jobvl, &jobvr, &n, a, &n, wr, wi, nullptr, &ldvl, vr, &n, work, &lwork, info, 1, 1);
}
inline void geev(lint n, double* a, double* wr, double* wi, double* vr, double* work, lint lwork,
                 lint* info) {
  const char jobvl = 'N', jobvr = 'V';
  const lint ldvl = 1;
  LAPACK_dgeev_base(&jobvl, &jobvr, &n, a, &n, wr, wi, nullptr, &ldvl, vr, &n, work, &lwork, info, 1, 1);
}

// Reduced SVD (jobz 'S') of the m x n matrix a (destroyed), by divide and conquer (gesdd):
// u is m x min(m, n) (ldu m), vt is min(m, n) x n (ldvt min(m, n)). iwork holds 8 min(m, n).
inline void gesdd(lint m, lint n, float* a, float* s, float* u, float* vt, float* work, lint lwork,
                  lint* iwork, lint* info) {
  const char jobz = 'S';
  const lint k = m < n ? m : n;
  LAPACK_sgesdd_base(&jobz, &m, &n, a, &m, s, u, &m, vt, &k, work, &lwork, iwork, info, 1);
}
inline void gesdd(lint m, lint n, double* a, double* s, double* u, double* vt, double* work,
                  lint lwork, lint* iwork, lint* info) {
  const char jobz = 'S';
  const lint k = m < n ? m : n;
  LAPACK_dgesdd_base(&jobz, &m, &n, a, &m, s, u, &m, vt, &k, work, &lwork, iwork, info, 1);
}

// Householder QR of the m x n matrix a, in place (geqrf); tau holds min(m, n) scalars.
inline void geqrf(lint m, lint n, float* a, float* tau, float* work, lint lwork, lint* info) {
  LAPACK_sgeqrf(&m, &n, a, &m, tau, work, &lwork, info);
}
inline void geqrf(lint m, lint n, double* a, double* tau, double* work, lint lwork, lint* info) {
  LAPACK_dgeqrf(&m, &n, a, &m, tau, work, &lwork, info);
}

// The first k columns of Q from geqrf's reflectors, in place (orgqr); a is m x k (lda m).
inline void orgqr(lint m, lint k, float* a, const float* tau, float* work, lint lwork, lint* info) {
  LAPACK_sorgqr(&m, &k, &k, a, &m, tau, work, &lwork, info);
}
inline void orgqr(lint m, lint k, double* a, const double* tau, double* work, lint lwork, lint* info) {
  LAPACK_dorgqr(&m, &k, &k, a, &m, tau, work, &lwork, info);
}

}  // namespace lapack
}  // namespace pymx
