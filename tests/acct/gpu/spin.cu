/*
 * spin.cu — a GPU job that does not link libgshare (integration level 0),
 * for the NVML estimate check: kernels that spin ~KERNEL_MS each, back to
 * back, for SECONDS of wall time; prints the GPU time its kernels took as
 * measured with CUDA events ("gpu_ms=...").
 *   spin SECONDS [KERNEL_MS]
 */
#include <cstdio>
#include <cstdlib>
#include <ctime>

__global__ void spin(long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
}

#define CK(x)                                                          \
	do {                                                           \
		cudaError_t e_ = (x);                                  \
		if (e_ != cudaSuccess) {                               \
			fprintf(stderr, "%s: %s\n", #x,                \
				cudaGetErrorString(e_));               \
			return 1;                                      \
		}                                                      \
	} while (0)

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 5.0;
	double kms = argc > 2 ? atof(argv[2]) : 10.0;
	int khz, sms;
	cudaEvent_t a, b;
	float ms, total = 0;
	struct timespec t0, t;

	CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >
		    secs)
			break;
		CK(cudaEventRecord(a));
		spin<<<sms, 128>>>((long long)(kms * khz));
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms, a, b));
		total += ms;
	}
	printf("gpu_ms=%.1f wall_s=%.1f\n", total, secs);
	return 0;
}
