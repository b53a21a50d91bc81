// The kernels hcq's demo and tests launch (kernels/kernels.cl), embedded as AMDHSA code objects
// for every target a compiler was found for at build time, plus CPU implementations of the
// same kernels for the emulated GPUs.
//
// Kernel signatures (OpenCL C). 1-D grids; each work-item handles global id
//   i = workgroup_id_x * block + workitem_id_x   (32-bit unsigned arithmetic)
// where `block` is the last argument and must equal the workgroup size in x. Work-items with
// i >= n do nothing. The block size is an argument because a kernel can only read it from the
// dispatch packet (a dispatch pointer, an AQL concept), which a PM4 dispatch does not provide.
//   empty()
//   fill_u32(global uint* dst, uint value, uint n, uint block)                 dst[i] = value
//   vector_add(global const float* a, global const float* b, global float* c,
//              uint n, uint block)                                             c[i] = a[i] + b[i]
//   scale_add(global float* x, float a, float b, uint n, uint block)          x[i] = a*x[i] + b
//   spin_until(global volatile uint* flag)   work-item 0 of workgroup 0 waits until *flag != 0
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace hcq::kernels {

// The code object built for `target` ("gfx1100"); empty when none was built for it.
std::span<const std::byte> code_object(const std::string& target);
// The targets code objects were built for, in build order.
std::vector<std::string> built_targets();
// Registers the CPU implementation of every kernel above under its name with
// hcq::emu::register_kernel. Idempotent.
void register_cpu_implementations();

}  // namespace hcq::kernels
