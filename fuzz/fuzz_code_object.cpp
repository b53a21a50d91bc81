// libFuzzer target: the AMDHSA code object loader (ELF reader, kernel descriptors, metadata
// note) on arbitrary bytes. Parsing either throws InvalidInput or yields an object that loads
// into an image of image_bytes() and in which find_kernel_at stays inside that image (ASan
// reports any read or write outside it).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "amd/code_object.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto co = hcq::amd::CodeObject::parse(file);
    if (co.kernels().empty()) std::abort();  // parse promises at least one
    if (co.image_bytes() > (64u << 20)) return 0;
    std::vector<std::byte> image(co.image_bytes());
    co.load(image.data(), 0x100000000ull);
    for (const auto& k : co.kernels()) {
      std::string name;
      hcq::amd::KernelDescriptor kd;
      hcq::amd::find_kernel_at(image.data(), image.size(),
                               k.descriptor_offset + k.kd.kernel_code_entry_byte_offset, name, kd);
    }
  } catch (const hcq::InvalidInput&) {
  }
  return 0;
}
