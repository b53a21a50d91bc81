#include "amd/program_image.hpp"

#include <algorithm>
#include <memory>

#include "amd/code_object.hpp"
#include "amd/encoders.hpp"
#include "amd/targets.hpp"
#include "core/error.hpp"

namespace hcq::amd {

ProgramLayout amd_program_layout(const DeviceProperties& props, std::span<const std::byte> image) {
  auto co = std::make_shared<const CodeObject>(CodeObject::parse(image));
  const auto& arch = props.arch;
  if (co->target() != arch)
    throw InvalidInput(props.name + ": code object is built for " + co->target() +
                       ", the device is " + arch);
  const Target* t = find_target(arch);
  const Gen gen = t ? t->gen : Gen::Gfx11;
  ProgramLayout l;
  l.vendor = "AMD";
  l.size = co->image_bytes();
  // The loaded image keeps its ELF header at the start: the emulated GPU (like a debugger)
  // finds kernels by walking the loaded dynamic symbol table. load() writes the whole image,
  // its relocations resolved for the address it got.
  l.relocate = [co](std::span<std::byte> laid, uint64_t va) { co->load(laid.data(), va); };
  for (auto& k : co->kernels()) {
    // Launches provide the kernarg pointer only: no dispatch packet, queue or scratch.
    constexpr uint16_t kDispatchPtr = 1u << 1, kQueuePtr = 1u << 2;
    std::string why;
    if (k.kd.kernel_code_properties & (kDispatchPtr | kQueuePtr))
      why = "needs a dispatch or queue pointer";
    else if (k.scratch_bytes || k.kd.private_segment_fixed_size)
      why = "needs scratch memory";
    auto obj = std::make_shared<AmdKernel>();
    obj->name = k.name;
    obj->descriptor_va = k.descriptor_offset;
    obj->code_va = obj->descriptor_va + uint64_t(k.kd.kernel_code_entry_byte_offset);
    obj->kd = k.kd;
    obj->kernarg_size = k.kernarg_size;
    obj->kernarg_align = std::max<uint32_t>(16, k.kernarg_align);
    obj->lds_bytes = k.lds_bytes;
    obj->scratch_bytes = k.scratch_bytes;
    obj->wave_size = k.wave_size;
    obj->args = k.args;
    l.kernels.push_back({std::move(obj), why});
  }
  l.place = [gen](KernelObject& kernel, uint64_t va) {
    auto& k = static_cast<AmdKernel&>(kernel);
    k.descriptor_va += va;
    k.code_va += va;
    Pm4Encoder(gen, {}).prepare(k);
  };
  return l;
}

}  // namespace hcq::amd
