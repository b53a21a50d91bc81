#include "amd/encoders.hpp"

#include "amd/code_object.hpp"
#include "core/error.hpp"

#include <cstring>

namespace hcq::amd {

using namespace pm4;

namespace {
constexpr uint32_t lo(uint64_t v) { return uint32_t(v); }
constexpr uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }
// Dword 0 of every PM4 and SDMA packet, written whole (its fields: HEADER_* in the .def files).
constexpr Field kHeader{"HEADER", ALL, 0, 0, 32};
// WAIT_REG_MEM's poll interval: Linux gfx_v9_0_ring_emit_pipeline_sync and tinygrad use 4.
constexpr uint32_t kWaitPollInterval = 4;
// ACQUIRE_MEM's poll interval: Linux gfx_v10_0 / gfx_v11_0 emit_mem_sync use 0xA.
constexpr uint32_t kAcquirePollInterval = 0xA;
// SDMA POLL_REGMEM's interval: Linux sdma_v6_0_ring_emit_reg_wait uses 4 (10 on older SDMA).
constexpr uint32_t kSdmaPollInterval = 4;
// LDS is allocated in 512-byte blocks on gfx7+ compute (Mesa ac_shader_util.c
// ac_shader_encode_lds_size, COMPUTE_PGM_RSRC2.LDS_SIZE).
constexpr uint32_t kLdsBlockBytes = 512;
// COMPUTE_PGM_LO/HI hold the code address in 256-byte units (Mesa si_emit_dispatch: va >> 8).
constexpr unsigned kPgmAddressShift = 8;

// A PM4 packet of `body` body dwords at the end of `cs`, its header written.
HCQ_DESC_INLINE desc::PacketWriter pm4_packet(CommandStream& cs, Op op, uint32_t body,
                              std::vector<PatchSite>* s = nullptr) {
  desc::PacketWriter w(cs, 1 + body, s);
  w.set(kHeader, header(op, body));
  return w;
}
HCQ_DESC_INLINE desc::PacketWriter sdma_packet(CommandStream& cs, sdma::Op op,
                                               std::vector<PatchSite>* s) {
  desc::PacketWriter w(cs, sdma::packet_dwords(op), s);
  w.set(kHeader, sdma::header(op));
  return w;
}
}  // namespace

// ---- PM4 ------------------------------------------------------------------------------

Pm4Encoder::Pm4Encoder(Gen gen, InterruptTarget irq)
    : gen_(gen), irq_(irq), rsrc3_reg_(regs::address("COMPUTE_PGM_RSRC3", gen)),
      wait64_(exists(WAIT_REG_MEM64, gen)) {}

void Pm4Encoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  if (!wait64_) {
    // gfx9 and gfx10.3 MEC (pm4.def says why): the 32-bit WAIT_REG_MEM Linux's gfx9 and gfx10
    // code uses (gfx_v9_0_wait_reg_mem, gfx_v10_0_wait_reg_mem).
    // The 64-bit >= as two 32-bit >= polls: the high word reaches H, then the low word L.
    wait_reg_mem32(cs, va + 4, hi(value), 4, PatchFormat::Hi32, s);
    wait_reg_mem32(cs, va, lo(value), 0, PatchFormat::Lo32, s);
    return;
  }
  // gfx11+: WAIT_REG_MEM64 (Linux nvd.h PACKET3_WAIT_REG_MEM64), one 64-bit compare.
  pm4_packet(cs, WAIT_REG_MEM64, body_dwords(WAIT_REG_MEM64, gen_), &s)
      .set(WAIT_REG_MEM64_FUNCTION, V_WAIT_REG_MEM64_FUNCTION_GREATER_EQUAL)
      .set(WAIT_REG_MEM64_MEM_SPACE, V_WAIT_REG_MEM64_MEM_SPACE_MEMORY)
      .set64(WAIT_REG_MEM64_ADDRESS_LO, WAIT_REG_MEM64_ADDRESS_HI, va, PatchRole::WaitAddress)
      .set64(WAIT_REG_MEM64_REFERENCE_LO, WAIT_REG_MEM64_REFERENCE_HI, value, PatchRole::WaitValue)
      .set64(WAIT_REG_MEM64_MASK_LO, WAIT_REG_MEM64_MASK_HI, ~uint64_t{0})
      .set(WAIT_REG_MEM64_POLL_INTERVAL, kWaitPollInterval);
}

