// An AMD hardware ring queue as the host side writes it: PM4 (compute) or SDMA (copy) packets
// copied into a ring the engine reads, the write pointer stored where the engine polls it, and
// the doorbell rung; indirect buffers through the queue's own packet; the packets around the
// read pointer decoded for hang reports. The same for a KFD user-mode queue (kfd_driver.cpp)
// and a queue hcq programs itself on a GPU it booted (am/am_driver.cpp): the owner creates
// and destroys the hardware queue, and supplies the fault check and the CPU's view of memory.
//
// Units: the PM4 write pointer counts dwords, SDMA's bytes (KFD's units for each queue type;
// the MEC's CP_HQD_PQ_WPTR and SDMA's RB_WPTR count the same).
//
// Threads: submit, submit_indirect and report may be called from several threads at once
// (one mutex per queue); read_pointer from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "amd/packets.hpp"
#include "core/decoded.hpp"
#include "core/driver.hpp"

namespace hcq::amd {

// Where the owner put the queue: the ring and its pointers, mapped for the CPU, or (published)
// in memory the CPU cannot map (VRAM behind a USB bridge): then `ring` is the queue's host
// shadow of it, the dwords written since the last doorbell go out through publish_ring (one
// call per contiguous range: two where they wrap around the ring's end), the write pointer
// through publish_write_pointer, and the read pointer comes from fetch_read_pointer; rptr and
// wptr are unused.
struct RingMemory {
  uint32_t* ring = nullptr;  // the CPU's view of the ring, or its host shadow (published)
  uint64_t ring_bytes = 0;   // a power of two, at least 256
  uint64_t* rptr = nullptr;  // the read pointer the engine writes back (queue units)
  uint64_t* wptr = nullptr;  // the write pointer the engine polls (queue units)
  bool published = false;
  // The doorbell's CPU address, or null: write_doorbell rings it.
  volatile uint64_t* doorbell = nullptr;
};

// Where the engine is inside an indirect buffer: the buffer and the dword it waits at.
struct IbPosition {
  uint64_t va = 0;
  uint64_t dwords = 0;
  uint32_t at = 0;
};

// Where the queue named `queue` ("queue 3", "compute queue ME 1 pipe 0 queue 0") waits inside
// an indirect buffer, from an emulated GPU's published positions (os::EmulatorReport::IbPositions: lines
// "<queue>: IB 0x<va> <dwords> dwords, at dword <n>"): the last line for it, or nothing.
std::optional<IbPosition> find_ib_position(const std::string& lines, const std::string& queue);

class RingQueue : public HwQueue {
 public:
  // SDMA indirect buffers run whole 8-dword units and their INDIRECT packet ends on such a
  // boundary in the ring (Linux sdma_v6_0_ring_emit_ib pads with NOPs to it).
  static constexpr uint32_t kSdmaIbAlign = 8;

  void submit(const uint32_t* words, size_t n) override;
  void submit_indirect(uint64_t va, size_t ndwords) override;
  // The longest command buffer one indirect packet runs, in dwords (IB_SIZE's limit: 20 bits,
  // pm4.def / sdma.def, Mesa sid.h S_3F2_IB_SIZE). SDMA fetches IBs in 8-dword units from
  // 32-byte-aligned addresses (Linux sdma_v5_0_ring_emit_ib; amdgpu pads SDMA IBs to 8 dwords).
  size_t max_indirect_dwords() const override;
  size_t indirect_granule_dwords() const override {
    return kind_ == QueueKind::Compute ? 1 : kSdmaIbAlign;
  }
  uint64_t read_pointer() const {
    return published_ ? fetch_read_pointer() : __atomic_load_n(rptr_, __ATOMIC_ACQUIRE);
  }
  QueueKind kind() const { return kind_; }
  // "compute queue 3": how reports and errors name the queue.
  const std::string& name() const { return name_; }
  // The packets around the read pointer (hang_report), empty when the queue is idle.
  std::string report(Gen gen);

 protected:
  // `device_name` starts every error and report line ("emu:gfx1100: compute queue 1: ...").
  RingQueue(QueueKind kind, std::string device_name);
  // Once the owner has created the hardware queue (its pointers zeroed before): where its
  // ring, pointers and doorbell are and what to call it. InvalidInput for a ring size that is not
  // a power of two.
  void attach(const RingMemory& memory, std::string queue_name);

  // Throws GpuFaultError when the device reported a fault (checked before every submission
  // and while waiting for space).
  virtual void check_faults() = 0;
  // The CPU's view of [va, va + bytes) when the owner has it mapped, else null (an indirect
  // buffer in a report).
  virtual const void* host_view(uint64_t va, uint64_t bytes) = 0;
  // Where the engine is inside the indirect buffer it runs, when the device says (the
  // emulated GPUs do; a real one keeps it in CP registers). Default: unknown.
  virtual std::optional<IbPosition> ib_position() { return std::nullopt; }
  // Runs after the ring and write pointer are stored, before the doorbell (an AM queue
  // flushes the HDP there). Default: nothing.
  virtual void before_doorbell() {}
  // A published ring's hooks (RingMemory::published); the defaults throw hcq::Error.
  // `words` go to the ring at byte `offset`; called under the queue's lock.
  virtual void publish_ring(uint64_t offset, std::span<const uint32_t> words);
  virtual void publish_write_pointer(uint64_t wptr);
  virtual uint64_t fetch_read_pointer() const;
  // Rings the doorbell where RingMemory::doorbell is null.
  virtual void write_doorbell(uint64_t value);
  // Reads device memory the CPU does not map (host_view null), for an indirect buffer in a
  // report: false where the owner cannot (the default).
  virtual bool read_device(uint64_t /*va*/, std::span<std::byte> /*out*/) { return false; }

 private:
  // The packets of the indirect buffer `call` runs, around where the engine is in it.
  std::string ib_report(const DecodedPacket& call, Gen gen);
  void wait_for_space(uint64_t needed_units);
  void submit_locked(const uint32_t* words, size_t n);
  void ring_doorbell();
  void publish_pending();
  void remember_start(uint64_t at) { starts_[nstarts_++ % kStarts] = at; }

  // What a submission reads and writes first, together at the object's start.
  uint32_t* ring_ = nullptr;
  uint64_t* wptr_ = nullptr;
  volatile uint64_t* doorbell_ = nullptr;
  uint64_t ring_mask_ = 0;  // ring dwords - 1
  uint64_t put_ = 0;        // the write pointer, queue units
  uint64_t rptr_seen_ = 0;  // the read pointer as last read
  uint64_t published_put_ = 0;  // published ring: the write pointer its dwords went out up to
  bool published_ = false;
  QueueKind kind_;
  std::mutex mu_;
  uint64_t* rptr_ = nullptr;
  uint64_t ring_bytes_ = 0;
  std::string device_name_, name_;
  // Where the last submissions begin (queue units), for reports: starts_[n % kStarts].
  static constexpr size_t kStarts = 64;
  std::array<uint64_t, kStarts> starts_{};
  uint64_t nstarts_ = 0;
};

}  // namespace hcq::amd
