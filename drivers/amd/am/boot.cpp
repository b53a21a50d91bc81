#include "amd/am/boot.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "amd/am/gpu_memory.hpp"
#include "amd/am/index_pairs.hpp"
#include "amd/am/regs.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// tinygrad am/ip.py AM_SMU.is_smu_alive: GetSmuVersion with a 100 ms timeout; any response
// (success or an error code) means the SMU runs.
constexpr std::chrono::milliseconds kSmuProbeTimeout{100};
// tinygrad AM_SMU.init_sw: the SMU's driver table, 0x4000 bytes of boot memory.
constexpr uint64_t kSmuDriverTableBytes = 0x4000;

// The IPs the report lists, in boot order (hw ids as discovery.hpp names them).
constexpr uint16_t kReportedIps[] = {hw_id::NBIO,  hw_id::MMHUB, hw_id::OSSSYS, hw_id::MP0,
                                     hw_id::MP1,   hw_id::GC,    hw_id::SDMA0,  hw_id::HDP};

}  // namespace

// ---- boot memory ------------------------------------------------------------------------

void VramBuffer::write(uint64_t offset, std::span<const std::byte> data) const {
  if (offset > size || size - offset < data.size())
    throw Error("VRAM buffer at " + hex(pa) + ": write of " + hex(data.size()) + " bytes at +" +
                hex(offset) + " is outside its " + hex(size) + " bytes");
  if (data.empty()) return;
  if (cpu) {
    std::memcpy(cpu + offset, data.data(), data.size());
  } else if (port) {
    port->write(pa + offset, data);
  } else {
    throw Error("VRAM buffer at " + hex(pa) + ": neither mapped nor reachable through a port");
  }
}

void VramBuffer::read(uint64_t offset, std::span<std::byte> out) const {
  if (offset > size || size - offset < out.size())
    throw Error("VRAM buffer at " + hex(pa) + ": read of " + hex(out.size()) + " bytes at +" +
                hex(offset) + " is outside its " + hex(size) + " bytes");
  if (out.empty()) return;
  if (cpu) {
    std::memcpy(out.data(), cpu + offset, out.size());
  } else if (port) {
    port->read(pa + offset, out);
  } else {
    throw Error("VRAM buffer at " + hex(pa) + ": neither mapped nor reachable through a port");
  }
}

