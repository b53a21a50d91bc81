// Loading AMDHSA code objects onto a KFD device (drivers/amd side of Program).
#include <cstring>
#include <map>

#include "amd/code_object.hpp"
#include "amd/encoders.hpp"
#include "amd/kfd_driver.hpp"
#include "amd/targets.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

namespace hcq::amd {
namespace {

Gen target_gen(const Device& dev) {
  const Target* t = find_target(dev.properties().arch);
  return t ? t->gen : Gen::Gfx11;
}

class AmdProgramImage final : public KernelTable<AmdKernel> {
 public:
  AmdProgramImage(Device& dev, std::span<const std::byte> image) : KernelTable("AMD") {
    CodeObject co = CodeObject::parse(image);
    const auto& arch = dev.properties().arch;
    if (co.target() != arch)
      throw InvalidInput(dev.name() + ": code object is built for " + co.target() +
                         ", the device is " + arch);
    // The loaded image keeps its ELF header at the start: the emulated GPU (like a debugger)
    // finds kernels by walking the loaded dynamic symbol table.
    memory_ = dev.allocate(co.image_bytes(), MemoryKind::Device, true);
    std::vector<std::byte> laid(co.image_bytes());
    co.load(laid.data(), memory_.va());
    if (memory_.host())
      std::memcpy(memory_.host(), laid.data(), laid.size());
    else
      dev.copy_in(memory_, 0, laid.data(), laid.size());
    dev.synchronize();
    for (auto& k : co.kernels()) {
      // Launches provide the kernarg pointer only: no dispatch packet, queue or scratch.
      constexpr uint16_t kDispatchPtr = 1u << 1, kQueuePtr = 1u << 2;
      std::string why;
      if (k.kd.kernel_code_properties & (kDispatchPtr | kQueuePtr))
        why = "needs a dispatch or queue pointer";
      else if (k.scratch_bytes || k.kd.private_segment_fixed_size)
        why = "needs scratch memory";
      auto obj = std::make_shared<AmdKernel>();
      obj->name = k.name;
      obj->descriptor_va = memory_.va() + k.descriptor_offset;
      obj->code_va = obj->descriptor_va + uint64_t(k.kd.kernel_code_entry_byte_offset);
      obj->kd = k.kd;
      obj->kernarg_size = k.kernarg_size;
      obj->kernarg_align = std::max<uint32_t>(16, k.kernarg_align);
      obj->lds_bytes = k.lds_bytes;
      obj->scratch_bytes = k.scratch_bytes;
      obj->wave_size = k.wave_size;
      obj->args = k.args;
      Pm4Encoder(target_gen(dev), {}).prepare(*obj);
      if (!why.empty()) {
        unsupported_[k.name] = why;
        continue;
      }
      kernels_[k.name] = std::move(obj);
    }
  }


 private:
  Buffer memory_;
};

}  // namespace

std::unique_ptr<ProgramImage> load_amd_program(Device& dev, std::span<const std::byte> image) {
  return std::make_unique<AmdProgramImage>(dev, image);
}

}  // namespace hcq::amd
