// A GPFIFO channel of the NVIDIA driver (internal to drivers/nv): the ring of entries and
// USERD, a push buffer ring for direct submissions, the error notifier and the doorbell.
//
// Threads: submit, stage_indirect and report take the channel's lock; check_entry,
// notifier and name may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "core/driver.hpp"
#include "nv/push.hpp"
#include "nv/rm_abi.hpp"

namespace hcq::nv {

class RmDriver;

// A GPFIFO channel: the ring of entries, USERD, a push buffer ring for direct submissions,
// the error notifier, and the doorbell.
class GpfifoChannel final : public HwQueue {
 public:
  GpfifoChannel(RmDriver& drv, QueueKind kind, uint32_t index);
  ~GpfifoChannel() override;
  void submit(const uint32_t* words, size_t n) override;
  // Through RmDriver::submit_indirect, as one of several channels.
  void submit_indirect(uint64_t va, size_t ndwords) override;
  // One GPFIFO entry's LENGTH bounds a command buffer (push_format.def, clc56f.h 30:10).
  size_t max_indirect_dwords() const override { return GP_ENTRY_LENGTH.bits().mask(); }
  // RmDriver::submit_indirect's steps: an entry (of a size check_entry() allowed) and
  // GP_PUT, with faults checked by the caller; then, after one ordering read on the BAR1
  // path, the doorbell.
  void check_entry(size_t ndwords) const;
  void stage_indirect(uint64_t va, size_t ndwords);
  void ring_doorbell();
  // Read GP_PUT back through BAR1: no write on that path before it is still on its way.
  void order_writes() const { (void)__atomic_load_n(&userd_->GPPut, __ATOMIC_ACQUIRE); }
  // Whether the ring and USERD are in system memory (HCQ_NV_GPFIFO_HOST), not video memory.
  bool ring_in_host_memory() const { return ring_in_host_; }
  // The channel's error notifier: nonzero status once RM (or the emulator) stopped it.
  const rm::Notification& notifier() const {
    return *static_cast<const rm::Notification*>(notifier_.host);
  }
  std::string report();
  const std::string& name() const { return name_; }

 private:
  struct Segment {
    uint64_t seq;           // GPFIFO entry number (monotonic)
    uint64_t va;
    uint32_t dwords;
    uint64_t push_end = 0;  // push-buffer ring position it frees when done (0: not in it)
  };
  uint32_t gp_get() const { return __atomic_load_n(&userd_->GPGet, __ATOMIC_ACQUIRE); }
  uint64_t completed();  // reads GP_GET: through BAR1 on a real GPU, about a microsecond
  void retire();
  uint64_t push_words(const uint32_t* w, size_t n);  // into the push ring: its GPU address
  void add_entry(uint64_t va, uint32_t dwords, uint64_t push_end);
  void put_gp_put();  // publish the entries written (GP_PUT), ordered after them
  void kick();

  RmDriver& drv_;
  std::string name_;
  rm::NvHandle handle_ = 0;
  uint32_t token_ = 0;
  Allocation ring_, push_, notifier_;
  bool ring_in_host_ = false;
  uint64_t* gpfifo_ = nullptr;
  rm::Userd* userd_ = nullptr;
  void* channel_va_ = nullptr;  // UVM_REGISTER_CHANNEL's range
  uint64_t put_seq_ = 0;      // GPFIFO entries written
  uint64_t done_seen_ = 0;    // entries completed as retire() last read them
  uint64_t push_put_ = 0, push_done_ = 0;  // push ring bytes, monotonic
  std::deque<Segment> inflight_;
  // The last entries the GPU finished: a channel error found after GP_GET passed the bad
  // entry (RM stops the channel once it reads on) is reported from these.
  std::deque<Segment> retired_;
  std::mutex mu_;
};

}  // namespace hcq::nv
