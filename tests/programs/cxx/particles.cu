// particles.cu: one explicit Euler step for particles stored two ways: an array of structs (Particle *p,
// p[i].x) and a struct of arrays passed by value (ParticlesSoA s, s.x[i]). Both must give the same positions.
//
//   ./particles [n]             prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

struct Particle {
    float x, y, z;
    float vx, vy, vz;
};

struct ParticlesSoA {
    float *x, *y, *z;
    const float *vx, *vy, *vz;
};

__global__ void drift_aos(Particle *p, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i].x += p[i].vx * dt;
        p[i].y += p[i].vy * dt;
        p[i].z += p[i].vz * dt;
    }
}

__global__ void drift_soa(ParticlesSoA s, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        s.x[i] += s.vx[i] * dt;
        s.y[i] += s.vy[i] * dt;
        s.z[i] += s.vz[i] * dt;
    }
}

static bool close(float got, float expect)
{
    return std::fabs(got - expect) <= 1e-5f * (1.0f + std::fabs(expect));
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : (1 << 22);
    const float dt = 0.01f;
    Particle *aos = (Particle *)malloc(n * sizeof(Particle));
    float *soa[6];
    for (int c = 0; c < 6; c++)
        soa[c] = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        Particle q = {(float)(i % 100), (float)(i % 37), (float)(i % 11),
                      0.5f * (i % 3), -0.25f * (i % 5), 1.0f};
        aos[i] = q;
        soa[0][i] = q.x; soa[1][i] = q.y; soa[2][i] = q.z;
        soa[3][i] = q.vx; soa[4][i] = q.vy; soa[5][i] = q.vz;
    }

    Particle *d_aos;
    cudaMalloc(&d_aos, n * sizeof(Particle));
    cudaMemcpy(d_aos, aos, n * sizeof(Particle), cudaMemcpyHostToDevice);
    float *d_soa[6];
    for (int c = 0; c < 6; c++) {
        cudaMalloc(&d_soa[c], n * sizeof(float));
        cudaMemcpy(d_soa[c], soa[c], n * sizeof(float), cudaMemcpyHostToDevice);
    }
    ParticlesSoA s = {d_soa[0], d_soa[1], d_soa[2], d_soa[3], d_soa[4], d_soa[5]};

    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    drift_aos<<<(n + 255) / 256, 256>>>(d_aos, dt, n);
    drift_soa<<<(n + 255) / 256, 256>>>(s, dt, n);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);

    Particle *got = (Particle *)malloc(n * sizeof(Particle));
    cudaMemcpy(got, d_aos, n * sizeof(Particle), cudaMemcpyDeviceToHost);
    for (int c = 0; c < 3; c++)
        cudaMemcpy(soa[c], d_soa[c], n * sizeof(float), cudaMemcpyDeviceToHost);
    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < n; i++) {
        float ex = aos[i].x + aos[i].vx * dt, ey = aos[i].y + aos[i].vy * dt, ez = aos[i].z + aos[i].vz * dt;
        if (!close(got[i].x, ex) || !close(got[i].y, ey) || !close(got[i].z, ez))
            fail++;
        if (!close(soa[0][i], ex) || !close(soa[1][i], ey) || !close(soa[2][i], ez))
            fail++;
        checksum += got[i].x + got[i].y + got[i].z + soa[0][i] + soa[1][i] + soa[2][i];
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_aos);
    for (int c = 0; c < 6; c++) {
        cudaFree(d_soa[c]);
        free(soa[c]);
    }
    free(aos);
    free(got);
    return fail > 0;
}
