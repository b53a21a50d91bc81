// The kernels of kernels.cl in CUDA C++, compiled by nvcc to one cubin per sm target
// (kernels/meson.build) and loaded by drivers/nv/cubin.cpp. Same names (extern "C", so the
// ELF symbols are unmangled), same signatures, same semantics.
//
// Conventions (as kernels.cl's; the CPU implementations in cpu_kernels.cpp follow them exactly):
// * Grids are 1-D. The global id is blockIdx.x * block + threadIdx.x, in 32-bit unsigned
//   arithmetic, where `block` is the LAST kernel argument and must equal the launch's block
//   size in x. blockDim is not read, so the kernels do not depend on the launch's QMD/constant
//   bank carrying it.
// * Threads whose global id is >= n do nothing.
// * Parameters sit in the parameter block at the offsets the OpenCL kernarg layout gives
//   (pointers 8 bytes, unsigned int / float 4 bytes, each at its natural alignment), which is
//   also the CUDA ABI's layout; tests/nv/cubin_test.cpp checks it against the cubin's
//   .nv.info records.

__device__ __forceinline__ unsigned int global_id_x(unsigned int block) {
  return blockIdx.x * block + threadIdx.x;
}

extern "C" __global__ void empty() {}

extern "C" __global__ void fill_u32(unsigned int* dst, unsigned int value, unsigned int n,
                                    unsigned int block) {
  const unsigned int i = global_id_x(block);
  if (i < n) dst[i] = value;
}

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, unsigned int n,
                                      unsigned int block) {
  const unsigned int i = global_id_x(block);
  if (i < n) c[i] = a[i] + b[i];
}

// x[i] = a * x[i] + b (nvcc contracts this to one FFMA, as clang does to v_fma_f32; the CPU
// twin uses std::fma).
extern "C" __global__ void scale_add(float* x, float a, float b, unsigned int n,
                                     unsigned int block) {
  const unsigned int i = global_id_x(block);
  if (i < n) x[i] = a * x[i] + b;
}

// dst[i] = src[i] for byte i < n (the batch compiler's kernel copies).
extern "C" __global__ void copy_bytes(unsigned char* dst, const unsigned char* src,
                                      unsigned int n, unsigned int block) {
  const unsigned int i = global_id_x(block);
  if (i < n) dst[i] = src[i];
}

// Thread 0 of block 0 waits until *flag is nonzero; every other thread returns. For tests of
// queue blocking: the host (or another queue) releases it by writing the flag.
extern "C" __global__ void spin_until(volatile unsigned int* flag) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  while (*flag == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(100);
#endif
  }
}
