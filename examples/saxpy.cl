// The example's kernel, OpenCL C for amdgcn-amd-amdhsa, built with the flags of
// kernels/meson.build (no ROCm device libraries: -nogpulib).
//
// y[i] = a * x[i] + y[i] for i = workgroup_id_x * block + workitem_id_x < n. The global id is
// computed from the workgroup and work-item ids because get_global_id() needs the device
// libraries, and the workgroup size is an argument (`block`, equal to the launch's workgroup
// size in x) because a PM4 dispatch gives the kernel no dispatch packet to read it from.
__kernel void saxpy(__global const float* x, __global float* y, float a, uint n, uint block) {
  uint i = __builtin_amdgcn_workgroup_id_x() * block + __builtin_amdgcn_workitem_id_x();
  if (i < n) y[i] = a * x[i] + y[i];
}
