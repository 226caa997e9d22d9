// ref_helpers.cu: the state of an ideal gas per cell, in the style of a finite-volume Euler solver: small
// __device__ helpers pass values through C++ references (a float3& out-parameter, float& inputs), one of
// them __host__ __device__ and also used by the host's check. Variables are stored per component:
// variables[i + v * nelr].
//
//   ./ref_helpers [nelr]      prints GPU Runtime, the checksum and PASSED / FAILED (exit status 1)
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define GAMMA 1.4f
#define VAR_DENSITY 0
#define VAR_MOMENTUM 1
#define VAR_DENSITY_ENERGY 4
#define NVAR 5
#define BLOCK_SIZE 128
#define REPS 10

__device__ __host__ inline void velocity_of(float& density, float3& momentum, float3& velocity)
{
    velocity.x = momentum.x / density;
    velocity.y = momentum.y / density;
    velocity.z = momentum.z / density;
}

__device__ inline float speed_sqd_of(float3& velocity)
{
    return velocity.x*velocity.x + velocity.y*velocity.y + velocity.z*velocity.z;
}

__device__ inline float pressure_of(float& density, float& density_energy, float& speed_sqd)
{
    return (float(GAMMA) - float(1.0f)) * (density_energy - float(0.5f) * density * speed_sqd);
}

__device__ inline void energy_flux(float& density_energy, float& pressure, float3& velocity, float3& flux)
{
    float de_p = density_energy + pressure;
    flux.x = velocity.x * de_p;
    flux.y = velocity.y * de_p;
    flux.z = velocity.z * de_p;
}

__global__ void step_factor(int nelr, float* variables, float* areas, float* step_factors)
{
    const int i = (blockDim.x*blockIdx.x + threadIdx.x);

    float density = variables[i + VAR_DENSITY*nelr];
    float3 momentum;
    momentum.x = variables[i + (VAR_MOMENTUM+0)*nelr];
    momentum.y = variables[i + (VAR_MOMENTUM+1)*nelr];
    momentum.z = variables[i + (VAR_MOMENTUM+2)*nelr];
    float density_energy = variables[i + VAR_DENSITY_ENERGY*nelr];

    float3 velocity;       velocity_of(density, momentum, velocity);
    float speed_sqd      = speed_sqd_of(velocity);
    float pressure       = pressure_of(density, density_energy, speed_sqd);
    float speed_of_sound = sqrtf(float(GAMMA)*pressure/density);

    step_factors[i] = float(0.5f) / (sqrtf(areas[i]) * (sqrtf(speed_sqd) + speed_of_sound));
}

__global__ void energy_fluxes(int nelr, float* variables, float* fluxes)
{
    const int i = (blockDim.x*blockIdx.x + threadIdx.x);
    if (i < nelr) {
        float density = variables[i + VAR_DENSITY*nelr];
        float3 momentum;
        momentum.x = variables[i + (VAR_MOMENTUM+0)*nelr];
        momentum.y = variables[i + (VAR_MOMENTUM+1)*nelr];
        momentum.z = variables[i + (VAR_MOMENTUM+2)*nelr];
        float density_energy = variables[i + VAR_DENSITY_ENERGY*nelr];

        float3 velocity;  velocity_of(density, momentum, velocity);
        float speed_sqd = speed_sqd_of(velocity);
        float pressure = pressure_of(density, density_energy, speed_sqd);
        float3 flux;      energy_flux(density_energy, pressure, velocity, flux);

        fluxes[i + 0*nelr] = flux.x;
        fluxes[i + 1*nelr] = flux.y;
        fluxes[i + 2*nelr] = flux.z;
    }
}

static float host_state(int i, int v)
{
    float base = 1.0f + 0.001f * (i % 97);
    return v == VAR_DENSITY ? base : v == VAR_DENSITY_ENERGY ? 2.5f * base + 1.0f : 0.1f * v * base;
}

int main(int argc, char *argv[])
{
    int nelr = argc > 1 ? atoi(argv[1]) : (1 << 22);
    nelr = BLOCK_SIZE * ((nelr + BLOCK_SIZE - 1) / BLOCK_SIZE);
    size_t bytes = nelr * sizeof(float);
    float *variables = (float *)malloc(NVAR * bytes), *areas = (float *)malloc(bytes);
    float *steps = (float *)malloc(bytes), *fluxes = (float *)malloc(3 * bytes);
    for (int i = 0; i < nelr; i++) {
        for (int v = 0; v < NVAR; v++)
            variables[i + v * nelr] = host_state(i, v);
        areas[i] = 0.5f + 0.002f * (i % 31);
    }
    float *d_variables, *d_areas, *d_steps, *d_fluxes;
    cudaMalloc(&d_variables, NVAR * bytes);
    cudaMalloc(&d_areas, bytes);
    cudaMalloc(&d_steps, bytes);
    cudaMalloc(&d_fluxes, 3 * bytes);
    cudaMemcpy(d_variables, variables, NVAR * bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_areas, areas, bytes, cudaMemcpyHostToDevice);

    dim3 Dg(nelr / BLOCK_SIZE), Db(BLOCK_SIZE), Dr((nelr + BLOCK_SIZE - 1) / BLOCK_SIZE);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    for (int r = 0; r < REPS; r++) {
        step_factor<<<Dg, Db>>>(nelr, d_variables, d_areas, d_steps);
        energy_fluxes<<<Dr, Db>>>(nelr, d_variables, d_fluxes);
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaMemcpy(steps, d_steps, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(fluxes, d_fluxes, 3 * bytes, cudaMemcpyDeviceToHost);

    int fail = 0;
    double checksum = 0.0;
    for (int i = 0; i < nelr; i++) {
        float density = variables[i], density_energy = variables[i + VAR_DENSITY_ENERGY * nelr];
        float3 momentum = make_float3(variables[i + nelr], variables[i + 2 * nelr], variables[i + 3 * nelr]);
        float3 velocity;
        velocity_of(density, momentum, velocity);      // the __host__ copy of the helper
        float speed_sqd = velocity.x * velocity.x + velocity.y * velocity.y + velocity.z * velocity.z;
        float pressure = (GAMMA - 1.0f) * (density_energy - 0.5f * density * speed_sqd);
        float step = 0.5f / (sqrtf(areas[i]) * (sqrtf(speed_sqd) + sqrtf(GAMMA * pressure / density)));
        float de_p = density_energy + pressure;
        float expect[4] = {step, velocity.x * de_p, velocity.y * de_p, velocity.z * de_p};
        float got[4] = {steps[i], fluxes[i], fluxes[i + nelr], fluxes[i + 2 * nelr]};
        for (int c = 0; c < 4; c++) {
            if (fabsf(got[c] - expect[c]) > 1e-4f * (1.0f + fabsf(expect[c])))
                fail++;
            checksum += got[c];
        }
    }
    printf("GPU Runtime: %0.6lfs\n", ms / 1000.0);
    printf("checksum: %.6e\n", checksum);
    printf("%s (%d mismatches)\n", fail ? "FAILED" : "PASSED", fail);
    cudaFree(d_variables);
    cudaFree(d_areas);
    cudaFree(d_steps);
    cudaFree(d_fluxes);
    free(variables);
    free(areas);
    free(steps);
    free(fluxes);
    return fail > 0;
}