void Pm4Encoder::wait_reg_mem32(CommandStream& cs, uint64_t va, uint32_t ref, uint64_t add,
                                PatchFormat half, std::vector<PatchSite>& s) {
  pm4_packet(cs, WAIT_REG_MEM, body_dwords(WAIT_REG_MEM, Gen::Gfx9), &s)
      .set(WAIT_REG_MEM_FUNCTION, V_WAIT_REG_MEM_FUNCTION_GREATER_EQUAL)
      .set(WAIT_REG_MEM_MEM_SPACE, V_WAIT_REG_MEM_MEM_SPACE_MEMORY)
      .set64(WAIT_REG_MEM_ADDRESS_LO, WAIT_REG_MEM_ADDRESS_HI, va, PatchRole::WaitAddress, add)
      .set(WAIT_REG_MEM_REFERENCE, ref)
      .site32(WAIT_REG_MEM_REFERENCE, half, PatchRole::WaitValue)
      .set(WAIT_REG_MEM_MASK, WAIT_REG_MEM_MASK.mask())
      .set(WAIT_REG_MEM_POLL_INTERVAL, kWaitPollInterval);
}

HCQ_DESC_INLINE desc::PacketWriter Pm4Encoder::release_mem(CommandStream& cs, uint32_t data_sel, uint32_t int_sel,
                                           bool cache_flush, std::vector<PatchSite>* s) const {
  auto w = pm4_packet(cs, RELEASE_MEM, body_dwords(RELEASE_MEM, gen_), s);
  w.set(RELEASE_MEM_EVENT_TYPE, V_RELEASE_MEM_EVENT_TYPE_CACHE_FLUSH_AND_INV_TS_EVENT)
      .set(RELEASE_MEM_EVENT_INDEX, V_RELEASE_MEM_EVENT_INDEX_END_OF_PIPE)
      .set(RELEASE_MEM_DATA_SEL, data_sel)
      .set(RELEASE_MEM_INT_SEL, int_sel)
      .set(RELEASE_MEM_DST_SEL, V_RELEASE_MEM_DST_SEL_MEMORY);
  if (cache_flush) {
    switch (gen_) {
      case Gen::Gfx9:  // write back L2 (tinygrad, kfdtest)
        w.set(RELEASE_MEM_TC_WB_ACTION_ENA, 1).set(RELEASE_MEM_TC_NC_ACTION_ENA, 1);
        break;
      // gfx10.3 as gfx11: Linux gfx_v10_0_ring_emit_fence writes back GL2 and GLM (GL2_WB,
      // GLM_WB, GLM_INV, SEQ); the invalidations added here are valid gfx10 GCR bits (nvd.h).
      case Gen::Gfx10:
      case Gen::Gfx11:
        w.set(RELEASE_MEM_GCR_GLV_INV, 1)
            .set(RELEASE_MEM_GCR_GL1_INV, 1)
            .set(RELEASE_MEM_GCR_GL2_INV, 1)
            .set(RELEASE_MEM_GCR_GLM_WB, 1)
            .set(RELEASE_MEM_GCR_GLM_INV, 1)
            .set(RELEASE_MEM_GCR_GL2_WB, 1)
            .set(RELEASE_MEM_GCR_SEQ, 1);
        break;
      case Gen::Gfx12:  // Linux gfx12 fences only write back; invalidation is ACQUIRE_MEM's job
        w.set(RELEASE_MEM_GCR_GL2_WB, 1).set(RELEASE_MEM_GCR_SEQ, 1);
        break;
    }
  }
  return w;
}

