#include "amd/am/gmc.hpp"

#include <initializer_list>
#include <utility>

#include "amd/am/pte.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {

namespace {

using FieldValues = std::initializer_list<std::pair<const char*, uint32_t>>;

// The hubs' registers are named alike: GCVM_*/MMVM_* and GCMC_VM_*/MMMC_VM_*.
const RegDesc& reg(Hub hub, const std::string& rest) {
  return find_register(std::string(hub == Hub::Gc ? "GC" : "MM") + rest);
}

// The registers each hub's invalidation and fault handling use after boot, as compile-time
// constants (a typo is a build error; no name lookup on an unmap or a fault). Indexed by Hub.
struct HubRuntimeRegs {
  Reg inv_sem, inv_req, inv_ack, fault_status, fault_addr_lo, fault_addr_hi, fault_cntl;
};
static_assert(int(Hub::Mm) == 0 && int(Hub::Gc) == 1);
constexpr HubRuntimeRegs kHubRegs[2] = {
    {mmhub_3_0_0::MMVM_INVALIDATE_ENG17_SEM, mmhub_3_0_0::MMVM_INVALIDATE_ENG17_REQ,
     mmhub_3_0_0::MMVM_INVALIDATE_ENG17_ACK, mmhub_3_0_0::MMVM_L2_PROTECTION_FAULT_STATUS,
     mmhub_3_0_0::MMVM_L2_PROTECTION_FAULT_ADDR_LO32,
     mmhub_3_0_0::MMVM_L2_PROTECTION_FAULT_ADDR_HI32, mmhub_3_0_0::MMVM_L2_PROTECTION_FAULT_CNTL},
    {gc_11_0_0::GCVM_INVALIDATE_ENG17_SEM, gc_11_0_0::GCVM_INVALIDATE_ENG17_REQ,
     gc_11_0_0::GCVM_INVALIDATE_ENG17_ACK, gc_11_0_0::GCVM_L2_PROTECTION_FAULT_STATUS,
     gc_11_0_0::GCVM_L2_PROTECTION_FAULT_ADDR_LO32, gc_11_0_0::GCVM_L2_PROTECTION_FAULT_ADDR_HI32,
     gc_11_0_0::GCVM_L2_PROTECTION_FAULT_CNTL}};
const HubRuntimeRegs& runtime_regs(Hub hub) { return kHubRegs[int(hub)]; }

uint32_t with(const RegDesc& r, uint32_t value, FieldValues fields) {
  for (const auto& [name, v] : fields) value = r.field(name).set(value, v);
  return value;
}

// Linux soc15 MTYPE_UC (gfxhub_v3_0_init_tlb_regs "UC, uncached"); pte.def's MTYPE UC.
constexpr uint32_t kMtypeUc = uint32_t(pte::MTYPE_UC);

// The hubs' register defaults: L2_CNTL3 by hub (l2_cntl3_default); CNTL4 and CNTL5 are the same
// on both (gc_11_0_0_default.h, mmhub_v3_0.c). With the fields init_hub sets, both hubs get
// the values tinygrad's init_hub writes (L2_CNTL3 0x80130009, CNTL4 0x1, CNTL5 0x3fe0).
constexpr uint32_t kL2Cntl4Default = 0x000000c1;
constexpr uint32_t kL2Cntl5Default = 0x00003fe0;

// Invalidation engine 17 is the one Linux uses for its own flushes ("Use register 17 for
// GART", gmc_v11_0_flush_gpu_tlb); tinygrad uses it for everything.
constexpr int kEngine = 17;
constexpr int kEngines = 18;

// gfxhub_v3_0.c gfxhub_client_ids.
constexpr const char* kGfxhubClients[] = {
    "CB/DB",      "Reserved",   "GE1", "GE2",      "CPF",   "CPC",   "CPG", "RLC",   "TCP",
    "SQC (inst)", "SQC (data)", "SQG", "Reserved", "SDMA0", "SDMA1", "GCR", "SDMA2", "SDMA3",
};

// mmhub_v3_0.c mmhub_client_ids_v3_0_0[cid][rw] (reads, then writes).
struct MmClient {
  uint32_t cid;
  bool write;
  const char* name;
};
constexpr MmClient kMmhubClients[] = {
    {0, false, "VMC"},   {4, false, "DCEDMC"}, {5, false, "DCEVGA"},  {6, false, "MP0"},
    {7, false, "MP1"},   {8, false, "MPIO"},   {16, false, "HDP"},    {17, false, "LSDMA"},
    {18, false, "JPEG"}, {19, false, "VCNU0"}, {21, false, "VSCH"},   {22, false, "VCNU1"},
    {23, false, "VCN1"}, {52, false, "VCN0"},  {2, true, "DBGUNBIO"}, {3, true, "DCEDWB"},
    {4, true, "DCEDMC"}, {5, true, "DCEVGA"},  {6, true, "MP0"},      {7, true, "MP1"},
    {8, true, "MPIO"},   {10, true, "DBGU0"},  {11, true, "DBGU1"},   {12, true, "DBGU2"},
    {13, true, "DBGU3"}, {14, true, "XDP"},    {15, true, "OSSSYS"},  {16, true, "HDP"},
    {17, true, "LSDMA"}, {18, true, "JPEG"},   {19, true, "VCNU0"},   {20, true, "VCN0"},
    {21, true, "VSCH"},  {22, true, "VCNU1"},  {23, true, "VCN1"},
};

// PERMISSION_FAULTS read as one bit per failed check (1 valid, 2 read, 4 write, 8 execute):
// no public header defines the bits; docs/am.md gives the public fault logs this rests on.
std::string fault_kind(uint32_t status) {
  const uint32_t walker = uint32_t(fault_status::WALKER_ERROR.get(status));
  const uint32_t permission = uint32_t(fault_status::PERMISSION_FAULTS.get(status));
  if (walker) return std::string("page-table walker error ") + std::to_string(walker);
  if (fault_status::MAPPING_ERROR.get(status)) return "mapping error";
  if (permission & 1) return "page not valid";
  if (permission & 2) return "page not readable";
  if (permission & 4) return "page not writable";
  if (permission & 8) return "page not executable";
  return "no fault kind reported";
}

}  // namespace

