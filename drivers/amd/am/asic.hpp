// An AM ASIC as a table (issue 35 item 1): its IP blocks in boot order with the IP versions the
// discovery table must report, its firmware files and its queue layout; and AmAsic, those
// blocks built for one device, which the boot walks (init in order, fini in reverse) and the
// driver takes its services from (queue programming, TLB invalidation, faults, hang-report
// lines). A new ASIC whose blocks hcq already drives is a new AsicDescription, no new code.
//
// gfx1100 (RX 7900 XTX, Navi 31; tinygrad am/amdev.py, Linux amdgpu_device_ip_init for the same
// blocks): soc (NBIO 4.3.0: straps, doorbell aperture, HDP remap), gmc (the MM hub over VMID
// 0's page tables), ih (OSSSYS 6.0.0's rings), psp (MP0 13.0.0: bootloader components, sOS,
// TMR, every IP firmware, the RLC autoload), smu (MP1 13.0.0: driver table, features), gfx (GC
// 11.0.0: the autoload awaited, the GC hub, which answers only once the RLC runs (tinygrad
// AM_GFX.init_hw), the MEC and its doorbell range), sdma (SDMA 6.0.0: nothing at boot, the
// ring registers are written when a copy queue is made).
//
// Queues: compute queue i runs on ME 1, pipe i % 4, queue i / 4 (Linux spreads its compute
// rings over the pipes the same way) with 64-bit doorbell AMDGPU_NAVI10_DOORBELL_MEC_RING0 + i
// (0x003 + i, Linux amdgpu_doorbell.h); the MEC doorbell range covers Linux's KIQ..USERQUEUE_END
// (0x000..0x08A). Copy queue i is queue 0 of SDMA engine i (SDMA0, SDMA1), doorbell
// AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0 0x100 / _ENGINE1 0x10A (Linux amdgpu_doorbell.h; sdma_v6_0
// sw_init gives each instance its ring 0 on sdma_engine[i]): a third copy queue is refused with
// an exact error.
//
// Faults: both hubs' latched protection faults, then the IH ring's entries as the blocks read
// them (gmc: VM faults; gfx: CP bad opcode and privileged register faults), as one text for
// GpuFaultError. poll_fault looks at the IH write pointer in memory first and touches no
// register unless it moved; it reads the hubs' registers only for a VM fault entry.
//
// Threads: an AsicDescription is constant. AmAsic's boot and shutdown (the blocks' init and
// fini) run on one thread; queues' create/destroy, invalidate, read_fault, poll_fault and
// status may be called from several threads at once (one mutex guards the blocks' state).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/gpu_memory.hpp"
#include "amd/am/ip_block_driver.hpp"
#include "amd/am/regs.hpp"

namespace hcq::amd::am {

// Which of hcq's block drivers runs a block.
enum class BlockKind : uint8_t { Soc, Gmc, Ih, Psp, Smu, Gfx, Sdma };

// The boot report's phase name of a block: "soc", "gmc", "ih", "psp", "smu", "gfx", "sdma".
const char* block_kind_name(BlockKind kind);

struct BlockSpec {
  BlockKind kind = BlockKind::Soc;
  uint16_t hw_id = 0;  // the discovery table's (discovery.hpp hw_id)
  IpVersion version;   // what discovery must report for it
};

struct AsicDescription {
  const char* name = "";  // the target: "gfx1100"
  std::vector<BlockSpec> blocks;  // in boot order
  std::vector<std::string> firmware;  // file names, in the order the PSP block loads them
  // The queue layout (see above).
  uint32_t mec_ring0_doorbell = 0;   // compute queue 0's doorbell; queue i's is this + i
  uint32_t user_queue_end_doorbell = 0;  // the MEC doorbell range's last 64-bit doorbell
  uint32_t max_compute_queues = 0;   // HQDs of ME 1 hcq uses
  std::vector<uint32_t> sdma_doorbells;  // copy queue i: SDMA engine i's ring 0
  // Per IP, the register table of a version whose registers are not where the .def hcq's
  // constants come from puts them (IpSegmentBases::tables); empty: that .def.
  std::array<std::span<const RegDesc>, kIpCount> register_tables{};
  const BlockSpec* block(BlockKind kind) const;  // null when it has none
};

const AsicDescription& gfx1100_asic();
// Every ASIC hcq's AM driver boots.
std::span<const AsicDescription* const> known_asics();
// The ASIC `discovery` describes: the first description whose GC version it reports and
// whose every block is there in the version named. InvalidInput "IP discovery table: GC
// 10.3.0: hcq's AM boot knows GC 11.0.0 (gfx1100) only" for an unknown GC; "IP discovery
// table: MMHUB 3.0.1 where hcq's gfx1100 has MMHUB 3.0.0" (or "MMHUB missing") for the first
// block that differs in the first description with that GC.
const AsicDescription& find_asic(const Discovery& discovery,
                                 std::span<const AsicDescription* const> asics = known_asics());

class AmAsic;
// Makes the driver of one block of `asic`; null leaves the block out (the boot reports it as
// not run). Tests pass their own through AmDriverOptions to put a failing or altered block
// into a real boot (standard_block for the others).
using BlockFactory = std::function<std::unique_ptr<IpBlockDriver>(const BlockSpec&, AmAsic&)>;

class AmAsic {
 public:
  struct State;
  // `make` empty: standard_block.
  explicit AmAsic(const AsicDescription& description, const BlockFactory& make = {});
  ~AmAsic();
  AmAsic(const AmAsic&) = delete;
  AmAsic& operator=(const AmAsic&) = delete;

  // hcq's driver for `spec`: InvalidInput when hcq has none for its kind and version.
  static std::unique_ptr<IpBlockDriver> standard_block(const BlockSpec& spec, AmAsic& asic);

  const AsicDescription& description() const { return description_; }
  struct Block {
    BlockSpec spec;
    std::unique_ptr<IpBlockDriver> driver;  // null: left out
  };
  // In boot order.
  std::vector<Block>& blocks() { return blocks_; }
  // The block that programs queues of `kind`; null when none does.
  QueueProgrammer* queues(QueueKind kind);

  // Every block's fini, in reverse boot order; throws Error "AM gfx1100 shutdown: <the first
  // error>" after the last one when any threw.
  void shutdown(BootContext& c);
  // `hub`'s TLB for VMID 0 after an unmap; nothing before the hub translates.
  void invalidate(VmHub hub);
  // The faults the hubs latched and the interrupt ring brought since the last call, as one
  // GpuFaultError text, or nothing.
  std::optional<std::string> read_fault();
  // The same, but only when the interrupt ring's write pointer (in memory) moved: no register
  // is read otherwise.
  std::optional<std::string> poll_fault();
  // The blocks' status lines, "gmc: ...\nih: ...", for hang reports.
  std::string status();

  // For the blocks: what they bring up and share, guarded by mutex().
  State& state() { return *state_; }
  std::mutex& mutex();

 private:
  std::optional<std::string> collect_faults(bool read_hubs);  // mutex held

  const AsicDescription& description_;
  std::unique_ptr<State> state_;
  std::vector<Block> blocks_;
};

}  // namespace hcq::amd::am