void Pm4Encoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                        std::vector<PatchSite>& s) {
  release_mem(cs, V_RELEASE_MEM_DATA_SEL_SEND_64_BIT_DATA, V_RELEASE_MEM_INT_SEL_NONE, true, &s)
      .set64(RELEASE_MEM_ADDRESS_LO, RELEASE_MEM_ADDRESS_HI, va, PatchRole::SignalAddress)
      .set64(RELEASE_MEM_DATA_LO, RELEASE_MEM_DATA_HI, value, PatchRole::SignalValue);
  if (wake)  // write the event id to its mailbox slot and interrupt: KFD wakes the waiters
    release_mem(cs, V_RELEASE_MEM_DATA_SEL_SEND_32_BIT_LOW,
                V_RELEASE_MEM_INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, false, nullptr)
        .set64(RELEASE_MEM_ADDRESS_LO, RELEASE_MEM_ADDRESS_HI, irq_.mailbox_va)
        .set64(RELEASE_MEM_DATA_LO, RELEASE_MEM_DATA_HI, irq_.event_id)
        .set(RELEASE_MEM_INT_CTXID, irq_.event_id);
}

void Pm4Encoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  // The clock lands in the record's second half (Encoder::timestamp); the site is patched
  // with that address.
  release_mem(cs, V_RELEASE_MEM_DATA_SEL_SEND_GPU_CLOCK_COUNTER, V_RELEASE_MEM_INT_SEL_NONE, false,
              &s)
      .set64(RELEASE_MEM_ADDRESS_LO, RELEASE_MEM_ADDRESS_HI, va + 8, PatchRole::TimestampAddress);
}

void Pm4Encoder::memory_barrier(CommandStream& cs) {
  // All of memory: the largest size the fields hold, from address 0.
  auto w = pm4_packet(cs, ACQUIRE_MEM, body_dwords(ACQUIRE_MEM, gen_));
  w.set(ACQUIRE_MEM_COHER_SIZE, ACQUIRE_MEM_COHER_SIZE.mask())
      .set(ACQUIRE_MEM_COHER_SIZE_HI, ACQUIRE_MEM_COHER_SIZE_HI.mask())
      .set(ACQUIRE_MEM_POLL_INTERVAL, kAcquirePollInterval);
  if (gen_ == Gen::Gfx9) {  // Linux gfx_v9_0_emit_mem_sync
    w.set(ACQUIRE_MEM_COHER_SH_ICACHE_ACTION_ENA, 1)
        .set(ACQUIRE_MEM_COHER_SH_KCACHE_ACTION_ENA, 1)
        .set(ACQUIRE_MEM_COHER_TC_ACTION_ENA, 1)
        .set(ACQUIRE_MEM_COHER_TCL1_ACTION_ENA, 1)
        .set(ACQUIRE_MEM_COHER_TC_WB_ACTION_ENA, 1);
    return;
  }
  // Linux gfx_v10_0_emit_mem_sync / gfx_v11_0_emit_mem_sync: invalidate and write back all.
  w.set(ACQUIRE_MEM_GCR_GLI_INV, V_ACQUIRE_MEM_GCR_GLI_INV_ALL)
      .set(ACQUIRE_MEM_GCR_GLM_WB, 1)
      .set(ACQUIRE_MEM_GCR_GLM_INV, 1)
      .set(ACQUIRE_MEM_GCR_GLK_WB, 1)
      .set(ACQUIRE_MEM_GCR_GLK_INV, 1)
      .set(ACQUIRE_MEM_GCR_GLV_INV, 1)
      .set(ACQUIRE_MEM_GCR_GL1_INV, 1)
      .set(ACQUIRE_MEM_GCR_GL2_INV, 1)
      .set(ACQUIRE_MEM_GCR_GL2_WB, 1);
}

