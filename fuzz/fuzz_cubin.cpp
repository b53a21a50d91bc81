// libFuzzer target: the cubin loader on arbitrary bytes. Parsing either throws InvalidInput
// or yields kernels whose code lies inside the file, and relocating for any base either
// throws InvalidInput or patches only inside the image.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.hpp"
#include "nv/cubin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  hcq::nv::Cubin c;
  try {
    c = hcq::nv::parse_cubin(file);
  } catch (const hcq::InvalidInput&) {
    return 0;
  }
  for (auto& k : c.kernels)
    if (k.code_offset > size || k.code_size > size - k.code_offset) std::abort();
  if (c.image_bytes < size || c.image_bytes > (1ull << 32)) return 0;
  std::vector<std::byte> image(c.image_bytes);
  std::copy(file.begin(), file.end(), image.begin());
  for (uint64_t base : {0x1000ull, 0x7f0000000000ull}) {
    try {
      hcq::nv::apply_relocations(c, image, base);
    } catch (const hcq::InvalidInput&) {
    }
  }
  return 0;
}
