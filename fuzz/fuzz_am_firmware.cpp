// libFuzzer target: the amdgpu firmware container reader on arbitrary bytes. The first byte
// picks the kind (its low nibble, one of the nine gfx1100 file names), whether the rest goes
// through the zstd path (0x10), and whether size_bytes is set to the input's size first
// (0x20) so that inputs get past the first check into the per-kind layouts. Parsing either
// throws hcq::InvalidInput or gives parts that all lie inside the file; the name parser gets
// the same bytes as a file name.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "amd/am/firmware.hpp"
#include "core/error.hpp"

using namespace hcq::amd::am;

// A lower limit than the files' own keeps zstd bombs from slowing the run down; the limit
// check itself is the same code.
constexpr size_t kFuzzMaxBytes = 1 << 20;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t control = data[0];
  std::vector<uint8_t> bytes(data + 1, data + size);

  try {
    parse_firmware_name(std::string(bytes.begin(), bytes.end()));
  } catch (const hcq::InvalidInput&) {
  }

  auto names = gfx1100_firmware_names();
  const std::string& file = names[(control & 0x0f) % names.size()];
  std::string path = "/fuzz/" + file;
  if (control & 0x10) {
    path += ".zst";
    try {
      bytes = zstd_decompress(bytes, path, kFuzzMaxBytes);
    } catch (const hcq::InvalidInput&) {
      return 0;
    }
    if (bytes.size() > kFuzzMaxBytes) std::abort();
  }
  if ((control & 0x20) && bytes.size() >= 4) {
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(bytes.size() >> (8 * i));
  }
  size_t file_size = bytes.size();
  Firmware fw;
  try {
    fw = parse_firmware(std::move(bytes), parse_firmware_name(file), path);
  } catch (const hcq::InvalidInput&) {
    return 0;
  }
  if (fw.bytes.size() != file_size || fw.path != path) std::abort();
  for (auto& p : fw.parts) {
    if (p.offset > file_size || p.size > file_size - p.offset) std::abort();
    auto span = fw.data(p);
    if (span.size() != p.size) std::abort();
  }
  return 0;
}