void Pm4Encoder::prepare(AmdKernel& k) const {
  using namespace regs;
  const uint32_t nuser = k.kd.user_sgpr_count();
  const int karg = k.kd.kernarg_sgpr();
  const uint64_t pgm = k.code_va >> kPgmAddressShift;
  // Values from the code object: an exact error at program load when they do not fit.
  const uint32_t lds_size = desc::checked(COMPUTE_PGM_RSRC2_LDS_SIZE_ALL,
                                          (uint64_t{k.lds_bytes} + kLdsBlockBytes - 1) /
                                              kLdsBlockBytes,
                                          "COMPUTE_PGM_RSRC2");
  const uint32_t pgm_hi = desc::checked(COMPUTE_PGM_HI_DATA_ALL, hi(pgm), "COMPUTE_PGM_HI");
  // SET_SH_REG writes consecutive registers: these pairs and runs are written together.
  static_assert(COMPUTE_PGM_HI_ALL.address == COMPUTE_PGM_LO_ALL.address + 1);
  static_assert(COMPUTE_PGM_RSRC2_ALL.address == COMPUTE_PGM_RSRC1_ALL.address + 1);
  static_assert(COMPUTE_RESTART_Z_ALL.address == COMPUTE_RESTART_X_ALL.address + 2);
  static_assert(COMPUTE_NUM_THREAD_X_ALL.address == COMPUTE_START_X_ALL.address + 3);
  static_assert(COMPUTE_NUM_THREAD_Z_ALL.address == COMPUTE_START_X_ALL.address + 5);

  CommandStream cs;
  // One SET_SH_REG from `reg` on; returns the stream offset of its first value.
  auto set_sh = [&](uint32_t reg, std::initializer_list<uint32_t> vals) {
    auto w = pm4_packet(cs, SET_SH_REG, SET_SH_REG_VALUES - 1 + uint32_t(vals.size()));
    w.set(SET_SH_REG_REG_OFFSET, reg - kShRegBase);
    uint32_t i = SET_SH_REG_VALUES;
    for (uint32_t v : vals) w.words()[i++] = v;
    return w.at() + SET_SH_REG_VALUES;
  };
  auto& t = k.dispatch;
  set_sh(COMPUTE_PGM_LO_ALL.address, {lo(pgm), pgm_hi});
  set_sh(COMPUTE_PGM_RSRC1_ALL.address, {k.kd.compute_pgm_rsrc1, k.kd.compute_pgm_rsrc2 | lds_size});
  set_sh(rsrc3_reg_, {k.kd.compute_pgm_rsrc3});
  set_sh(COMPUTE_TMPRING_SIZE_ALL.address, {0});
  set_sh(COMPUTE_RESTART_X_ALL.address, {0, 0, 0});
  // User SGPRs in AMDHSA order; only the kernarg segment pointer is provided (programs that
  // need a dispatch packet or scratch are rejected at load). A kernel with none gets no
  // packet: SET_SH_REG always carries a register (Linux gfx_v9_0.c, Mesa ac_cmdbuf.c).
  t.kernarg_at = -1;
  if (nuser > 0) {
    auto w = pm4_packet(cs, SET_SH_REG, SET_SH_REG_VALUES - 1 + nuser);
    w.set(SET_SH_REG_REG_OFFSET, COMPUTE_USER_DATA_0_ALL.address - kShRegBase);
    if (karg >= 0 && uint32_t(karg) + 2 <= nuser)
      t.kernarg_at = int32_t(w.at() + SET_SH_REG_VALUES + uint32_t(karg));
  }
  set_sh(COMPUTE_RESOURCE_LIMITS_ALL.address, {0});
  const uint32_t one = num_thread_full(0, gen_)(1);
  t.block_at = set_sh(COMPUTE_START_X_ALL.address, {0, 0, 0, one, one, one}) +
               (COMPUTE_NUM_THREAD_X_ALL.address - COMPUTE_START_X_ALL.address);
  uint32_t initiator = COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN_ALL(1) |
                       COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000_ALL(1);
  if (gen_ != Gen::Gfx9 && k.wave_size == 32)
    initiator |= COMPUTE_DISPATCH_INITIATOR_CS_W32_EN_GFX10_12(1);
  auto d = pm4_packet(cs, DISPATCH_DIRECT, body_dwords(DISPATCH_DIRECT, gen_));
  d.set(DISPATCH_DIRECT_DIM_X, 1)
      .set(DISPATCH_DIRECT_DIM_Y, 1)
      .set(DISPATCH_DIRECT_DIM_Z, 1)
      .set(DISPATCH_DIRECT_DISPATCH_INITIATOR, initiator);
  t.grid_at = d.at() + DISPATCH_DIRECT_DIM_X.dword;
  // Wait for the dispatch's waves before later packets (signals) run.
  pm4_packet(cs, EVENT_WRITE, body_dwords(EVENT_WRITE, gen_))
      .set(EVENT_WRITE_EVENT_TYPE, V_EVENT_WRITE_EVENT_TYPE_CS_PARTIAL_FLUSH)
      .set(EVENT_WRITE_EVENT_INDEX, V_EVENT_WRITE_EVENT_INDEX_PARTIAL_FLUSH);
  t.words.assign(cs.data(), cs.data() + cs.size());
  t.gen = uint8_t(gen_);
}

