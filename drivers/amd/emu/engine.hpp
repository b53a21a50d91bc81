// The emulated AMD GPU: command processors that consume each queue's ring between its read
// and write pointers when the doorbell moves, and execute the PM4 (compute) and SDMA (copy)
// packets the driver wrote, decoded with the same descriptions the encoders use
// (amd/pm4.def, amd/sdma.def). It faults loudly on bad packets and addresses.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "amd/packets.hpp"
#include "emu/interleave.hpp"
#include "emu/kernels.hpp"
#include "emu/memory.hpp"

namespace hcq::amd::emu {

using hcq::emu::GpuAddressSpace;

// What the GPU tells its (emulated) kernel driver.
class GpuEvents {
 public:
  virtual ~GpuEvents() = default;
  // An interrupt with a context id (PM4 RELEASE_MEM INT_CTXID, SDMA TRAP INT_CONTEXT).
  virtual void interrupt(uint32_t context_id) = 0;
  // The same interrupt with the queue that raised it; a model that routes interrupts by
  // queue (the register-level AM GPU: CP EOP vs SDMA trap IH entries) overrides this.
  virtual void queue_interrupt(uint32_t /*queue_id*/, uint32_t context_id) {
    interrupt(context_id);
  }
  // A queue stopped on a fault: a memory fault (bad address) or a bad packet.
  virtual void fault(uint32_t queue_id, bool memory_fault, uint64_t address,
                     const std::string& what) = 0;
};

struct QueueDesc {
  enum class Type : uint8_t { Pm4, Sdma };
  Type type = Type::Pm4;
  uint32_t id = 0;
  uint64_t ring_va = 0;
  uint64_t ring_bytes = 0;       // power of two
  uint64_t rptr_va = 0;          // 64-bit; the engine writes it (PM4: dwords, SDMA: bytes)
  uint64_t wptr_va = 0;          // 64-bit; written by the driver (same units)
  const volatile uint64_t* doorbell = nullptr;  // the driver writes the new wptr here
};

class Engine {
 public:
  // `timestamp_hz`: frequency of the counter RELEASE_MEM/SDMA TIMESTAMP write.
  Engine(Gen gen, GpuAddressSpace& memory, GpuEvents& events, uint64_t timestamp_hz = 100'000'000);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void add_queue(const QueueDesc& q);
  void remove_queue(uint32_t id);
  // Look at the doorbells now (the emulated KFD calls this before it sleeps in WAIT_EVENTS).
  void kick();
  uint64_t timestamp() const;  // the GPU clock counter
  // Where each queue that waits inside an indirect buffer waits, one line per queue:
  // "queue <id>: IB <va> <dwords> dwords, at dword <n>" (the CP's IB1 base, size and read
  // position, which a real GPU keeps in registers user space cannot read).
  std::string ib_positions();

 private:
  struct Queue;
  struct KernelCache;
  enum class Res : uint8_t;
  void run();
  bool pass();          // one round-robin pass over the queues; true when any made progress
  bool step(Queue& q);  // true when it made progress
  bool step_pm4(Queue& q, uint64_t wptr);
  bool step_sdma(Queue& q, uint64_t wptr);
  Res exec_pm4(Queue& q, const uint32_t* p, uint32_t len);
  Res exec_sdma(Queue& q, const uint32_t* p, uint32_t len);
  void dispatch(Queue& q, const uint32_t* p);
  void fail(Queue& q, bool memory_fault, uint64_t address, const std::string& what);

  Gen gen_;
  GpuAddressSpace& mem_;
  GpuEvents& events_;
  uint64_t timestamp_hz_;
  // Packet descriptions by opcode, looked up once: PM4 body sizes for this generation
  // (exact for fixed-size packets, a minimum for variable ones) and SDMA descriptions.
  const PacketInfo* pm4_info_[256] = {};
  uint16_t pm4_body_[256] = {};
  bool pm4_exact_[256] = {};
  const PacketInfo* sdma_info_[256] = {};

  std::mutex mu_;          // queues_, the wake-up condition
  std::mutex exec_mu_;     // held by the engine thread during a pass; remove_queue waits on it
  std::atomic<int> removers_{0};  // threads waiting in remove_queue: the engine lets them in
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::atomic<uint64_t> list_gen_{0};   // bumped when queues_ changes
  uint64_t seen_gen_ = ~uint64_t{0};    // engine thread only
  std::vector<Queue*> listed_;          // engine thread only: the queues, in the list's order
  std::vector<Queue*> active_;          // engine thread only: the queues of this pass
  std::vector<std::unique_ptr<Queue>> graveyard_;  // removed from inside a pass; freed after it
  std::unique_ptr<KernelCache> kernels_;
  hcq::emu::Preemption preemption_;  // the running kernel's queue; abandons it
  hcq::emu::Interleaver interleave_ = hcq::emu::Interleaver::from_environment();  // engine thread
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> kicks_{0};
  std::thread thread_;
};

}  // namespace hcq::amd::emu
