// The AM boot (issue 17 item 6): what hcq does to bring up a GPU no kernel driver runs, over
// its register window and its VRAM BAR, in tinygrad's order (am/amdev.py AMDev.__init__,
// Linux amdgpu_device_ip_init for the same blocks):
//   1. VRAM size from RCC_CONFIG_MEMSIZE (a fixed register, MiB), the IP discovery table
//      64 KiB below the end of VRAM, the register segment bases from it, the frame buffer's MC
//      base from MMMC_VM_FB_LOCATION_BASE (tinygrad AM_GMC.init_sw), firmware files read.
//   2. The state left behind: the PSP's sOS running (MP0_SMN_C2PMSG_81 not 0), the SMU
//      answering GetSmuVersion, hcq's or tinygrad's marker in SCRATCH_REG7. A GPU booted
//      before (sOS running or a marker) whose SMU answers gets a mode-1 reset: bus mastering
//      off, DEBUGSMC_MSG_Mode1Reset, tinygrad's 500 ms, then RCC_CONFIG_MEMSIZE readable again
//      (Linux amdgpu_device_mode1_reset waits for that) and the sOS gone, bus mastering on.
//   3. The ASIC's IP blocks (asic.hpp), each one's init in the description's boot order, a
//      phase each: soc (NBIO: function 2's no-soft-reset strap cleared, the doorbell aperture
//      on; tinygrad AM_SOC.init_hw, Linux nbio_v4_3.c; the HDP flush registers remapped into
//      the register BAR, Linux soc21_common_hw_init: soc_init here), gmc, ih, psp, smu (driver
//      table address, all features; tinygrad AM_SMU.init_hw: smu_init here), gfx, sdma. A
//      block the ASIC leaves out is reported as not run.
//   4. SCRATCH_REG7 = kHcqBootMarker, so that the next boot recognises the GPU as booted.
// Each step is timed into a BootReport. Every wait has a timeout whose error names the
// register, the value waited for and the value read (RegisterIo).
//
// VRAM layout: the top kReservedTopBytes stay the firmware's (the discovery table among
// them; tinygrad reserves 64 MiB on GC 11), the kBootMemoryBytes below go to the boot's own
// buffers (BootMemory, never freed while the GPU runs; tinygrad's boot memory is 32 MiB), and
// everything below that is the driver's allocator's.
//
// Threads: one thread boots; the objects handed out (io(), smu(), memory()) say their own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "amd/am/am_function.hpp"
#include "amd/am/asic.hpp"
#include "amd/am/boot_memory.hpp"
#include "amd/am/discovery.hpp"
#include "amd/am/firmware.hpp"
#include "amd/am/hdp.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am/smu.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {

inline constexpr uint64_t kReservedTopBytes = 64ull << 20;
inline constexpr uint64_t kBootMemoryBytes = 32ull << 20;
// SCRATCH_REG7 after an hcq boot ("hcq" and 1). tinygrad writes its AMDev.Version there
// (0xA00000xx) and hcq recognises that too.
inline constexpr uint32_t kHcqBootMarker = 0x68637101;
inline constexpr uint32_t kTinygradMarkerMask = 0xffffff00, kTinygradMarker = 0xa0000000;

// Boot memory over VRAM [begin, end) of `vram` (the VRAM BAR, mapped or not): handed out
// upwards, zeroed, never freed. Threads: alloc may be called from several threads (one mutex).
class VramBootMemory final : public BootMemory {
 public:
  // `vram` must outlive the memory.
  VramBootMemory(VramPort& vram, uint64_t begin, uint64_t end, uint64_t fb_base);
  // VRAM mapped at `vram` (a MappedVram of it, owned).
  VramBootMemory(std::span<std::byte> vram, uint64_t begin, uint64_t end, uint64_t fb_base);
  ~VramBootMemory() override;
  // Throws hcq::Error "boot memory: no room for <what>: 0x4000 bytes aligned to 0x1000
  // requested, 0x2000 of [0x5e00000, 0x7e00000) left"; InvalidInput for an alignment that is
  // not a power of two of at least 4096.
  VramBuffer alloc(uint64_t size, uint64_t align, const char* what) override;
  uint64_t mc(uint64_t pa) const override { return fb_base_ + pa; }
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }

 private:
  std::unique_ptr<VramPort> owned_;
  VramPort& vram_;
  uint64_t begin_, end_, fb_base_;
  std::mutex mu_;
  uint64_t next_;  // guarded by mu_
};

// The firmware file of `kind` among those loaded; InvalidInput when none was.
const Firmware& find_firmware(const std::vector<Firmware>& firmware, FirmwareKind kind);

class AmBoot;

// What a block's init and fini work with.
struct BootContext {
  AmBoot& boot;  // soc_init and smu_init, the boot's own platform steps
  RegisterIo& io;
  BootMemory& memory;
  Smu& smu;
  const Discovery& discovery;
  const std::vector<Firmware>& firmware;  // in the ASIC's firmware order; empty: none read
  uint64_t vram_size = 0;
  uint64_t fb_base = 0;          // MC address of VRAM byte 0
  uint64_t page_table_base = 0;  // VMID 0's root as VM_CONTEXT0_PAGE_TABLE_BASE_ADDR holds it
  std::chrono::microseconds timeout{0};
  // The HDP flush, remapped by the soc phase (hdp.hpp); flush it after writing VRAM an engine
  // or the PSP reads.
  Hdp* hdp = nullptr;
  // The device's PSP mailbox lock (BootOptions::psp_mailbox) for the Psp the phase makes.
  os::SharedMailbox* psp_mailbox = nullptr;
};