void Pm4Encoder::exec(CommandStream& cs, const KernelObject& obj, uint64_t kernargs, Dim3 grid,
                      Dim3 block, std::vector<PatchSite>& s) {
  using namespace regs;
  // Where the template's launch values sit, from the descriptions: the block size registers
  // follow COMPUTE_NUM_THREAD_X, the grid is DISPATCH_DIRECT's DIM_X/Y/Z.
  constexpr uint32_t kBlockY = COMPUTE_NUM_THREAD_Y_ALL.address - COMPUTE_NUM_THREAD_X_ALL.address,
                     kBlockZ = COMPUTE_NUM_THREAD_Z_ALL.address - COMPUTE_NUM_THREAD_X_ALL.address,
                     kGridY = DISPATCH_DIRECT_DIM_Y.dword - DISPATCH_DIRECT_DIM_X.dword,
                     kGridZ = DISPATCH_DIRECT_DIM_Z.dword - DISPATCH_DIRECT_DIM_X.dword;
  // API input: a block dimension past NUM_THREAD_FULL is an error here (DIM_X/Y/Z hold any
  // 32-bit grid); replays patch values recording accepted.
  const RegField &fx = num_thread_full(0, gen_), &fy = num_thread_full(1, gen_),
                 &fz = num_thread_full(2, gen_);
  if (block.x > fx.bits().mask() || block.y > fy.bits().mask() || block.z > fz.bits().mask())
      [[unlikely]] {  // the message names which
    desc::checked(fx, block.x, "COMPUTE_NUM_THREAD_X");
    desc::checked(fy, block.y, "COMPUTE_NUM_THREAD_Y");
    desc::checked(fz, block.z, "COMPUTE_NUM_THREAD_Z");
  }
  const uint32_t bx = fx(block.x), by = fy(block.y), bz = fz(block.z);
  const auto& k = static_cast<const AmdKernel&>(obj);
  const AmdKernel::DispatchTemplate* t = &k.dispatch;
  if (t->gen != uint8_t(gen_) || t->words.empty()) [[unlikely]] {  // not prepared for gen_
    exec_unprepared(cs, k, kernargs, grid, block, s);
    return;
  }
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(t->words.size());
  std::memcpy(p, t->words.data(), t->words.size() * 4);
  p[t->block_at] = bx;
  p[t->block_at + kBlockY] = by;
  p[t->block_at + kBlockZ] = bz;
  p[t->grid_at] = DISPATCH_DIRECT_DIM_X(grid.x);
  p[t->grid_at + kGridY] = DISPATCH_DIRECT_DIM_Y(grid.y);
  p[t->grid_at + kGridZ] = DISPATCH_DIRECT_DIM_Z(grid.z);
  size_t first = s.size();
  s.resize(first + (t->kernarg_at >= 0 ? 7 : 6));
  PatchSite* site = s.data() + first;
  *site++ = {at + t->block_at, PatchFormat::Lo32, PatchRole::BlockX};
  *site++ = {at + t->block_at + kBlockY, PatchFormat::Lo32, PatchRole::BlockY};
  *site++ = {at + t->block_at + kBlockZ, PatchFormat::Lo32, PatchRole::BlockZ};
  *site++ = {at + t->grid_at, PatchFormat::Lo32, PatchRole::GridX};
  *site++ = {at + t->grid_at + kGridY, PatchFormat::Lo32, PatchRole::GridY};
  *site++ = {at + t->grid_at + kGridZ, PatchFormat::Lo32, PatchRole::GridZ};
  if (t->kernarg_at >= 0) {  // the pointer's two user SGPRs, low then high
    p[t->kernarg_at] = lo(kernargs);
    p[t->kernarg_at + 1] = hi(kernargs);
    *site = {at + uint32_t(t->kernarg_at), PatchFormat::LoHi64, PatchRole::KernargAddress};
  }
}