uint32_t VramBuffer::read32(uint64_t offset) const {
  if (cpu && offset <= size && size - offset >= 4 && offset % 4 == 0)
    return *reinterpret_cast<const volatile uint32_t*>(cpu + offset);  // the GPU writes it
  uint8_t b[4];
  read(offset, std::span<uint8_t>(b));
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

void VramBuffer::zero() const {
  if (cpu) {
    std::memset(cpu, 0, size);
    return;
  }
  // Through the port in pieces of at most 1 MiB.
  const std::vector<std::byte> zeros(std::min<uint64_t>(size, 1 << 20));
  for (uint64_t at = 0; at < size; at += zeros.size())
    write(at, std::span(zeros).first(std::min<uint64_t>(zeros.size(), size - at)));
}

VramBootMemory::VramBootMemory(VramPort& vram, uint64_t begin, uint64_t end, uint64_t fb_base)
    : vram_(vram), begin_(begin), end_(end), fb_base_(fb_base), next_(begin) {
  if (begin % 4096 || end % 4096 || begin > end || end > vram.size())
    throw InvalidInput("boot memory: [" + hex(begin) + ", " + hex(end) +
                       ") is not a 4 KiB-aligned range of the " + hex(vram.size()) +
                       " bytes of VRAM");
}

VramBootMemory::VramBootMemory(std::span<std::byte> vram, uint64_t begin, uint64_t end,
                               uint64_t fb_base)
    : owned_(std::make_unique<MappedVram>(vram.data(), vram.size())),
      vram_(*owned_),
      begin_(begin),
      end_(end),
      fb_base_(fb_base),
      next_(begin) {
  if (begin % 4096 || end % 4096 || begin > end || end > vram.size())
    throw InvalidInput("boot memory: [" + hex(begin) + ", " + hex(end) +
                       ") is not a 4 KiB-aligned range of the " + hex(vram.size()) +
                       " bytes of VRAM");
}

VramBootMemory::~VramBootMemory() = default;

VramBuffer VramBootMemory::alloc(uint64_t size, uint64_t align, const char* what) {
  if (align < 4096 || (align & (align - 1)))
    throw InvalidInput(std::string("boot memory: alignment ") + hex(align) + " for " + what +
                       " is not a power of two of at least 0x1000");
  std::lock_guard lk(mu_);
  const uint64_t at = align_up(next_, align);
  const uint64_t bytes = align_up(size, 4096);
  if (size == 0 || at > end_ || bytes > end_ - at || bytes < size)
    throw Error(std::string("boot memory: no room for ") + what + ": " + hex(size) +
                " bytes aligned to " + hex(align) + " requested, " + hex(end_ - next_) +
                " of [" + hex(begin_) + ", " + hex(end_) + ") left");
  next_ = at + bytes;
  std::byte* mapping = vram_.mapping();
  const VramBuffer buffer{at, fb_base_ + at, bytes, mapping ? mapping + at : nullptr, &vram_};
  buffer.zero();
  return buffer;
}

const Firmware& find_firmware(const std::vector<Firmware>& firmware, FirmwareKind kind) {
  for (const Firmware& f : firmware)
    if (f.kind == kind) return f;
  throw InvalidInput(std::string("AM boot: no ") + firmware_kind_name(kind) +
                     " firmware was read");
}

// ---- report -----------------------------------------------------------------------------

bool PreviousState::booted() const {
  return sos_alive || marker == kHcqBootMarker ||
         (marker & kTinygradMarkerMask) == kTinygradMarker;
}

std::string PreviousState::describe() const {
  std::string out;
  if (marker == kHcqBootMarker)
    out = "booted by hcq (SCRATCH_REG7 " + hex(marker) + ")";
  else if ((marker & kTinygradMarkerMask) == kTinygradMarker)
    out = "booted by tinygrad (SCRATCH_REG7 " + hex(marker) + ")";
  else if (sos_alive)
    out = "booted by another driver (sOS running)";
  else
    out = "cold (sOS not running, no boot marker)";
  return out + (smu_alive ? ", SMU answering" : ", SMU not answering");
}

const BootReport::Phase* BootReport::phase(const std::string& name) const {
  for (const Phase& p : phases)
    if (p.name == name) return &p;
  return nullptr;
}

std::string BootReport::text() const {
  std::string out = "VRAM: " + std::to_string(vram_size >> 20) + " MiB, frame buffer at MC " +
                    hex(fb_base) + "\n";
  out += "found: " + previous.describe() + (reset ? ": mode-1 reset" : "") + "\n";
  out += "IP versions:";
  for (size_t i = 0; i < ip_versions.size(); i++)
    out += (i ? ", " : " ") + ip_versions[i].first + " " + ip_versions[i].second.to_string();
  out += "\nfirmware:";
  if (firmware.empty()) out += " none read";
  for (size_t i = 0; i < firmware.size(); i++)
    out += (i ? ", " : " ") + firmware[i].file + " " + hex(firmware[i].ucode_version) +
           " (feature " + std::to_string(firmware[i].feature_version) + ")";
  out += "\nSMU firmware: ";
  out += smu_version ? std::to_string(smu_version >> 16 & 0xff) + "." +
                           std::to_string(smu_version >> 8 & 0xff) + "." +
                           std::to_string(smu_version & 0xff) + " (" + hex(smu_version) + ")"
                     : std::string("not asked");
  out += "\nphases:";
  for (size_t i = 0; i < phases.size(); i++) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f ms", phases[i].ms);
    out += (i ? ", " : " ") + phases[i].name + " " + (phases[i].run ? ms : "not run");
  }
  return out + "\n";
}

// ---- boot -------------------------------------------------------------------------------

template <class Fn>
void AmBoot::timed(const std::string& name, bool run, Fn&& fn) {
  BootReport::Phase p{name, run, 0};
  if (run) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    p.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count();
  }
  report_.phases.push_back(p);
}