const char* hub_name(Hub hub) { return hub == Hub::Gc ? "gfxhub" : "mmhub"; }

uint32_t l2_cntl3_default(Hub hub) { return hub == Hub::Gc ? 0x80120007 : 0x80100007; }

const char* fault_client_name(Hub hub, uint32_t cid, bool write) {
  if (hub == Hub::Gc) return cid < std::size(kGfxhubClients) ? kGfxhubClients[cid] : "unknown";
  for (const MmClient& c : kMmhubClients)
    if (c.cid == cid && c.write == write) return c.name;
  return "unknown";
}

std::string GpuFaultInfo::describe() const {
  namespace fs = fault_status;
  return std::string(hub_name(hub)) + " page fault at " + hex(address) + " by " +
         fault_client_name(hub, client, write) + " (client " + hex(client) + "), " +
         (write ? "write" : "read") + ": " + fault_kind(status) + " (status " + hex(status) +
         ": MORE_FAULTS " + std::to_string(fs::MORE_FAULTS.get(status)) + ", WALKER_ERROR " +
         std::to_string(fs::WALKER_ERROR.get(status)) + ", PERMISSION_FAULTS " +
         hex(fs::PERMISSION_FAULTS.get(status)) + ", MAPPING_ERROR " +
         std::to_string(fs::MAPPING_ERROR.get(status)) + ")";
}

Gmc::Gmc(RegisterIo& regs, BootMemory& memory, std::chrono::microseconds timeout)
    : regs_(regs),
      timeout_(timeout),
      scratch_(memory.alloc(kPageBytes, kPageBytes, "GMC default page")),
      dummy_(memory.alloc(kPageBytes, kPageBytes, "GMC dummy page")) {}

bool Gmc::hub_ready(Hub hub) const {
  std::lock_guard lock(mu_);
  return ready_[int(hub)];
}

