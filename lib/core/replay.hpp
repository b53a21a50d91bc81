// Replay: a full capture (capture.hpp, HCQ_CAPTURE=path,full) run again on a device of the same
// architecture. Every buffer the capture recorded goes back at its recorded GPU address (the
// device is opened with its heap where the captured one had it, and the buffers are reserved
// there: an address that cannot be had is an error, never a silent relocation); each
// submission's packets go, in order, on the queue of the same kind and index, after the
// buffer contents the capture recorded before it. Kernels need no loading: their code is in
// the restored memory (an emulated GPU runs the CPU implementation registered under the
// kernel's name, emu::register_kernel: the caller registers them, as `hcq replay` does).
//
// Memory between submissions (docs/capture-format.md, "Replay"): a memory record is what the
// captured process's buffer held when it made the next submission. Replay first waits for its
// own work to finish and its timeline to reach the value the captured one had then, then
// merges 4-byte word by word with the record before it (P), the record (R) and what the
// replay's buffer holds (C): words the capture changed and the replay did not (C = P) are the
// CPU's writes and are written; words the replay changed are the GPU's. Where the record is settled (the captured device had
// finished the work before it) and the replay's GPU left other bytes than the captured GPU
// did, that is a difference: with `compare` the replay stops there and names the submission
// and the bytes.
//
// Thread safety: run() and bisect() may be called from several threads at once for different
// captures; each opens its own devices.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hcq::replay {

struct Options {
  // The device to replay on, for a capture of one device; "" for the default: the capture's
  // own device when it was emulated, else the emulated target of its architecture.
  std::string device;
  bool compare = false;  // stop at the first difference and report it
  // Replay submissions 0 to `until` only (then compare what the capture recorded after it).
  std::optional<uint64_t> until;
  // How long the replay waits for the GPU at any point before it calls it a hang.
  std::chrono::milliseconds timeout{5000};
  // Called after each submission is made (progress); may be empty.
  std::function<void(uint64_t sequence)> on_submission;
};

// The first bytes that differ, in one buffer record.
struct Difference {
  uint64_t submission = 0;  // the last submission replayed before the bytes were compared
  std::string device;       // the replay's device name
  uint64_t address = 0;     // the first byte that differs
  uint64_t length = 0;      // from it to the last byte that differs in the same record
  std::vector<uint8_t> captured, replayed;  // the bytes at `address`, at most 16
};

struct Hang {
  uint64_t submission = 0;  // the first submission the GPU did not finish
  std::string device;
  std::string report;       // the driver's hang report (packets around the read pointer)
};

struct Result {
  uint64_t submissions = 0;  // replayed
  uint64_t compared = 0;     // settled memory records compared (with `compare`)
  std::vector<std::string> devices;  // the devices replayed on, in the capture's order
  std::optional<Difference> difference;
  std::optional<Hang> hang;
  bool clean() const { return !difference && !hang; }
};

// Replays `path`. Throws InvalidInput for a capture replay cannot use (not version 3, not
// full, a device of another architecture, an address that cannot be reserved), the Reader's
// errors for a malformed file; a difference or a hang is in the Result, not thrown.
Result run(const std::string& path, const Options& options);

struct Bisection {
  // The first submission whose replay (prefix 0..N with `compare`) differs or hangs; none
  // when the whole capture replays clean.
  std::optional<uint64_t> first_failing;
  Result failure;       // that prefix's result
  uint32_t replays = 0;  // how many replays it took
};
// Finds the first failing submission by replaying prefixes (binary search: a prefix that
// fails is assumed to keep failing when longer).
Bisection bisect(const std::string& path, const Options& options);

}  // namespace hcq::replay