struct BootOptions {
  // Where the firmware files are; empty: none are read (then no phase may need them).
  std::string firmware_dir;
  // Each register wait.
  std::chrono::microseconds timeout = std::chrono::seconds(2);
  // How long the GPU is left alone after the mode-1 reset message (tinygrad: 500 ms).
  std::chrono::milliseconds reset_settle{500};
  // Reset whenever the SMU answers, whatever the state found.
  bool force_reset = false;
  // Clears (false) and sets (true) PCI bus mastering around the reset; may be empty.
  std::function<void(bool)> bus_master;
  // The device's mailbox locks (os/device_owner.hpp), shared with other processes; null:
  // this process alone uses the mailboxes. They must outlive the boot.
  os::SharedMailbox* smu_mailbox = nullptr;
  os::SharedMailbox* psp_mailbox = nullptr;
};

// What the boot found before touching anything.
struct PreviousState {
  bool sos_alive = false;
  bool smu_alive = false;
  uint32_t marker = 0;  // SCRATCH_REG7
  // "cold", "booted by hcq", "booted by tinygrad", "booted by another driver (sOS running)".
  std::string describe() const;
  bool booted() const;
};

struct BootReport {
  uint64_t vram_size = 0;
  uint64_t fb_base = 0;
  std::vector<std::pair<std::string, IpVersion>> ip_versions;  // "GC", 11.0.0, in boot order
  struct FirmwareVersion {
    std::string file;
    uint32_t ucode_version = 0, feature_version = 0;
  };
  std::vector<FirmwareVersion> firmware;
  uint32_t smu_version = 0;  // the running SMU firmware's (0 when the smu phase did not run)
  PreviousState previous;
  bool reset = false;
  struct Phase {
    std::string name;
    bool run = false;
    double ms = 0;
  };
  std::vector<Phase> phases;  // discovery, firmware, reset, soc, gmc, ih, psp, smu, gfx, sdma
  const Phase* phase(const std::string& name) const;
  std::string text() const;  // one line each: VRAM, previous state, IPs, firmware, phases
};

class AmBoot {
 public:
  // Step 1: reads the VRAM size, the discovery table (through the port) and the frame buffer
  // base, finds the ASIC among `asics` (find_asic) and reads its firmware files. The window
  // and VRAM must outlive this object. Throws hcq::Error when the VRAM BAR is smaller than
  // VRAM (hcq needs the whole VRAM reachable: resizable BAR), InvalidInput for a corrupt
  // discovery table or an ASIC hcq does not know.
  AmBoot(os::Mmio& regs, VramPort& vram, BootOptions options,
         std::span<const AsicDescription* const> asics = known_asics());
  // VRAM mapped at `vram` (the VRAM BAR).
  AmBoot(os::Mmio& regs, std::span<std::byte> vram, BootOptions options,
         std::span<const AsicDescription* const> asics = known_asics());
  AmBoot(const AmBoot&) = delete;
  AmBoot& operator=(const AmBoot&) = delete;

  uint64_t vram_size() const { return vram_size_; }
  uint64_t fb_base() const { return fb_base_; }
  const Discovery& discovery() const { return discovery_; }
  const AsicDescription& asic() const { return *asic_; }
  const std::vector<Firmware>& firmware() const { return firmware_; }
  RegisterIo& io() { return *io_; }
  Smu& smu() { return *smu_; }
  BootMemory& memory() { return *memory_; }
  Hdp& hdp() { return *hdp_; }
  // VRAM [0, allocatable_vram()) is the driver's to allocate (below the boot memory).
  uint64_t allocatable_vram() const { return memory_->begin(); }

  // Steps 2 to 4 over `asic`'s blocks (built from asic()). `page_table_base` is VMID 0's root
  // for the GMC's hubs.
  const BootReport& run(AmAsic& asic, uint64_t page_table_base);
  // The blocks' fini in reverse order (AmAsic::shutdown). The marker stays: the next boot
  // resets the GPU.
  void shutdown(AmAsic& asic);
  const BootReport& report() const { return report_; }

  // The steps of run(); soc_init and smu_init are the soc and smu blocks' init.
  PreviousState inspect();
  void mode1_reset();
  void soc_init();
  void smu_init();

 private:
  BootContext context(uint64_t page_table_base);
  template <class Fn>
  void timed(const std::string& name, bool run, Fn&& fn);
  // A register inside the window directly, past its end through NBIO's SMN pair.
  uint32_t read_any(const RegDesc& r);
  void write_any(const RegDesc& r, uint32_t value);

  void discover_and_read_firmware(std::span<const AsicDescription* const> asics);

  os::Mmio& regs_;
  std::unique_ptr<VramPort> owned_vram_;  // the span constructor's
  VramPort& vram_;
  BootOptions options_;
  uint64_t vram_size_ = 0, fb_base_ = 0;
  Discovery discovery_;
  const AsicDescription* asic_ = nullptr;
  std::unique_ptr<RegisterIo> io_;
  std::unique_ptr<Smu> smu_;
  std::unique_ptr<Hdp> hdp_;
  std::unique_ptr<VramBootMemory> memory_;
  std::unique_ptr<os::IndexDataRegs> smn_;  // registers beyond the window (RSMU pair)
  std::vector<Firmware> firmware_;
  uint64_t page_table_base_ = 0;
  BootReport report_;
};

}  // namespace hcq::amd::am
