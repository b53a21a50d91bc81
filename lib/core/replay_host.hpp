// Replay's host thread: the steps a batch run's host thread took between GPU commands
// (capture::HostStepsRecord: waits for signals, copies, signal writes, relayed signals), taken
// again against the replay's restored memory while its GPU runs the run's submissions. Internal
// to lib/core (replay.cpp).
//
// Thread safety: add(), done(), pending() and failure() may be called from any thread at once;
// the steps run on the object's own thread, reaching memory through `Memory`, whose read and
// write must be callable from that thread while its owner's thread uses them too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/capture.hpp"

namespace hcq::replay::detail {

class HostSteps {
 public:
  // The replay's memory, by the capture's device id.
  struct Memory {
    virtual ~Memory() = default;
    virtual void read(uint32_t device, uint64_t va, void* out, uint64_t n) = 0;
    virtual void write(uint32_t device, uint64_t va, const void* in, uint64_t n) = 0;
  };
  // A wait (or a mirror left unfinished) gives up after `timeout` without progress.
  HostSteps(Memory& memory, std::chrono::milliseconds timeout);
  ~HostSteps();  // a step still waiting gives up at once
  HostSteps(const HostSteps&) = delete;
  HostSteps& operator=(const HostSteps&) = delete;

  // Queues one run's steps; runs take their steps in the order they were added. Refuses (an
  // InvalidInput naming the submission) a step a replay cannot take: a file read, a remote op.
  void add(capture::HostStepsRecord run);
  // Every step added has been taken.
  bool done() const;
  // The submission whose steps are not all taken yet (the first), or none.
  std::optional<uint64_t> pending() const;
  // Why a run's steps stopped (a wait that timed out, a failed read or write), or "".
  std::string failure() const;
  // failure(), else the wait the steps are in now (its signal, the value waited for and the
  // value there), else "": for a hang report.
  std::string describe() const;

  // The exact refusal for a run's unreplayable step, or "" when every step can be taken.
  static std::string refusal(const capture::HostStepsRecord& run);

 private:
  void loop();
  void take(const capture::HostStepsRecord& run);
  Memory& memory_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<capture::HostStepsRecord> runs_;  // the first is the one being taken
  std::string failure_;  // set once; the thread then takes no more steps
  struct Waiting {
    size_t step;
    uint64_t sequence;
    capture::HostStep wait;
  };
  std::optional<Waiting> waiting_;  // the wait step being taken
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace hcq::replay::detail
