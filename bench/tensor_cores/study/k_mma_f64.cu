// k_mma_f64.cu - mma.sync f64 (m8n8k4 and the sm_90 shapes m16n8k4 / m16n8k8 / m16n8k16)
#include "mma_gemm.cuh"
using namespace ms;
void register_mma_f64(std::vector<Variant>& v) {
  v.push_back({"ms_f64k4_128x128x16_w64x32_s3", P_F64, 3, run<double, F64K4, 128, 128, 16, 64, 32, 3, 1>, "mma.sync m16n8k4 f64, 8 warps, warp 64x32, BK16, 3 stages"});
  v.push_back({"ms_f64k8_128x128x16_w64x32_s3", P_F64, 3, run<double, F64K8, 128, 128, 16, 64, 32, 3, 1>, "mma.sync m16n8k8 f64, 8 warps, warp 64x32, BK16, 3 stages"});
  v.push_back({"ms_f64k16_128x128x16_w64x32_s3", P_F64, 3, run<double, F64K16, 128, 128, 16, 64, 32, 3, 1>, "mma.sync m16n8k16 f64, 8 warps, warp 64x32, BK16, 3 stages"});
  v.push_back({"ms_f64k8_128x128x16_w32x64_s4", P_F64, 3, run<double, F64K8, 128, 128, 16, 32, 64, 4, 1>, "mma.sync m16n8k8 f64, 8 warps, warp 32x64, BK16, 4 stages"});
  v.push_back({"ms_f64k8_64x128x16_w32x64_s4", P_F64, 3, run<double, F64K8, 64, 128, 16, 32, 64, 4, 2>, "mma.sync m16n8k8 f64, 4 warps, warp 32x64, BK16, 4 stages, 2 CTA/SM"});
  v.push_back({"ms_f64k8_128x128x32_w64x32_s3", P_F64, 3, run<double, F64K8, 128, 128, 32, 64, 32, 3, 1>, "mma.sync m16n8k8 f64, 8 warps, warp 64x32, BK32, 3 stages"});
  v.push_back({"ms_f64_884_128x128x16_w64x32_s3", P_F64, 3, run<double, F64_884, 128, 128, 16, 64, 32, 3, 1>, "mma.sync m8n8k4 f64, 8 warps, warp 64x32, BK16, 3 stages"});
}
