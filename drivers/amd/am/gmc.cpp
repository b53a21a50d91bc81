#include "amd/am/gmc.hpp"

#include <initializer_list>
#include <utility>

#include "amd/am/hub_regs.hpp"
#include "amd/am/pte.hpp"
#include "core/error.hpp"

namespace hcq::amd::am {

namespace {

// The hub's registers (hub_regs.hpp).
const HubRegs& hub_regs(Hub hub) { return hub == Hub::Gc ? kGcHubRegs : kMmHubRegs; }
namespace hubf = hub_fields;

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
  const HubRegs& h = hub_regs(hub);
  auto rmw = [&](const Reg& r, FieldValues fields) {
    regs_.write(r, with_fields(regs_.read(r), fields));
  };

  // The frame buffer as the VBIOS placed it (gfxhub_v3_0_get_fb_location: FB_BASE << 24);
  // its last byte as Linux's gmc.fb_end (fb_start + VRAM size - 1, TOP covering 16 MiB units).
  const uint64_t fb_start =
      uint64_t(hubf::GCMC_VM_FB_LOCATION_BASE::FB_BASE.get(regs_.read(h.MC_VM_FB_LOCATION_BASE)))
      << 24;
  const uint64_t fb_end =
      (uint64_t(hubf::GCMC_VM_FB_LOCATION_TOP::FB_TOP.get(regs_.read(h.MC_VM_FB_LOCATION_TOP)))
       << 24) |
      0xffffff;

  // init_gart_aperture_regs (setup_vm_pt_regs): context 0's root and VA range (>> 12).
  regs_.write(h.VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32, uint32_t(ctx.page_table_base));
  regs_.write(h.VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32, uint32_t(ctx.page_table_base >> 32));
  regs_.write(h.VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32, uint32_t(ctx.va_start >> 12));
  regs_.write(h.VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32, uint32_t(ctx.va_start >> 44));
  regs_.write(h.VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32, uint32_t(ctx.va_end >> 12));
  regs_.write(h.VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32, uint32_t(ctx.va_end >> 44));

  // init_system_aperture_regs: AGP off (BOT above TOP: amdgpu_gmc's agp_start 0xffffffffffff
  // and agp_end 0 when there is no AGP aperture), the system aperture over the frame buffer,
  // the default page (a VRAM PA) and the protection fault's dummy page.
  regs_.write(h.MC_VM_AGP_BASE, 0);
  regs_.write(h.MC_VM_AGP_BOT, uint32_t(0xffffffffffffull >> 24));
  regs_.write(h.MC_VM_AGP_TOP, 0);
  regs_.write(h.MC_VM_SYSTEM_APERTURE_LOW_ADDR, uint32_t(fb_start >> 18));
  regs_.write(h.MC_VM_SYSTEM_APERTURE_HIGH_ADDR, uint32_t(fb_end >> 18));
  regs_.write(h.MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB, uint32_t(scratch_.pa >> 12));
  regs_.write(h.MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB, uint32_t(scratch_.pa >> 44));
  regs_.write(h.VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32, uint32_t(dummy_.pa >> 12));
  regs_.write(h.VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32, uint32_t(dummy_.pa >> 44));
  rmw(h.VM_L2_PROTECTION_FAULT_CNTL2,
      {{hubf::GCVM_L2_PROTECTION_FAULT_CNTL2::ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY, 1}});

  // init_tlb_regs.
  rmw(h.MC_VM_MX_L1_TLB_CNTL, {{hubf::GCMC_VM_MX_L1_TLB_CNTL::ENABLE_L1_TLB, 1},
                               {hubf::GCMC_VM_MX_L1_TLB_CNTL::SYSTEM_ACCESS_MODE, 3},
                               {hubf::GCMC_VM_MX_L1_TLB_CNTL::ENABLE_ADVANCED_DRIVER_MODEL, 1},
                               {hubf::GCMC_VM_MX_L1_TLB_CNTL::SYSTEM_APERTURE_UNMAPPED_ACCESS, 0},
                               {hubf::GCMC_VM_MX_L1_TLB_CNTL::ECO_BITS, 0},
                               {hubf::GCMC_VM_MX_L1_TLB_CNTL::MTYPE, kMtypeUc}});

