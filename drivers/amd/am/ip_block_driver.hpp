// One IP block of an AM ASIC as hcq drives it: Linux's amdgpu_ip_block_version with its
// amd_ip_funcs (hw_init, hw_fini, ...) and tinygrad's AM_IP classes (am/ip.py), one class per
// block. An ASIC is a list of them in boot order (asic.hpp): the boot calls init in that order,
// the shutdown fini in the reverse one (Linux amdgpu_device_ip_fini_early), a drained interrupt
// ring offers each entry to every block, and a hang report takes each block's status line.
//
// Threads: init and fini are called by the thread that boots or closes the device; interrupt,
// status and queue programming by the ASIC (asic.hpp) under its mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "amd/ring_queue.hpp"
#include "core/driver.hpp"

namespace hcq::amd::am {

struct BootContext;
struct IhEntry;

// A queue as the driver laid it out, for the block that programs the hardware queue. Addresses
// are GPU virtual addresses in VMID 0 (the same as the CPU's).
struct AmQueueSetup {
  QueueKind kind = QueueKind::Compute;
  uint32_t index = 0;  // its number among the open queues of its kind, lowest free first
  uint64_t ring_va = 0, ring_bytes = 0;
  uint64_t rptr_va = 0, wptr_va = 0;   // 64-bit each
  uint64_t eop_va = 0, eop_bytes = 0;  // compute only: the end-of-pipe buffer (VRAM)
};

// What a block that runs the driver's queues of one kind does with them (GFX: compute queues
// on the MEC's HQDs; SDMA: copy queues on its engines' ring 0).
class QueueProgrammer {
 public:
  virtual ~QueueProgrammer() = default;
  // Programs and activates the hardware queue and returns its doorbell's index among BAR2's
  // 64-bit doorbells (tinygrad: the MEC's AMDGPU_NAVI10_DOORBELL_MEC_RING0, SDMA's
  // sDMA_ENGINE0). InvalidInput for an index the hardware has no queue for.
  virtual uint32_t create(const AmQueueSetup& q) = 0;
  // Stops it (dequeue, ring disabled); nothing for a queue not created.
  virtual void destroy(const AmQueueSetup& q) = 0;
  // Where the hardware queue is inside an indirect buffer, read from its registers (a compute
  // queue's CP_HQD_IB_*), for hang reports; nothing when the block cannot tell.
  virtual std::optional<IbPosition> ib_position(const AmQueueSetup&) { return std::nullopt; }
  // The hardware queue's name, "SDMA0 queue 0", where no register tells the position: the
  // emulated GPU publishes positions under it (os::EmulatorReport::IbPositions), which a real GPU lacks.
  // Empty where ib_position reads the registers.
  virtual std::string hardware_name(const AmQueueSetup&) { return {}; }
};

class IpBlockDriver {
 public:
  virtual ~IpBlockDriver() = default;
  // Brings the block up (Linux hw_init).
  virtual void init(BootContext& c) = 0;
  // Stops what the block runs before the memory goes (Linux hw_fini); may throw, the
  // shutdown goes on with the next block and reports the first error.
  virtual void fini(BootContext&) {}
  // An interrupt ring entry this block raised that means the GPU stopped a queue, as a fault
  // text; nothing for any other entry.
  virtual std::optional<std::string> interrupt(const IhEntry&) { return std::nullopt; }
  // One line of state for a hang report, "gmc: MM hub up, GC hub up"; empty when it has none.
  virtual std::string status() { return {}; }
  // The programmer of this block's queues of `kind`; null when it runs none.
  virtual QueueProgrammer* queues(QueueKind) { return nullptr; }
};

}  // namespace hcq::amd::am
