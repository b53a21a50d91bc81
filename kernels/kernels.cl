// Kernels for the hcq demo and tests, OpenCL C for amdgcn-amd-amdhsa, built without device
// libraries (-nogpulib).
//
// Conventions (the CPU implementations in cpu_kernels.cpp follow them exactly):
// * Grids are 1-D. The global id is workgroup_id_x * block + workitem_id_x, in 32-bit unsigned
//   arithmetic, where `block` is the LAST kernel argument and must equal the launch's
//   workgroup size in x. OpenCL's get_global_id()/get_local_size() are not used: without
//   device libraries they stay undefined symbols and do not link, and the workgroup size
//   is only available through the dispatch packet (an AQL concept; a PM4 dispatch has none).
// * Only __builtin_amdgcn_workgroup_id_x() and __builtin_amdgcn_workitem_id_x() are read, so
//   at -O2 the kernels need just the kernarg segment pointer and workgroup id X (no dispatch
//   or queue pointer, no hidden arguments).
// * Threads whose global id is >= n do nothing.

static inline uint global_id_x(uint block) {
  return __builtin_amdgcn_workgroup_id_x() * block + __builtin_amdgcn_workitem_id_x();
}

__kernel void empty(void) {}

__kernel void fill_u32(__global uint* dst, uint value, uint n, uint block) {
  uint i = global_id_x(block);
  if (i < n) dst[i] = value;
}

__kernel void vector_add(__global const float* a, __global const float* b, __global float* c,
                         uint n, uint block) {
  uint i = global_id_x(block);
  if (i < n) c[i] = a[i] + b[i];
}

// x[i] = a * x[i] + b
__kernel void scale_add(__global float* x, float a, float b, uint n, uint block) {
  uint i = global_id_x(block);
  if (i < n) x[i] = a * x[i] + b;
}

// dst[i] = src[i] for byte i < n: what the batch compiler launches to copy on a device without
// a copy queue (Schedule::CompileOptions::copy_kernels).
__kernel void copy_bytes(__global uchar* dst, __global const uchar* src, uint n, uint block) {
  uint i = global_id_x(block);
  if (i < n) dst[i] = src[i];
}

// Work-item 0 of workgroup 0 waits until *flag is nonzero; every other work-item returns.
// For tests of queue blocking: the host (or another queue) releases it by writing the flag.
__kernel void spin_until(__global volatile uint* flag) {
  if (__builtin_amdgcn_workgroup_id_x() != 0 || __builtin_amdgcn_workitem_id_x() != 0) return;
  while (*flag == 0) __builtin_amdgcn_s_sleep(1);
}