  // init_cache_regs (no translate-further on gfx11: BANK_SELECT 9, BIGK fragment 6).
  rmw(h.VM_L2_CNTL, {{hubf::GCVM_L2_CNTL::ENABLE_L2_CACHE, 1},
                     {hubf::GCVM_L2_CNTL::ENABLE_L2_FRAGMENT_PROCESSING, 0},
                     {hubf::GCVM_L2_CNTL::ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY, 1},
                     {hubf::GCVM_L2_CNTL::L2_PDE0_CACHE_TAG_GENERATION_MODE, 0},
                     {hubf::GCVM_L2_CNTL::PDE_FAULT_CLASSIFICATION, 0},
                     {hubf::GCVM_L2_CNTL::CONTEXT1_IDENTITY_ACCESS_MODE, 1},
                     {hubf::GCVM_L2_CNTL::IDENTITY_MODE_FRAGMENT_SIZE, 0}});
  rmw(h.VM_L2_CNTL2, {{hubf::GCVM_L2_CNTL2::INVALIDATE_ALL_L1_TLBS, 1},
                      {hubf::GCVM_L2_CNTL2::INVALIDATE_L2_CACHE, 1}});
  regs_.write(h.VM_L2_CNTL3, with_fields(l2_cntl3_default(hub),
                                         {{hubf::GCVM_L2_CNTL3::BANK_SELECT, 9},
                                          {hubf::GCVM_L2_CNTL3::L2_CACHE_BIGK_FRAGMENT_SIZE, 6}}));
  regs_.write(h.VM_L2_CNTL4, with_fields(kL2Cntl4Default,
                                         {{hubf::GCVM_L2_CNTL4::VMC_TAP_PDE_REQUEST_PHYSICAL, 0},
                                          {hubf::GCVM_L2_CNTL4::VMC_TAP_PTE_REQUEST_PHYSICAL, 0}}));
  regs_.write(
      h.VM_L2_CNTL5,
      with_fields(kL2Cntl5Default, {{hubf::GCVM_L2_CNTL5::L2_CACHE_SMALLK_FRAGMENT_SIZE, 0}}));

  // enable_system_domain, with tinygrad's context 0: PAGE_TABLE_DEPTH 3 (PDB2 root, four
  // levels), block size 0 (9 bits), no retry, every fault kind reported (interrupt) and sent
  // to the default page (the fault bits Linux's setup_vmid_config and vm_cntx_cntl_vm_fault
  // give contexts 1-15).
  rmw(h.VM_CONTEXT0_CNTL,
      {{hubf::GCVM_CONTEXT0_CNTL::ENABLE_CONTEXT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::PAGE_TABLE_DEPTH, 3},
       {hubf::GCVM_CONTEXT0_CNTL::PAGE_TABLE_BLOCK_SIZE, 0},
       {hubf::GCVM_CONTEXT0_CNTL::RETRY_PERMISSION_OR_INVALID_PAGE_FAULT, 0},
       {hubf::GCVM_CONTEXT0_CNTL::RANGE_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::RANGE_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::DUMMY_PAGE_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::PDE0_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::PDE0_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::VALID_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::VALID_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::READ_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::READ_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::WRITE_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::WRITE_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::EXECUTE_PROTECTION_FAULT_ENABLE_INTERRUPT, 1},
       {hubf::GCVM_CONTEXT0_CNTL::EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT, 1}});

  // disable_identity_aperture: LOW above HIGH.
  regs_.write(h.VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32, 0xffffffff);
  regs_.write(h.VM_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32, 0x0000000f);
  regs_.write(h.VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32, 0);
  regs_.write(h.VM_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32, 0);
  regs_.write(h.VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32, 0);
  regs_.write(h.VM_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32, 0);

  // setup_vmid_config (contexts 1-15) is left out: hcq runs everything in context 0.

  // program_invalidation: every engine may invalidate the whole range.
  for (int e = 0; e < kHubInvalidationEngines; ++e) {
    regs_.write(h.range_lo[e], 0xffffffff);
    regs_.write(h.range_hi[e], 0x1f);
  }

