// k_wgmma_f16.cu - __half inputs, fp32 accumulate/output, TMA + wgmma (sm_90a).
//  MN variants: row-major B (K x N) read directly as an N-major operand (imm-trans-b = 1), no pre-pass.
//  KM variant : B^T pre-pass (N x Kp) then both operands K-major.
#include "wgmma_gemm.cuh"

template <int BN, int STAGES>
static void run_f16_mn(const GemmArgs& a, cudaStream_t s) {
  const int M = a.M, N = a.N, K = a.K;
  if (K % 8 || N % 8) { fprintf(stderr, "f16 wgmma path needs K, N %% 8 == 0\n"); exit(4); }
  CUtensorMap tA = make_tmap_2d(a.A, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, M, K, K, 64, 128);
  CUtensorMap tB;
  if (a.bt) {  // B stored N x K: K-major
    tB = make_tmap_2d(a.B, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, N, K, K, 64, BN);
    wg::launch<BN, STAGES, false, true, false>(tA, tA, tB, tB, (float*)a.C, M, N, K, (float)a.alpha, (float)a.beta, s);
  } else {     // B stored K x N: N-major, boxes of 64 n x 64 k
    tB = make_tmap_2d(a.B, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, K, N, N, 64, 64);
    wg::launch<BN, STAGES, false, true, true>(tA, tA, tB, tB, (float*)a.C, M, N, K, (float)a.alpha, (float)a.beta, s);
  }
}
template <int BN, int STAGES>
static void run_f16_km(const GemmArgs& a, cudaStream_t s) {
  const int M = a.M, N = a.N, K = a.K;
  if (K % 8) { fprintf(stderr, "f16 wgmma path needs K %% 8 == 0\n"); exit(4); }
  const void* Bt = a.B; int ldb = K;
  if (!a.bt) {
    int Kp = round_up(K, 8);
    prep_transpose_f16((const __half*)a.B, (__half*)a.ws, K, N, Kp, s);
    Bt = a.ws; ldb = Kp;
  }
  CUtensorMap tA = make_tmap_2d(a.A, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, M, K, K, 64, 128);
  CUtensorMap tB = make_tmap_2d(Bt, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, N, ldb, ldb, 64, BN);
  wg::launch<BN, STAGES, false, true, false>(tA, tA, tB, tB, (float*)a.C, M, N, K, (float)a.alpha, (float)a.beta, s);
}

void register_wgmma_f16(std::vector<Variant>& v) {
  v.push_back({"wg_f16mn_128x256_s4", P_F16, 1, run_f16_mn<256, 4>, "TMA+wgmma m64n256k16, B N-major (trans-b), 4 stages, no pre-pass"});
  v.push_back({"wg_f16mn_128x128_s6", P_F16, 1, run_f16_mn<128, 6>, "TMA+wgmma m64n128k16, B N-major (trans-b), 6 stages, no pre-pass"});
  v.push_back({"wg_f16mn_128x192_s5", P_F16, 1, run_f16_mn<192, 5>, "TMA+wgmma m64n192k16, B N-major (trans-b), 5 stages, no pre-pass"});
  v.push_back({"wg_f16km_128x256_s4", P_F16, 1, run_f16_km<256, 4>, "TMA+wgmma m64n256k16, B^T pre-pass (K-major), 4 stages"});
}
