// best_tf32.cu - tf32 (H200): TMA + wgmma m64n256k8, block 128x256, 4 stages x 48 KB, 1 producer + 2 consumer WGs,
// A K-major read directly (raw fp32 -> truncated by the tensor core), row-major B transposed (and rna-rounded)
// by a pre-pass into B^T (N x Kp) because .tf32 wgmma only reads K-major operands.  b_trans=1: no pre-pass.
// Measured: 345 TF/s NN / 386 TF/s NT at 4096^3 (cuBLAS TF32 400): 0.86x / 0.98x.  Link with k_prep.cu.
#include "wgmma_gemm.cuh"
extern "C" void gemm_tf32(const float* A, const float* B, float* C, int M, int N, int K, float alpha, float beta,
                          int b_trans, float* ws, cudaStream_t s) {
  const float* Bt = B; int ldb = K;                    // requires K % 4 == 0 (16-byte TMA row pitch)
  if (!b_trans) { int Kp = round_up(K, 4); prep_transpose_f32(B, ws, K, N, Kp, true, s); Bt = ws; ldb = Kp; }
  CUtensorMap tA = make_tmap_2d(A, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, M, K, K, 32, 128);
  CUtensorMap tB = make_tmap_2d(Bt, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, N, ldb, ldb, 32, 256);
  wg::launch<256, 4, false, false, false>(tA, tA, tB, tB, C, M, N, K, alpha, beta, s);
}
