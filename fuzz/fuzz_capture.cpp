// libFuzzer target: the capture reader on arbitrary files. It must read them or throw
// hcq::InvalidInput; nothing else.
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "core/capture.hpp"
#include "core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/hcq_fuzz_capture_" + std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    hcq::capture::Reader r(path);
    while (r.next()) {
    }
  } catch (const hcq::InvalidInput&) {
  }
  return 0;
}
