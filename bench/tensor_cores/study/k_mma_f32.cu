// k_mma_f32.cu - mma.sync m16n8k8 tf32 / tf32x3 (split on the fly in registers)
#include "mma_gemm.cuh"
using namespace ms;
void register_mma_f32(std::vector<Variant>& v) {
  // tf32x3
  v.push_back({"ms_tf32x3_128x128x32_w64x32_s3", P_TF32X3, 3, run<float, TF32X3, 128, 128, 32, 64, 32, 3, 1>, "mma.sync m16n8k8, 8 warps, warp 64x32, BK32, 3 stages"});
  v.push_back({"ms_tf32x3_128x256x32_w64x64_s3", P_TF32X3, 3, run<float, TF32X3, 128, 256, 32, 64, 64, 3, 1>, "mma.sync m16n8k8, 8 warps, warp 64x64, BK32, 3 stages"});
  v.push_back({"ms_tf32x3_128x128x16_w64x64_s4", P_TF32X3, 3, run<float, TF32X3, 128, 128, 16, 64, 64, 4, 1>, "mma.sync m16n8k8, 4 warps, warp 64x64, BK16, 4 stages"});
  // tf32
  v.push_back({"ms_tf32_128x128x32_w64x32_s3", P_TF32, 3, run<float, TF32, 128, 128, 32, 64, 32, 3, 1>, "mma.sync m16n8k8, 8 warps, warp 64x32, BK32, 3 stages"});
  v.push_back({"ms_tf32_128x256x32_w64x64_s3", P_TF32, 3, run<float, TF32, 128, 256, 32, 64, 64, 3, 1>, "mma.sync m16n8k8, 8 warps, warp 64x64, BK32, 3 stages"});
}
