#include "nv/rm_program.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/program.hpp"
#include "nv/cubin.hpp"
#include "nv/encoders.hpp"
#include "nv/rm_device.hpp"
#include "nv/targets.hpp"

namespace hcq::nv {
namespace {

class NvProgramImage final : public KernelTable<NvKernel> {
 public:
  NvProgramImage(Device& dev, RmDriver& drv, std::span<const std::byte> file)
      : KernelTable("NVIDIA") {
    Cubin c = parse_cubin(file);
    const auto& arch = dev.properties().arch;
    const std::string built = "sm_" + std::to_string(c.sm);
    if (built != arch)
      throw InvalidInput(dev.name() + ": cubin is built for " + built + ", the device is " + arch);
    // The whole file is loaded as-is (the emulated GPU, like a debugger, finds kernels by
    // parsing the ELF at the start of the mapping), then relocated in place.
    memory_ = dev.allocate(std::max<uint64_t>(c.image_bytes, 1), MemoryKind::Device, true);
    if (memory_.va() % std::max<uint64_t>(c.base_alignment, 256))
      throw Error(dev.name() + ": code memory at " + hex(memory_.va()) + " is not aligned to " +
                  std::to_string(c.base_alignment));
    std::vector<std::byte> laid(c.image_bytes);
    std::copy(file.begin(), file.end(), laid.begin());
    apply_relocations(c, laid, memory_.va());
    if (memory_.host())
      std::memcpy(memory_.host(), laid.data(), laid.size());
    else
      dev.copy_in(memory_, 0, laid.data(), laid.size());
    dev.synchronize();
    const ComputeEncoder enc(drv.qmd_version());
    const auto driver_words = cbuf0_driver_words(drv.gen(), kSharedWindow, kLocalWindow);
    for (const CubinKernel& k : c.kernels) {
      if (k.local_bytes) {
        unsupported_[k.name] = "needs " + std::to_string(k.local_bytes) +
                               " bytes of local memory per thread";
        continue;
      }
      auto obj = std::make_shared<NvKernel>();
      obj->name = k.name;
      obj->code_va = memory_.va() + k.code_offset;
      obj->code_bytes = k.code_size;
      obj->sm = c.sm;
      obj->registers = k.registers;
      obj->barriers = k.barriers;
      obj->shared_bytes = k.shared_bytes;
      obj->lds_bytes = k.shared_bytes;
      obj->param_base = k.param_base;
      obj->cbuf0_bytes = uint32_t(align_up(std::max<uint64_t>(k.param_base + k.param_bytes,
                                                               driver_words.size()), 16));
      const uint32_t cbuf = cbuf0_offset(drv.qmd_version());
      obj->kernarg_size = cbuf + obj->cbuf0_bytes;
      obj->kernarg_align = 256;  // the QMD is sent as its address >> 8
      obj->kernarg_init.assign(cbuf, std::byte{0});
      obj->kernarg_init.insert(obj->kernarg_init.end(), driver_words.begin(), driver_words.end());
      for (const CubinParam& p : k.params) {
        KernelArg a;
        a.name = "param" + std::to_string(p.ordinal);
        a.offset = cbuf + k.param_base + p.offset;
        a.size = p.size;
        a.kind = KernelArg::Kind::Bytes;  // a cubin does not say which are pointers
        obj->args.push_back(a);
      }
      enc.prepare(*obj);
      kernels_[k.name] = std::move(obj);
    }
  }


 private:
  Buffer memory_;
};

}  // namespace

std::unique_ptr<ProgramImage> load_cubin_image(Device& dev, RmDriver& drv,
                                               std::span<const std::byte> file) {
  return std::make_unique<NvProgramImage>(dev, drv, file);
}

}  // namespace hcq::nv
