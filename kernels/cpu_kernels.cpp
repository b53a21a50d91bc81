// CPU implementations of kernels/kernels.cl for the emulated GPUs. Each one does what the GPU
// code does, work-item by work-item: the same 32-bit global id arithmetic, the same `i < n`
// guard, arguments read at the offsets the code object metadata gives (checked by
// tests/amd/code_object_test.cpp), and every memory access translated through the dispatch's
// address space so an access outside a mapping faults as it would on the GPU.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>

#include "emu/kernels.hpp"
#include "kernels.hpp"

namespace hcq::kernels {
namespace {

// Kernel argument offsets: OpenCL C kernarg layout (each argument at its natural alignment,
// pointers 8 bytes), as the compiler's metadata reports it.
namespace fill_u32_args {
constexpr uint32_t dst = 0, value = 8, n = 12, block = 16;
}
namespace vector_add_args {
constexpr uint32_t a = 0, b = 8, c = 16, n = 24, block = 28;
}
namespace scale_add_args {
constexpr uint32_t x = 0, a = 8, b = 12, n = 16, block = 20;
}
namespace copy_bytes_args {
constexpr uint32_t dst = 0, src = 8, n = 16, block = 20;
}
namespace spin_until_args {
constexpr uint32_t flag = 0;
}

// Visits the global ids the dispatch's work-items compute (workgroup_id_x * block +
// workitem_id_x, wrapping at 2^32 as the GPU's 32-bit arithmetic does) that pass `i < n`, as
// runs of consecutive ids: fn(first, count). The kernels only read the x ids, so work-items that
// differ only in y or z repeat the same ids, as they do on the GPU.
template <class Fn>
void for_each_run(const emu::Dispatch& d, uint32_t block, uint32_t n, Fn&& fn) {
  const uint64_t repeats = uint64_t{d.grid.y} * d.grid.z * d.block.y * d.block.z;
  for (uint64_t r = 0; r < repeats; ++r)
    for (uint32_t wg = 0; wg < d.grid.x; ++wg) {
      const uint32_t base = wg * block;
      uint32_t first = 0, count = 0;
      for (uint32_t t = 0; t < d.block.x; ++t) {
        const uint32_t i = base + t;
        if (i < n && count && i == first + count) {
          ++count;
          continue;
        }
        if (count) fn(first, count);
        count = 0;
        if (i < n) {
          first = i;
          count = 1;
        }
      }
      if (count) fn(first, count);
    }
}

// Element i of an array of T at GPU address `va` (64-bit address arithmetic, as on the GPU).
uint64_t element_va(uint64_t va, uint32_t i, uint64_t elem) { return va + uint64_t{i} * elem; }

void empty(const emu::Dispatch&) {}

void copy_bytes(const emu::Dispatch& d) {
  using namespace copy_bytes_args;
  const uint64_t to = d.arg<uint64_t>(dst), from = d.arg<uint64_t>(src);
  for_each_run(d, d.arg<uint32_t>(block), d.arg<uint32_t>(n), [&](uint32_t first, uint32_t count) {
    const auto* s = d.ptr<uint8_t>(element_va(from, first, 1), count);
    auto* t = d.ptr<uint8_t>(element_va(to, first, 1), count);
    std::memmove(t, s, count);
  });
}

void fill_u32(const emu::Dispatch& d) {
  using namespace fill_u32_args;
  const uint64_t va = d.arg<uint64_t>(dst);
  const uint32_t v = d.arg<uint32_t>(value);
  for_each_run(d, d.arg<uint32_t>(block), d.arg<uint32_t>(n), [&](uint32_t first, uint32_t count) {
    uint32_t* p = d.ptr<uint32_t>(element_va(va, first, 4), count);
    for (uint32_t k = 0; k < count; ++k) p[k] = v;
  });
}

void vector_add(const emu::Dispatch& d) {
  using namespace vector_add_args;
  const uint64_t va = d.arg<uint64_t>(a), vb = d.arg<uint64_t>(b), vc = d.arg<uint64_t>(c);
  for_each_run(d, d.arg<uint32_t>(block), d.arg<uint32_t>(n), [&](uint32_t first, uint32_t count) {
    const float* pa = d.ptr<const float>(element_va(va, first, 4), count);
    const float* pb = d.ptr<const float>(element_va(vb, first, 4), count);
    float* pc = d.ptr<float>(element_va(vc, first, 4), count);
    for (uint32_t k = 0; k < count; ++k) pc[k] = pa[k] + pb[k];
  });
}

// vector_add whose shader reaches a, b and c through UAVs 0, 1 and 2 (an Adreno-only ir3
// kernel, kernels/make_ir3.py): the buffers come from the descriptors the launch bound, not
// from the address arguments, which the shader does not read.
void vector_add_uav(const emu::Dispatch& d) {
  using namespace vector_add_args;
  for_each_run(d, d.arg<uint32_t>(block), d.arg<uint32_t>(n), [&](uint32_t first, uint32_t count) {
    const float* pa = d.uav<const float>(0, first, count);
    const float* pb = d.uav<const float>(1, first, count);
    float* pc = d.uav<float>(2, first, count);
    for (uint32_t k = 0; k < count; ++k) pc[k] = pa[k] + pb[k];
  });
}

void scale_add(const emu::Dispatch& d) {
  using namespace scale_add_args;
  const uint64_t vx = d.arg<uint64_t>(x);
  const float fa = d.arg<float>(a), fb = d.arg<float>(b);
  for_each_run(d, d.arg<uint32_t>(block), d.arg<uint32_t>(n), [&](uint32_t first, uint32_t count) {
    float* px = d.ptr<float>(element_va(vx, first, 4), count);
    // OpenCL contracts a * x + b; every target we build emits v_fma_f32 for it (checked with
    // llvm-objdump), so the CPU uses a fused multiply-add too and the results match bit for bit.
    for (uint32_t k = 0; k < count; ++k) px[k] = std::fma(fa, px[k], fb);
  });
}

void spin_until(const emu::Dispatch& d) {
  using namespace spin_until_args;
  // Only work-item 0 of workgroup 0 waits; it exists whenever anything runs at all.
  if (d.grid.count() == 0 || d.block.count() == 0) return;
  const uint64_t va = d.arg<uint64_t>(flag);
  if (va % 4) throw emu::Fault("spin_until: flag address is not 4-byte aligned", va);
  const uint32_t* p = d.ptr<const uint32_t>(va, 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (uint64_t spins = 0;; ++spins) {
    if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != 0) return;
    // The emulated GPU is being torn down (or the queue removed): a real GPU drops the wave.
    if (d.abandoned())
      throw emu::Fault("spin_until: abandoned: the GPU or its queue is being destroyed", va);
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (std::chrono::steady_clock::now() > deadline)
        throw emu::Fault("spin_until: the flag at this address stayed 0 for 30 s", va);
    }
  }
}

}  // namespace

void register_cpu_implementations() {
  emu::register_kernel("empty", empty);
  emu::register_kernel("fill_u32", fill_u32);
  emu::register_kernel("vector_add", vector_add);
  emu::register_kernel("vector_add_uav", vector_add_uav);
  emu::register_kernel("scale_add", scale_add);
  emu::register_kernel("spin_until", spin_until);
  emu::register_kernel("copy_bytes", copy_bytes);
}

}  // namespace hcq::kernels
