// best_tf32x3.cu - recommended tf32x3 structure (H200): split pre-pass (k_prep.cu) + TMA + wgmma m64n128k8,
// block 128x128, 3 stages x 64 KB (A_hi, A_lo, B_hi^T, B_lo^T, 128B swizzle), 1 producer + 2 consumer warpgroups,
// 3 wgmma per k8 (lo*hi, hi*lo, hi*hi).  PROMOTE=2: each 32-wide k-tile accumulated into a fresh partial and
// added to the FP32 register accumulator (needed for FP32-level accuracy, see REPORT.md).
// Measured (run 1) with PROMOTE=0: 126.5 TF/s at 4096^3 (2.47x cublasSgemm) but norm error 2.9e-5.
// PROMOTE=2 built and ptxas-clean, NOT yet measured (device unavailable).  Link with k_prep.cu.
#include "wgmma_gemm.cuh"
// A: M x K row-major, B: K x N row-major (b_trans=0) or N x K (b_trans=1); ws: 2*(M+N)*round_up(K,4) floats
extern "C" void gemm_tf32x3(const float* A, const float* B, float* C, int M, int N, int K, float alpha, float beta,
                            int b_trans, float* ws, cudaStream_t s) {
  const int Kp = round_up(K, 4);
  size_t sa = (size_t)M * Kp, sb = (size_t)N * Kp;
  float *Ahi = ws, *Alo = ws + sa, *Bhi = ws + 2 * sa, *Blo = ws + 2 * sa + sb;
  prep_split_rows(A, Ahi, Alo, M, K, Kp, s);
  if (b_trans) prep_split_rows(B, Bhi, Blo, N, K, Kp, s); else prep_split_transpose(B, Bhi, Blo, K, N, Kp, s);
  CUtensorMap tA = make_tmap_2d(Ahi, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, M, Kp, Kp, 32, 128);
  CUtensorMap tAl = make_tmap_2d(Alo, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, M, Kp, Kp, 32, 128);
  CUtensorMap tB = make_tmap_2d(Bhi, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, N, Kp, Kp, 32, 128);
  CUtensorMap tBl = make_tmap_2d(Blo, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, N, Kp, Kp, 32, 128);
  wg::launch</*BN*/128, /*STAGES*/3, /*X3*/true, /*F16*/false, /*B_MN*/false, /*PROMOTE*/2>(tA, tAl, tB, tBl, C, M, N, K, alpha, beta, s);
}
