// The emulated Adreno GPU: a command processor per context that runs the indirect buffers of
// each submission in order, with the descriptions the encoder uses (qcom/cp.def,
// qcom/regs.def): register writes, state loads, CP_EXEC_CS (running the registered CPU
// implementation of the kernel over the decoded grid with its constants), events, memory
// writes, timestamps and waits. A bad packet or address stops the context with a fault.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "emu/interleave.hpp"
#include "emu/memory.hpp"
#include "qcom/packets.hpp"

namespace hcq::qcom::emu {

using hcq::emu::Memory;

struct Ib {
  uint64_t va = 0;
  uint32_t dwords = 0;
};

class GpuEvents {
 public:
  virtual ~GpuEvents() = default;
  virtual void retired(uint32_t context, uint32_t timestamp) = 0;
  virtual void fault(uint32_t context, const std::string& what) = 0;
};

class Engine {
 public:
  Engine(Gen gen, Memory& memory, GpuEvents& events);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queue a submission of `context`; it retires with `timestamp`.
  void submit(uint32_t context, uint32_t timestamp, std::vector<Ib> ibs);
  void remove_context(uint32_t context);
  uint64_t always_on() const;  // CP_ALWAYS_ON_COUNTER
  // Where each context blocked inside an indirect buffer waits, one line per context:
  // "IB 0x<va> <dwords> dwords, at dword <n>" (the CP's CP_IB1_BASE / CP_IB1_REM_SIZE, which
  // a real GPU shows only in a KGSL snapshot or an msm devcoredump).
  std::string ib_positions();

 private:
  struct Context;
  struct KernelCache;
  // Yield: the turn's packets are used up (HCQ_EMU_INTERLEAVE_SEED); it resumes there.
  enum class Res : uint8_t { Done, Blocked, Yield };
  void run();
  bool step(Context& c);
  Res exec_ib(Context& c);
  void publish_wait(Context& c);  // a blocked context's IB position, for ib_positions()
  void unpublish_wait(Context& c);
  Res packet(Context& c, const uint32_t* p, uint32_t n, uint32_t& skip);
  void launch(Context& c, const uint32_t* p);
  void bind_uavs(Context& c, const std::string& kernel, uint32_t uses);

  struct Incoming {
    uint32_t context, timestamp;
    std::vector<Ib> ibs;
  };
  bool take_inbox();

  Gen gen_;
  Memory& mem_;
  GpuEvents& events_;
  std::mutex mu_;  // the inbox and the removals; never held while the engine executes
  std::condition_variable cv_, removed_cv_;
  std::vector<Incoming> inbox_;
  std::vector<uint32_t> removals_;
  std::mutex positions_mu_;  // waiting_ only: read by ib_positions() from other threads
  struct WaitPosition {
    uint64_t va;
    uint32_t dwords, pos;
  };
  std::map<uint32_t, WaitPosition> waiting_;  // by context
  uint64_t removal_requests_ = 0, removals_done_ = 0;
  std::map<uint32_t, std::unique_ptr<Context>> contexts_;  // engine thread only
  std::unique_ptr<KernelCache> kernels_;
  hcq::emu::Preemption preemption_;  // the running kernel's context; abandons it
  hcq::emu::Interleaver interleave_ = hcq::emu::Interleaver::from_environment();
  std::vector<Context*> order_;  // engine thread: this pass's visiting order
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> submissions_{0};  // to poll for new work without the lock
  std::thread thread_;
};

}  // namespace hcq::qcom::emu
