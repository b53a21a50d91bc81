// A follower in the benchmark's own process that reads a live capture ring as fast as it
// fills (what `hcq dump --follow` does, without the decoding), so that a capturing benchmark
// measures a writer whose ring has room.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/capture_ring.hpp"

namespace hcq::bench {

class RingDrain {
 public:
  // Follows ring `name`, which capture::start has opened; returns once the follower is
  // attached (a ring closed before that would be gone, and the follower would wait in vain).
  explicit RingDrain(const std::string& name)
      : thread_([this, name] {
          capture::RingSource src(name, std::chrono::milliseconds(5000));
          attached_ = true;
          std::vector<uint8_t> buf(4096);
          while (src.read_some(buf.data(), buf.size()) == buf.size()) src.commit();
          dropped_ = src.dropped();
        }) {
    for (int i = 0; i < 5000 && !attached_; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // After capture::stop(): waits for the follower to read the rest; the records dropped.
  uint64_t join() {
    thread_.join();
    return dropped_;
  }

 private:
  uint64_t dropped_ = 0;
  std::atomic<bool> attached_{false};
  std::thread thread_;
};

}  // namespace hcq::bench
