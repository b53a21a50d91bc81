// The example's kernel in CUDA C++ for NVIDIA GPUs: nvcc -cubin -arch=sm_XX. extern "C" keeps
// the symbol unmangled, so the kernel is found by the name "saxpy". Same arguments and layout
// as saxpy.cl (pointers 8 bytes, float and unsigned int 4 bytes, each at its natural alignment).
extern "C" __global__ void saxpy(const float* x, float* y, float a, unsigned int n,
                                 unsigned int block) {
  const unsigned int i = blockIdx.x * block + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
