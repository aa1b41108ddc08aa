/*
 * fake_cudart: a stand-in CUDA runtime (libcudart.so.N) for testing the
 * nccl-allreduce client's own logic without a GPU (nccl_fake.sh): one
 * "device", whose memory is host memory, streams that are always idle.  Only
 * the entry points the client calls.
 */
#include "config.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

static int fake_stream;

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = getenv("FAKE_CUDART_NO_GPU") ? 0 : 1;
	return *count ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

const char *cudaGetErrorString(cudaError_t error)
{
	return error == cudaSuccess ? "no error" : "fake_cudart error";
}

cudaError_t cudaMalloc(void **p, size_t size)
{
	*p = malloc(size ? size : 1);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	(void)kind;
	memcpy(dst, src, count);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t count)
{
	memset(p, value, count);
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	*s = (cudaStream_t)(void *)&fake_stream;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return s ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
