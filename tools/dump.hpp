// hcq dump: decodes captures (HCQ_CAPTURE) and raw command streams with the drivers'
// decoders, as text or JSON Lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hcq::tools {

// What `hcq dump` was given (tools/hcq.cpp parses the command line).
struct DumpArgs {
  std::string file;  // "-": standard input
  bool json = false;
  std::string raw_format, gen_name, queue, packet, qmd = "v3";
  std::string format = "auto";  // --raw's input: text, binary or auto
  std::string submissions;  // "A:B", "A:", ":B" or "A"; empty: all
  std::string follow;       // --follow NAME: a live ring (HCQ_CAPTURE=shm:NAME), not a file
  uint32_t timeout_ms = 10000;  // --follow: how long to wait for a writer to appear
  // A full capture's buffers (tools/buffers.hpp): --buffers lists them; --buffer ADDR writes
  // one's contents, as recorded before submission --at (default: its last), to --output.
  bool buffers = false;
  std::optional<uint64_t> buffer, at;
  std::optional<uint32_t> device;  // --device: the capture's device number
  std::string output;
};

int cmd_dump(const DumpArgs& args);


}  // namespace hcq::tools
