// best_f16.cu - __half in, float accumulate/out (H200): TMA + wgmma m64n256k16, block 128x256, 4 stages x 48 KB,
// 1 producer + 2 consumer WGs; row-major B consumed directly as an N-major operand (imm-trans-b = 1,
// TMA boxes of 64 n x 64 k, LBO 8192, SBO 1024) - no pre-pass.  Requires K % 8 == 0, N % 8 == 0.
// Measured: 694 TF/s at 4096^3 (cuBLAS 725): 0.96x; 433 vs 601 at 3000x5000x2000: 0.72x.
#include "wgmma_gemm.cuh"
extern "C" void gemm_f16(const __half* A, const __half* B, float* C, int M, int N, int K, float alpha, float beta, cudaStream_t s) {
  CUtensorMap tA = make_tmap_2d(A, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, M, K, K, 64, 128);
  CUtensorMap tB = make_tmap_2d(B, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, K, N, N, 64, 64);
  wg::launch<256, 4, false, true, true>(tA, tA, tB, tB, C, M, N, K, alpha, beta, s);
}