  // set_fault_enable_default(true) (gmc_v11_0_gart_enable with amdgpu_vm_fault_stop off):
  // faults go to the default page rather than stopping the hub. (GC's CP_DEBUG
  // CPG_UTCL1_ERROR_HALT_DISABLE, which Linux sets there too, is the GFX piece's.)
  rmw(h.VM_L2_PROTECTION_FAULT_CNTL,
      {{hubf::GCVM_L2_PROTECTION_FAULT_CNTL::RANGE_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::PDE0_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::PDE1_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::PDE2_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::TRANSLATE_FURTHER_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::NACK_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::DUMMY_PAGE_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::VALID_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::READ_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::WRITE_PROTECTION_FAULT_ENABLE_DEFAULT, 1},
       {hubf::GCVM_L2_PROTECTION_FAULT_CNTL::EXECUTE_PROTECTION_FAULT_ENABLE_DEFAULT, 1}});

  std::lock_guard lock(mu_);
  if (hub == Hub::Mm) fb_base_ = fb_start;
  ready_[int(hub)] = true;
}

void Gmc::invalidate(Hub hub) {
  std::lock_guard lock(mu_);
  if (!ready_[int(hub)])
    throw Error(std::string(hub == Hub::Gc ? "GC" : "MM") +
                " hub invalidation before the hub was initialized");
  static_assert(kEngine == 17, "HubRegs names engine 17's registers");
  const HubRegs& h = hub_regs(hub);
  const Reg& sem = h.VM_INVALIDATE_ENG17_SEM;
  const Reg& req = h.VM_INVALIDATE_ENG17_REQ;
  const Reg& ack = h.VM_INVALIDATE_ENG17_ACK;
  // Linux takes the semaphore on the MM hub only ("TODO: ... GFXHUB as well"); so does
  // tinygrad. A read returning 1 grants it; writing 0 releases it.
  const bool use_semaphore = hub == Hub::Mm;
  if (use_semaphore) regs_.wait(sem, 0x1, 0x1, timeout_);

  // gfxhub/mmhub_v3_0_get_invalidate_req(vmid 0, flush type 0).
  const uint32_t request =
      with_fields(0, {{hubf::GCVM_INVALIDATE_ENG17_REQ::PER_VMID_INVALIDATE_REQ, 1u << 0},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::FLUSH_TYPE, 0},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::INVALIDATE_L2_PTES, 1},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::INVALIDATE_L2_PDE0, 1},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::INVALIDATE_L2_PDE1, 1},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::INVALIDATE_L2_PDE2, 1},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::INVALIDATE_L1_PTES, 1},
                      {hubf::GCVM_INVALIDATE_ENG17_REQ::CLEAR_PROTECTION_FAULT_STATUS_ADDR, 0}});
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
    const Reg& cid2 = mmhub_3_0_0::MMVM_L2_BANK_SELECT_RESERVED_CID2;
    regs_.write(cid2, with_fields(regs_.read(cid2),
                                  {{mmhub_3_0_0::fields::MMVM_L2_BANK_SELECT_RESERVED_CID2::
                                        RESERVED_CACHE_PRIVATE_INVALIDATION,
                                    1}}));
    regs_.read(cid2);
  }
}

std::optional<GpuFaultInfo> Gmc::read_fault(Hub hub) {
  const HubRegs& h = hub_regs(hub);
  const Reg& status_reg = h.VM_L2_PROTECTION_FAULT_STATUS;
  // gmc_v11_0_process_interrupt reads the GC hub's status twice: the first read waits for the
  // status to be updated behind the fast GRBM interface.
  if (hub == Hub::Gc) regs_.read(status_reg);
  const uint32_t status = regs_.read(status_reg);
  if (status == 0) return std::nullopt;
  const uint64_t lo = regs_.read(h.VM_L2_PROTECTION_FAULT_ADDR_LO32);
  const uint64_t hi = hubf::GCVM_L2_PROTECTION_FAULT_ADDR_HI32::LOGICAL_PAGE_ADDR_HI4.get(
      regs_.read(h.VM_L2_PROTECTION_FAULT_ADDR_HI32));
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
  const Reg& cntl = hub_regs(hub).VM_L2_PROTECTION_FAULT_CNTL;
  regs_.write(
      cntl,
      with_fields(regs_.read(cntl),
                  {{hubf::GCVM_L2_PROTECTION_FAULT_CNTL::CLEAR_PROTECTION_FAULT_STATUS_ADDR, 1}}));
}

}  // namespace hcq::amd::am