void Gmc::init_hub(Hub hub, const HubContext& ctx) {
  auto rmw = [&](const std::string& name, FieldValues fields) {
    const RegDesc& r = reg(hub, name);
    regs_.write(r, with(r, regs_.read(r), fields));
  };
  auto write = [&](const std::string& name, uint32_t v) { regs_.write(reg(hub, name), v); };
  auto write_fields = [&](const std::string& name, uint32_t base, FieldValues fields) {
    const RegDesc& r = reg(hub, name);
    regs_.write(r, with(r, base, fields));
  };

  // The frame buffer as the VBIOS placed it (gfxhub_v3_0_get_fb_location: FB_BASE << 24);
  // its last byte as Linux's gmc.fb_end (fb_start + VRAM size - 1, TOP covering 16 MiB units).
  const RegDesc& fb_base_reg = reg(hub, "MC_VM_FB_LOCATION_BASE");
  const RegDesc& fb_top_reg = reg(hub, "MC_VM_FB_LOCATION_TOP");
  const uint64_t fb_start = uint64_t(fb_base_reg.field("FB_BASE").get(regs_.read(fb_base_reg)))
                            << 24;
  const uint64_t fb_end =
      (uint64_t(fb_top_reg.field("FB_TOP").get(regs_.read(fb_top_reg))) << 24) | 0xffffff;

  // init_gart_aperture_regs (setup_vm_pt_regs): context 0's root and VA range (>> 12).
  write("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", uint32_t(ctx.page_table_base));
  write("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", uint32_t(ctx.page_table_base >> 32));
  write("VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", uint32_t(ctx.va_start >> 12));
  write("VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", uint32_t(ctx.va_start >> 44));
  write("VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", uint32_t(ctx.va_end >> 12));
  write("VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32", uint32_t(ctx.va_end >> 44));

  // init_system_aperture_regs: AGP off (BOT above TOP: amdgpu_gmc's agp_start 0xffffffffffff
  // and agp_end 0 when there is no AGP aperture), the system aperture over the frame buffer,
  // the default page (a VRAM PA) and the protection fault's dummy page.
  write("MC_VM_AGP_BASE", 0);
  write("MC_VM_AGP_BOT", uint32_t(0xffffffffffffull >> 24));
  write("MC_VM_AGP_TOP", 0);
  write("MC_VM_SYSTEM_APERTURE_LOW_ADDR", uint32_t(fb_start >> 18));
  write("MC_VM_SYSTEM_APERTURE_HIGH_ADDR", uint32_t(fb_end >> 18));
  write("MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB", uint32_t(scratch_.pa >> 12));
  write("MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", uint32_t(scratch_.pa >> 44));
  write("VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", uint32_t(dummy_.pa >> 12));
  write("VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", uint32_t(dummy_.pa >> 44));
  rmw("VM_L2_PROTECTION_FAULT_CNTL2", {{"ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY", 1}});

  // init_tlb_regs.
  rmw("MC_VM_MX_L1_TLB_CNTL", {{"ENABLE_L1_TLB", 1},
                               {"SYSTEM_ACCESS_MODE", 3},
                               {"ENABLE_ADVANCED_DRIVER_MODEL", 1},
                               {"SYSTEM_APERTURE_UNMAPPED_ACCESS", 0},
                               {"ECO_BITS", 0},
                               {"MTYPE", kMtypeUc}});

  // init_cache_regs (no translate-further on gfx11: BANK_SELECT 9, BIGK fragment 6).
  rmw("VM_L2_CNTL", {{"ENABLE_L2_CACHE", 1},
                     {"ENABLE_L2_FRAGMENT_PROCESSING", 0},
                     {"ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY", 1},
                     {"L2_PDE0_CACHE_TAG_GENERATION_MODE", 0},
                     {"PDE_FAULT_CLASSIFICATION", 0},
                     {"CONTEXT1_IDENTITY_ACCESS_MODE", 1},
                     {"IDENTITY_MODE_FRAGMENT_SIZE", 0}});
  rmw("VM_L2_CNTL2", {{"INVALIDATE_ALL_L1_TLBS", 1}, {"INVALIDATE_L2_CACHE", 1}});
  write_fields("VM_L2_CNTL3", l2_cntl3_default(hub),
               {{"BANK_SELECT", 9}, {"L2_CACHE_BIGK_FRAGMENT_SIZE", 6}});
  write_fields("VM_L2_CNTL4", kL2Cntl4Default,
               {{"VMC_TAP_PDE_REQUEST_PHYSICAL", 0}, {"VMC_TAP_PTE_REQUEST_PHYSICAL", 0}});
  write_fields("VM_L2_CNTL5", kL2Cntl5Default, {{"L2_CACHE_SMALLK_FRAGMENT_SIZE", 0}});

  // enable_system_domain, with tinygrad's context 0: PAGE_TABLE_DEPTH 3 (PDB2 root, four
  // levels), block size 0 (9 bits), no retry, every fault kind reported (interrupt) and sent
  // to the default page (the fault bits Linux's setup_vmid_config and vm_cntx_cntl_vm_fault
  // give contexts 1-15).
  rmw("VM_CONTEXT0_CNTL", {{"ENABLE_CONTEXT", 1},
                           {"PAGE_TABLE_DEPTH", 3},
                           {"PAGE_TABLE_BLOCK_SIZE", 0},
                           {"RETRY_PERMISSION_OR_INVALID_PAGE_FAULT", 0},
                           {"RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"RANGE_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                           {"DUMMY_PAGE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                           {"PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"PDE0_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                           {"VALID_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"VALID_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                           {"READ_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"READ_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                           {"WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"WRITE_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                           {"EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT", 1},
                           {"EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT", 1}});

  // disable_identity_aperture: LOW above HIGH.
  write("VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", 0xffffffff);
  write("VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32", 0x0000000f);
  write("VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", 0);
  write("VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32", 0);
  write("VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", 0);
  write("VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32", 0);

  // setup_vmid_config (contexts 1-15) is left out: hcq runs everything in context 0.

  // program_invalidation: every engine may invalidate the whole range.
  for (int e = 0; e < kEngines; ++e) {
    const std::string eng = std::string("VM_INVALIDATE_ENG") + std::to_string(e) + "_ADDR_RANGE_";
    write(eng + "LO32", 0xffffffff);
    write(eng + "HI32", 0x1f);
  }

  // set_fault_enable_default(true) (gmc_v11_0_gart_enable with amdgpu_vm_fault_stop off):
  // faults go to the default page rather than stopping the hub. (GC's CP_DEBUG
  // CPG_UTCL1_ERROR_HALT_DISABLE, which Linux sets there too, is the GFX piece's.)
  rmw("VM_L2_PROTECTION_FAULT_CNTL", {{"RANGE_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"PDE0_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"PDE1_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"PDE2_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"TRANSLATE_FURTHER_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"NACK_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"VALID_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"READ_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"WRITE_PROTECTION_FAULT_ENABLE_DEFAULT", 1},
                                      {"EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT", 1}});

  std::lock_guard lock(mu_);
  if (hub == Hub::Mm) fb_base_ = fb_start;
  ready_[int(hub)] = true;
}

void Gmc::invalidate(Hub hub) {
  std::lock_guard lock(mu_);
  if (!ready_[int(hub)])
    throw Error(std::string(hub == Hub::Gc ? "GC" : "MM") +
                " hub invalidation before the hub was initialized");
  static_assert(kEngine == 17, "kHubRegs names engine 17's registers");
  const RegDesc& sem = describe(runtime_regs(hub).inv_sem);
  const RegDesc& req = describe(runtime_regs(hub).inv_req);
  const RegDesc& ack = describe(runtime_regs(hub).inv_ack);
  // Linux takes the semaphore on the MM hub only ("TODO: ... GFXHUB as well"); so does
  // tinygrad. A read returning 1 grants it; writing 0 releases it.
  const bool use_semaphore = hub == Hub::Mm;
  if (use_semaphore) regs_.wait(sem, 0x1, 0x1, timeout_);

  // gfxhub/mmhub_v3_0_get_invalidate_req(vmid 0, flush type 0).
  const uint32_t request = with(req, 0,
                                {{"PER_VMID_INVALIDATE_REQ", 1u << 0},
                                 {"FLUSH_TYPE", 0},
                                 {"INVALIDATE_L2_PTES", 1},
                                 {"INVALIDATE_L2_PDE0", 1},
                                 {"INVALIDATE_L2_PDE1", 1},
                                 {"INVALIDATE_L2_PDE2", 1},
                                 {"INVALIDATE_L1_PTES", 1},
                                 {"CLEAR_PROTECTION_FAULT_STATUS_ADDR", 0}});
  regs_.write(req, request);
  try {
    regs_.wait(ack, 1u << 0, 1u << 0, timeout_);
  } catch (...) {
    if (use_semaphore) regs_.write(sem, 0);
    throw;
  }
  if (use_semaphore) regs_.write(sem, 0);

  // The MM hub's private invalidation after the flush, read back to finish it
  // (gmc_v11_0_flush_gpu_tlb: bit 25 RESERVED_CACHE_PRIVATE_INVALIDATION).
  if (hub == Hub::Mm) {
    const RegDesc& cid2 = describe(mmhub_3_0_0::MMVM_L2_BANK_SELECT_RESERVED_CID2);
    regs_.write(cid2, with(cid2, regs_.read(cid2), {{"RESERVED_CACHE_PRIVATE_INVALIDATION", 1}}));
    regs_.read(cid2);
  }
}

std::optional<GpuFaultInfo> Gmc::read_fault(Hub hub) {
  const RegDesc& status_reg = describe(runtime_regs(hub).fault_status);
  // gmc_v11_0_process_interrupt reads the GC hub's status twice: the first read waits for the
  // status to be updated behind the fast GRBM interface.
  if (hub == Hub::Gc) regs_.read(status_reg);
  const uint32_t status = regs_.read(status_reg);
  if (status == 0) return std::nullopt;
  const uint64_t lo = regs_.read(runtime_regs(hub).fault_addr_lo);
  const RegDesc& hi_reg = describe(runtime_regs(hub).fault_addr_hi);
  const uint64_t hi = hi_reg.field("LOGICAL_PAGE_ADDR_HI4").get(regs_.read(hi_reg));
  GpuFaultInfo f;
  f.hub = hub;
  f.address = (lo << 12) | (hi << 44);
  f.status = status;
  f.client = uint32_t(fault_status::CID.get(status));
  f.write = fault_status::RW.get(status) != 0;
  return f;
}

void Gmc::clear_fault(Hub hub) {
  // WREG32_P(vm_l2_pro_fault_cntl, 1, ~1) in gmc_v11_0_process_interrupt.
  const RegDesc& cntl = describe(runtime_regs(hub).fault_cntl);
  regs_.write(cntl, with(cntl, regs_.read(cntl), {{"CLEAR_PROTECTION_FAULT_STATUS_ADDR", 1}}));
}

}  // namespace hcq::amd::am