AmBoot::AmBoot(os::Mmio& regs, VramPort& vram, BootOptions options,
               std::span<const AsicDescription* const> asics)
    : regs_(regs), vram_(vram), options_(std::move(options)) {
  discover_and_read_firmware(asics);
}

AmBoot::AmBoot(os::Mmio& regs, std::span<std::byte> vram, BootOptions options,
               std::span<const AsicDescription* const> asics)
    : regs_(regs),
      owned_vram_(std::make_unique<MappedVram>(vram.data(), vram.size())),
      vram_(*owned_vram_),
      options_(std::move(options)) {
  discover_and_read_firmware(asics);
}

void AmBoot::discover_and_read_firmware(std::span<const AsicDescription* const> asics) {
  timed("discovery", true, [&] {
    // RCC_CONFIG_MEMSIZE sits at a fixed dword: readable before any segment base is known.
    vram_size_ = read_vram_size(regs_);
    if (vram_.size() < vram_size_)
      throw Error(regs_.name() + ": the VRAM BAR maps " + hex(vram_.size()) + " of the " +
                  hex(vram_size_) +
                  " bytes of VRAM RCC_CONFIG_MEMSIZE reports; hcq's AM driver needs all of VRAM "
                  "mapped (resizable BAR enabled)");
    if (vram_size_ <= kReservedTopBytes + kBootMemoryBytes)
      throw Error(regs_.name() + ": " + hex(vram_size_) + " bytes of VRAM leave nothing below " +
                  "the firmware's reservation and the boot memory");
    const uint64_t at = discovery_table_offset(vram_size_);
    std::vector<std::byte> table(kDiscoveryTmrSize);
    vram_.read(at, table);
    discovery_ = parse_discovery(table);
    asic_ = &find_asic(discovery_, asics);
    IpSegmentBases bases = segment_bases(discovery_);
    bases.tables = asic_->register_tables;
    io_ = std::make_unique<RegisterIo>(regs_, bases);
    // NBIO's SMN index/data pair (segment 1) for registers past the window's end (tinygrad
    // amdev.py indirect_rreg).
    if (bases[Ip::NBIO].size() > 1)
      smn_ = std::make_unique<os::IndexDataRegs>(regs_,
                                                 rsmu_layout_nbio_4_3_0(bases[Ip::NBIO][1]));
    // FB_BASE is in 16 MiB units (tinygrad AM_GMC.init_sw mc_base; Linux
    // mmhub_v3_0_get_fb_location).
    fb_base_ = uint64_t(mmhub_3_0_0::fields::MMMC_VM_FB_LOCATION_BASE::FB_BASE.get(
                   io_->read(mmhub_3_0_0::MMMC_VM_FB_LOCATION_BASE)))
               << 24;
    smu_ = std::make_unique<Smu>(*io_, Smu::kDefaultTimeout, options_.smu_mailbox);
    hdp_ = std::make_unique<Hdp>(*io_, regs_);
    const uint64_t boot_end = vram_size_ - kReservedTopBytes;
    memory_ = std::make_unique<VramBootMemory>(vram_, boot_end - kBootMemoryBytes, boot_end,
                                               fb_base_);
    report_.vram_size = vram_size_;
    report_.fb_base = fb_base_;
    for (uint16_t id : kReportedIps)
      if (discovery_.has(id)) report_.ip_versions.emplace_back(hw_id_name(id), discovery_.version(id));
  });
  timed("firmware", !options_.firmware_dir.empty(), [&] {
    for (const std::string& name : asic_->firmware) {
      firmware_.push_back(load_firmware(name, options_.firmware_dir));
      report_.firmware.push_back(
          {name, firmware_.back().ucode_version, firmware_.back().feature_version});
    }
  });
}

BootContext AmBoot::context(uint64_t page_table_base) {
  return BootContext{*this,     *io_,       *memory_, *smu_,    discovery_,      firmware_,
                     vram_size_, fb_base_, page_table_base, options_.timeout, hdp_.get(),
                     options_.psp_mailbox};
}

