#include "nv/rm_program.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "nv/cubin.hpp"
#include "nv/encoders.hpp"
#include "nv/rm_device.hpp"
#include "nv/targets.hpp"

namespace hcq::nv {

ProgramLayout cubin_layout(const RmDriver& drv, std::span<const std::byte> file) {
  auto c = std::make_shared<const Cubin>(parse_cubin(file));
  const DeviceProperties& props = drv.properties();
  const std::string built = "sm_" + std::to_string(c->sm);
  if (built != props.arch)
    throw InvalidInput(props.name + ": cubin is built for " + built + ", the device is " +
                       props.arch);
  ProgramLayout l;
  l.vendor = "NVIDIA";
  // The whole file is loaded as-is (the emulated GPU, like a debugger, finds kernels by
  // parsing the ELF at the start of the mapping), then relocated in place.
  l.size = c->image_bytes;
  l.alignment = std::max<uint64_t>(c->base_alignment, 256);
  l.bytes.assign(file.begin(), file.end());
  l.relocate = [c](std::span<std::byte> laid, uint64_t va) { apply_relocations(*c, laid, va); };
  const QmdVersion qmd = drv.qmd_version();
  const auto driver_words = cbuf0_driver_words(drv.gen(), kSharedWindow, kLocalWindow);
  for (const CubinKernel& k : c->kernels) {
    auto obj = std::make_shared<NvKernel>();
    obj->name = k.name;
    if (k.local_bytes) {
      l.kernels.push_back({std::move(obj), "needs " + std::to_string(k.local_bytes) +
                                               " bytes of local memory per thread"});
      continue;
    }
    obj->code_va = k.code_offset;
    obj->code_bytes = k.code_size;
    obj->sm = c->sm;
    obj->registers = k.registers;
    obj->barriers = k.barriers;
    obj->shared_bytes = k.shared_bytes;
    obj->lds_bytes = k.shared_bytes;
    obj->param_base = k.param_base;
    obj->cbuf0_bytes = uint32_t(align_up(std::max<uint64_t>(k.param_base + k.param_bytes,
                                                             driver_words.size()), 16));
    const uint32_t cbuf = cbuf0_offset(qmd);
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
    l.kernels.push_back({std::move(obj), ""});
  }
  l.place = [qmd](KernelObject& kernel, uint64_t va) {
    auto& k = static_cast<NvKernel&>(kernel);
    k.code_va += va;
    ComputeEncoder(qmd).prepare(k);
  };
  return l;
}

}  // namespace hcq::nv
