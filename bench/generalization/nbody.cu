/* nbody.cu -- all-pairs gravitational accelerations: body i sums m_j (p_j - p_i) / (|p_j - p_i|^2 + eps^2)^(3/2)
 * over every body j. pos[j] is (x, y, z, mass). 1-D launch, one thread per body. */
__global__ void nbody_accel(const float4 *pos, float4 *accel, int n, float softening)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        float4 q = pos[j];
        float dx = q.x - p.x;
        float dy = q.y - p.y;
        float dz = q.z - p.z;
        float dist2 = dx * dx + dy * dy + dz * dz + softening * softening;
        float inv = rsqrtf(dist2);
        float s = q.w * inv * inv * inv;
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    accel[i] = make_float4(ax, ay, az, 0.0f);
}
