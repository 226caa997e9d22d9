// k_wgmma_tf32.cu - tf32 and tf32x3 GEMM through TMA + wgmma (sm_90a).
// Row-major B (K x N) is N-major, which wgmma .tf32 cannot read (tf32 needs K-major A and B):
// a pre-pass writes B^T (N x Kp) (rounded to tf32) or its tf32 hi/lo split.  Its time is included.
#include "wgmma_gemm.cuh"

// x1: A read directly (raw fp32 bits; the tensor core uses the tf32 part), B^T from pre-pass (NN) or direct (NT)
template <int BN, int STAGES, bool PREP_ONLY = false>
static void run_tf32(const GemmArgs& a, cudaStream_t s) {
  const int M = a.M, N = a.N, K = a.K;
  if (K % 4) { fprintf(stderr, "tf32 wgmma path needs K %% 4 == 0 (else copy A in the pre-pass)\n"); exit(4); }
  const float* A = (const float*)a.A;
  const float* Bt; int ldb;
  if (a.bt) { Bt = (const float*)a.B; ldb = K; }
  else {
    int Kp = round_up(K, 4);
    float* w = (float*)a.ws;
    prep_transpose_f32((const float*)a.B, w, K, N, Kp, true, s);
    Bt = w; ldb = Kp;
  }
  CUtensorMap tA = make_tmap_2d(A, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, M, K, K, 32, 128);
  CUtensorMap tB = make_tmap_2d(Bt, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, N, ldb, ldb, 32, BN);
  if (PREP_ONLY) return;
  wg::launch<BN, STAGES, false, false, false>(tA, tA, tB, tB, (float*)a.C, M, N, K, (float)a.alpha, (float)a.beta, s);
}

// x3: pre-pass splits A -> A_hi, A_lo (M x Kp) and B -> B_hi^T, B_lo^T (N x Kp)
template <int BN, int STAGES, int PROMOTE = 0, bool PREP_ONLY = false>
static void run_tf32x3(const GemmArgs& a, cudaStream_t s) {
  const int M = a.M, N = a.N, K = a.K;
  const int Kp = round_up(K, 4);
  float* w = (float*)a.ws;
  size_t sa = (size_t)M * Kp, sb = (size_t)N * Kp;
  float *Ahi = w, *Alo = w + sa, *Bhi = w + 2 * sa, *Blo = w + 2 * sa + sb;
  if ((2 * sa + 2 * sb) * 4 > a.ws_bytes) { fprintf(stderr, "workspace too small\n"); exit(4); }
  prep_split_rows((const float*)a.A, Ahi, Alo, M, K, Kp, s);
  if (a.bt) prep_split_rows((const float*)a.B, Bhi, Blo, N, K, Kp, s);
  else prep_split_transpose((const float*)a.B, Bhi, Blo, K, N, Kp, s);
  CUtensorMap tA = make_tmap_2d(Ahi, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, M, Kp, Kp, 32, 128);
  CUtensorMap tAl = make_tmap_2d(Alo, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, M, Kp, Kp, 32, 128);
  CUtensorMap tB = make_tmap_2d(Bhi, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, N, Kp, Kp, 32, BN);
  CUtensorMap tBl = make_tmap_2d(Blo, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, N, Kp, Kp, 32, BN);
  if (PREP_ONLY) return;
  wg::launch<BN, STAGES, true, false, false, PROMOTE>(tA, tAl, tB, tBl, (float*)a.C, M, N, K, (float)a.alpha, (float)a.beta, s);
}

void register_wgmma_tf32(std::vector<Variant>& v) {
  v.push_back({"wg_tf32x3p_128x128_s3", P_TF32X3, 3, run_tf32x3<128, 3, 2>, "TMA+wgmma m64n128k8, 3 stages, split pre-pass, per-k-tile FP32 promotion (wait 0, FADD)"});
  v.push_back({"wg_tf32x3p_128x192_s2", P_TF32X3, 3, run_tf32x3<192, 2, 2>, "TMA+wgmma m64n192k8, 2 stages, split pre-pass, per-k-tile FP32 promotion (wait 0, FADD)"});
  v.push_back({"wg_tf32x3pp_128x128_s3", P_TF32X3, 3, run_tf32x3<128, 3, 1>, "TMA+wgmma m64n128k8, 3 stages, split pre-pass, per-k-tile promotion, ping-pong partials (ptxas serializes: C7514)"});
  v.push_back({"wg_tf32x3_prep_only", P_TF32X3, 3, run_tf32x3<128, 3, 0, true>, "timing of the split pre-pass alone (output unwritten)"});
  v.push_back({"wg_tf32_prep_only", P_TF32, 1, run_tf32<256, 4, true>, "timing of the B^T pre-pass alone (output unwritten)"});
  v.push_back({"wg_tf32x3_128x256_s2", P_TF32X3, 3, run_tf32x3<256, 2>, "TMA+wgmma m64n256k8, 2 consumer WGs, 2 stages, split pre-pass"});
  v.push_back({"wg_tf32x3_128x128_s3", P_TF32X3, 3, run_tf32x3<128, 3>, "TMA+wgmma m64n128k8, 2 consumer WGs, 3 stages, split pre-pass"});
  v.push_back({"wg_tf32x3_128x192_s2", P_TF32X3, 3, run_tf32x3<192, 2>, "TMA+wgmma m64n192k8, 2 consumer WGs, 2 stages, split pre-pass"});
  v.push_back({"wg_tf32_128x256_s4", P_TF32, 3, run_tf32<256, 4>, "TMA+wgmma m64n256k8, 4 stages, B^T pre-pass for NN"});
  v.push_back({"wg_tf32_128x128_s6", P_TF32, 3, run_tf32<128, 6>, "TMA+wgmma m64n128k8, 6 stages, B^T pre-pass for NN"});
  v.push_back({"wg_tf32_128x192_s5", P_TF32, 3, run_tf32<192, 5>, "TMA+wgmma m64n192k8, 5 stages, B^T pre-pass for NN"});
}
