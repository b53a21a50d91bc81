// `hcq replay FILE [DEVICE]`: a full capture run again on a device of its architecture,
// compared with what it recorded, bisected to its first failing submission (core/replay.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hcq::tools {

struct ReplayArgs {
  std::string file;
  std::string device;  // "" for the capture's own emulated target
  bool compare = false, bisect = false, json = false;
  std::optional<uint64_t> until;
  uint32_t timeout_ms = 5000;
};
// The captured addresses must be free in this process: its libraries and stacks are where
// address randomization put them. Called first thing for `hcq replay`: the process runs
// itself again without randomization (setarch -R), once; where that cannot be done it goes
// on as it is (a clash is then the replay's exact error).
void replay_without_address_randomization(char** argv);

// Exit 0: replayed (and, with --compare or --bisect, no difference and no hang); 1: a
// difference, a hang, or an error.
int cmd_replay(const ReplayArgs& args);

}  // namespace hcq::tools