void Pm4Encoder::exec_unprepared(CommandStream& cs, const AmdKernel& k, uint64_t kernargs,
                                 Dim3 grid, Dim3 block, std::vector<PatchSite>& s) {
  AmdKernel local = k;
  prepare(local);
  exec(cs, local, kernargs, grid, block, s);
}

void Pm4Encoder::copy(CommandStream&, uint64_t, uint64_t, uint64_t, std::vector<PatchSite>&) {
  throw InvalidInput("AMD compute queues do not copy; use the copy queue");
}

uint32_t Pm4Encoder::indirect_buffer_dwords() { return 1 + fixed_body_dwords(INDIRECT_BUFFER); }

void Pm4Encoder::indirect_buffer(uint32_t* out, uint64_t va, uint32_t ndwords) {
  const uint32_t body = fixed_body_dwords(INDIRECT_BUFFER);
  desc::checked(INDIRECT_BUFFER_IB_SIZE, ndwords, "INDIRECT_BUFFER");  // never truncated
  desc::PacketWriter(out, 1 + body)
      .set(kHeader, header(INDIRECT_BUFFER, body))
      .set64(INDIRECT_BUFFER_IB_BASE_LO, INDIRECT_BUFFER_IB_BASE_HI, va)
      .set(INDIRECT_BUFFER_IB_SIZE, ndwords)
      .set(INDIRECT_BUFFER_VALID, 1);
}

// ---- SDMA -----------------------------------------------------------------------------

SdmaEncoder::SdmaEncoder(Gen gen, InterruptTarget irq) : gen_(gen), irq_(irq) {}

void SdmaEncoder::poll_ge(CommandStream& cs, uint64_t va, uint32_t value, uint64_t add,
                          PatchFormat half, std::vector<PatchSite>& s) {
  using namespace sdma;
  sdma_packet(cs, POLL_REGMEM, &s)
      .set(POLL_REGMEM_FUNC_ALL, V_POLL_REGMEM_FUNC_GREATER_EQUAL)
      .set(POLL_REGMEM_MEM_POLL_ALL, V_POLL_REGMEM_MEM_POLL_MEMORY)
      .set64(POLL_REGMEM_ADDR_LO_ALL, POLL_REGMEM_ADDR_HI_ALL, va, PatchRole::WaitAddress, add)
      .set(POLL_REGMEM_VALUE_ALL, value)
      .site32(POLL_REGMEM_VALUE_ALL, half, PatchRole::WaitValue)
      .set(POLL_REGMEM_MASK_ALL, POLL_REGMEM_MASK_ALL.mask())
      .set(POLL_REGMEM_INTERVAL_ALL, kSdmaPollInterval)
      .set(POLL_REGMEM_RETRY_COUNT_ALL, V_POLL_REGMEM_RETRY_COUNT_FOREVER);
}

void SdmaEncoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  using namespace sdma;
  poll_ge(cs, va + 4, hi(value), 4, PatchFormat::Hi32, s);
  // Only while the high word still equals the target's: the low word's poll that follows.
  sdma_packet(cs, COND_EXE, &s)
      .set64(COND_EXE_ADDR_LO_ALL, COND_EXE_ADDR_HI_ALL, va + 4, PatchRole::WaitAddress, 4)
      .set(COND_EXE_REFERENCE_ALL, hi(value))
      .site32(COND_EXE_REFERENCE_ALL, PatchFormat::Hi32, PatchRole::WaitValue)
      .set(COND_EXE_EXEC_COUNT_ALL, packet_dwords(POLL_REGMEM));
  poll_ge(cs, va, lo(value), 0, PatchFormat::Lo32, s);
}

void SdmaEncoder::fence(CommandStream& cs, uint64_t va, uint32_t data, uint64_t add,
                        PatchFormat half, std::vector<PatchSite>* s) const {
  using namespace sdma;
  auto w = sdma_packet(cs, FENCE, s);
  if (gen_ != Gen::Gfx9) w.set(FENCE_MTYPE_GFX10_12, V_FENCE_MTYPE_UC);
  w.set64(FENCE_ADDR_LO_ALL, FENCE_ADDR_HI_ALL, va, PatchRole::SignalAddress, add)
      .set(FENCE_DATA_ALL, data)
      .site32(FENCE_DATA_ALL, half, PatchRole::SignalValue);
}

void SdmaEncoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                         std::vector<PatchSite>& s) {
  using namespace sdma;
  fence(cs, va, lo(value), 0, PatchFormat::Lo32, &s);
  fence(cs, va + 4, hi(value), 4, PatchFormat::Hi32, &s);
  if (wake) {
    fence(cs, irq_.mailbox_va, irq_.event_id, 0, PatchFormat::Lo32, nullptr);
    sdma_packet(cs, TRAP, nullptr).set(TRAP_INT_CONTEXT_ALL, irq_.event_id);
  }
}

void SdmaEncoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  using namespace sdma;
  // The record's second half (Encoder::timestamp); the site is patched with that address.
  sdma_packet(cs, TIMESTAMP, &s)
      .set64(TIMESTAMP_ADDR_LO_ALL, TIMESTAMP_ADDR_HI_ALL, va + 8, PatchRole::TimestampAddress);
}

// SDMA executes its packets in order; copies are complete before a later fence.
void SdmaEncoder::memory_barrier(CommandStream&) {}

void SdmaEncoder::exec(CommandStream&, const KernelObject&, uint64_t, Dim3, Dim3,
                       std::vector<PatchSite>&) {
  throw InvalidInput("AMD copy queues do not launch kernels; use the compute queue");
}

void SdmaEncoder::copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
                       std::vector<PatchSite>& s) {
  using namespace sdma;
  const uint64_t max = max_copy_bytes(gen_);
  const Field count = copy_count_field(gen_);
  for (uint64_t off = 0; off < size; off += max) {
    const uint64_t n = std::min(max, size - off);
    sdma_packet(cs, COPY_LINEAR, &s)
        .set(count, n - 1)
        .set64(COPY_LINEAR_SRC_ADDR_LO_ALL, COPY_LINEAR_SRC_ADDR_HI_ALL, src + off,
               PatchRole::CopySrc, off)
        .set64(COPY_LINEAR_DST_ADDR_LO_ALL, COPY_LINEAR_DST_ADDR_HI_ALL, dst + off,
               PatchRole::CopyDst, off);
  }
}

uint32_t SdmaEncoder::indirect_dwords() { return sdma::packet_dwords(sdma::INDIRECT); }

void SdmaEncoder::indirect(uint32_t* out, uint64_t va, uint32_t ndwords) {
  using namespace sdma;
  desc::checked(INDIRECT_IB_SIZE_ALL, ndwords, "INDIRECT");  // never truncated
  desc::PacketWriter(out, packet_dwords(INDIRECT))
      .set(kHeader, header(INDIRECT))
      .set64(INDIRECT_IB_BASE_LO_ALL, INDIRECT_IB_BASE_HI_ALL, va)
      .set(INDIRECT_IB_SIZE_ALL, ndwords);
}

}  // namespace hcq::amd