PreviousState AmBoot::inspect() {
  PreviousState s;
  s.sos_alive = io_->read(mp_13_0_0::MP0_SMN_C2PMSG_81) != 0;
  s.marker = io_->read(gc_11_0_0::SCRATCH_REG7);
  // Not under the device's mailbox lock: a cold SMU never answers, and the section left busy
  // would make the first message of the booted SMU wait for that answer.
  Smu probe(*io_, kSmuProbeTimeout);
  try {
    probe.version();
    s.smu_alive = true;
  } catch (const TimeoutError&) {
    s.smu_alive = false;
  } catch (const Error&) {
    s.smu_alive = true;  // it answered, with an error code
  }
  return s;
}

void AmBoot::mode1_reset() {
  // Linux amdgpu_device_mode1_reset: bus mastering off, the reset, PCI state restored, then
  // RCC_CONFIG_MEMSIZE polled until it no longer reads all ones.
  if (options_.bus_master) options_.bus_master(false);
  smu_->mode1_reset();
  std::this_thread::sleep_for(options_.reset_settle);
  if (options_.bus_master) options_.bus_master(true);
  io_->wait_not(describe(nbio_4_3_0::RCC_CONFIG_MEMSIZE), 0xffffffff, 0xffffffff,
                options_.timeout);
  // The reset stops the PSP: its sOS must come back only when the PSP phase loads it.
  io_->wait(describe(mp_13_0_0::MP0_SMN_C2PMSG_81), 0xffffffff, 0, options_.timeout);
}

uint32_t AmBoot::read_any(const RegDesc& r) {
  const uint64_t at = io_->byte_offset(r);
  if (at < regs_.size()) return io_->read(r);
  if (!smn_) throw Error(std::string(r.name) + ": past " + regs_.name() + " and no SMN pair");
  return smn_->read32(at);
}

void AmBoot::write_any(const RegDesc& r, uint32_t value) {
  const uint64_t at = io_->byte_offset(r);
  if (at < regs_.size()) return io_->write(r, value);
  if (!smn_) throw Error(std::string(r.name) + ": past " + regs_.name() + " and no SMN pair");
  smn_->write32(at, value);
}

void AmBoot::soc_init() {
  // tinygrad AM_SOC.init_hw (NBIO 4.3.0): function 2's no-soft-reset strap cleared, then the
  // doorbell aperture on (Linux nbio_v4_3_enable_doorbell_aperture).
  const RegDesc& strap = describe(nbio_4_3_0::RCC_DEV0_EPF2_STRAP2);
  namespace nbiof = nbio_4_3_0::fields;
  write_any(strap,
            nbiof::RCC_DEV0_EPF2_STRAP2::STRAP_NO_SOFT_RESET_DEV0_F2.set(read_any(strap), 0));
  io_->write(nbio_4_3_0::RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN,
             nbiof::RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN::BIF_DOORBELL_APER_EN.set(0, 1));
  // Linux soc21_common_hw_init: the HDP flush registers into the register BAR's remap page
  // before anything writes VRAM for the GPU to read.
  hdp_->remap();
  // What was written before the remap (VMID 0's page-table root) is flushed now.
  hdp_->flush();
}

void AmBoot::smu_init() {
  // tinygrad AM_SMU.init_hw: where the driver table is, then every feature on.
  report_.smu_version = smu_->version();
  const VramBuffer table = memory_->alloc(kSmuDriverTableBytes, 4096, "the SMU driver table");
  smu_->set_driver_dram_address(table.mc);
  smu_->enable_all_features();
}

const BootReport& AmBoot::run(AmAsic& asic, uint64_t page_table_base) {
  page_table_base_ = page_table_base;
  report_.previous = inspect();
  report_.reset =
      report_.previous.smu_alive && (report_.previous.booted() || options_.force_reset);
  timed("reset", report_.reset, [&] { mode1_reset(); });
  BootContext ctx = context(page_table_base);
  for (AmAsic::Block& b : asic.blocks())
    timed(block_kind_name(b.spec.kind), b.driver != nullptr, [&] { b.driver->init(ctx); });
  io_->write(gc_11_0_0::SCRATCH_REG7, kHcqBootMarker);
  return report_;
}

void AmBoot::shutdown(AmAsic& asic) {
  BootContext ctx = context(page_table_base_);
  asic.shutdown(ctx);
}

}  // namespace hcq::amd::am
