// libFuzzer target: the ir3 container reader on arbitrary bytes. Parsing either throws
// InvalidInput or yields kernels whose arguments lie inside their argument block, whose
// immediates and arguments fit the constant file, whose UAV bindings (version 2) name buffer
// arguments, one per UAV slot, and which write back (write_ir3) to a file that parses to the
// same kernels and bindings; laying the module out (place_ir3) stays inside its total.
#include <cstdint>
#include <cstdlib>

#include "core/error.hpp"
#include "qcom/ir3_program.hpp"
#include "qcom/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  hcq::qcom::Ir3Module m;
  try {
    m = hcq::qcom::parse_ir3(file);
  } catch (const hcq::InvalidInput&) {
    return 0;
  }
  for (const auto& k : m.kernels) {
    if (k.args_bytes && uint64_t(k.args_offset) + k.args_bytes > uint64_t(k.const_dwords) * 4)
      std::abort();  // an empty argument block has no place to check
    for (const auto& a : k.args)
      if (a.size == 0 || uint64_t(a.offset) + a.size > k.args_bytes) std::abort();
    if (k.uav_count > 127 || (m.version == 2 && k.uavs.size() != k.uav_count) ||
        (m.version == 1 && !k.uavs.empty()))
      std::abort();
    for (const auto& u : k.uavs)
      if (u.arg >= k.args.size() || k.args[u.arg].kind != hcq::KernelArg::Kind::Buffer ||
          u.format > hcq::qcom::Ir3UavFormat::U8)
        std::abort();
  }
  uint64_t total = 0;
  const auto places = hcq::qcom::place_ir3(m, size, total);
  for (size_t i = 0; i < m.kernels.size(); i++)
    if (places[i].code + m.kernels[i].instructions.size() * 4 > total) std::abort();
  const auto again = hcq::qcom::parse_ir3(hcq::qcom::write_ir3(m));  // must not throw
  if (again.kernels.size() != m.kernels.size() || again.family != m.family ||
      again.version != m.version)
    std::abort();
  for (size_t i = 0; i < m.kernels.size(); i++)
    if (again.kernels[i].name != m.kernels[i].name ||
        again.kernels[i].instructions != m.kernels[i].instructions ||
        again.kernels[i].args.size() != m.kernels[i].args.size() ||
        again.kernels[i].uavs.size() != m.kernels[i].uavs.size())
      std::abort();
  return 0;
}
