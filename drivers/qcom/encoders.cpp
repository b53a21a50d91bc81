#include "qcom/encoders.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/launch_template.hpp"

namespace hcq::qcom {
namespace {

constexpr uint32_t lo(uint64_t v) { return uint32_t(v); }
constexpr uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }
// CP_WAIT_REG_MEM's poll interval (DELAY_LOOP_CYCLES): turnip waits with 16.
constexpr uint32_t kPollDelay = 16;
// The ALL-ones value of a `value - 1` patch (local sizes are written minus one).
constexpr uint64_t kMinusOne = ~uint64_t{0};

// The dwords of a packet that ends with field `f` (a variable-length packet's fixed part).
constexpr uint32_t through(const Field& f) { return f.dword + 1u; }

// A type-7 packet written through its description (cp.def): the header from its opcode and
// length, fields ORed into the dwords cp.def places them in, patch sites recorded as the
// fields are written (desc::PacketWriter).
class Pkt7 : public desc::PacketWriter {
 public:
  // A packet of the length its description gives.
  Pkt7(CommandStream& cs, PacketDesc p, std::vector<PatchSite>* sites = nullptr)
      : Pkt7(cs, p, p.dwords, sites) {}
  // A variable-length packet (description length 0) of `dwords`, header included.
  Pkt7(CommandStream& cs, PacketDesc p, uint32_t dwords, std::vector<PatchSite>* sites = nullptr)
      : PacketWriter(cs, dwords, sites) {
    words()[0] = pkt7(p.opcode, dwords - 1);
  }
  // A packet at `words`, stream offset `at`, in room the caller grew for several at once.
  Pkt7(uint32_t* words, uint32_t at, PacketDesc p, uint32_t dwords,
       std::vector<PatchSite>* sites = nullptr)
      : PacketWriter(words, dwords, at, sites) {
    words[0] = pkt7(p.opcode, dwords - 1);
  }
  // Dword `i` of the packet's variable tail (CP_MEM_WRITE_DATA ...).
  Pkt7& tail(Tail t, uint32_t i, uint32_t v) {
    words()[t.dword + i] = v;
    return *this;
  }
};

// A type-4 packet writing consecutive registers, first to last, through regs.def: each
// register's dword follows from its address, each field's bits from its generation's place.
class Pkt4 : public desc::PacketWriter {
 public:
  Pkt4(CommandStream& cs, Gen g, RegId first, RegId last, std::vector<PatchSite>* sites = nullptr)
      : PacketWriter(cs, 1 + (reg_address(last, g) - reg_address(first, g) + 1), sites),
        g_(g),
        base_(reg_address(first, g)),
        sites_(sites) {
    words()[0] = pkt4(base_, size() - 1);
  }
  Pkt4(CommandStream& cs, Gen g, RegId only, std::vector<PatchSite>* sites = nullptr)
      : Pkt4(cs, g, only, only, sites) {}
  Pkt4& set(const RegField& f, uint64_t v) {
    words()[dword(f.reg)] |= f(g_, v);
    return *this;
  }
  // A register without fields (an address half, a count).
  Pkt4& set(RegId r, uint32_t v) {
    words()[dword(r)] = v;
    return *this;
  }
  // A 64-bit value in a _LO/_HI register pair; with a role, a patch site for it.
  Pkt4& set64(RegId lo_reg, RegId hi_reg, uint64_t v) {
    set(lo_reg, lo(v));
    return set(hi_reg, hi(v));
  }
  Pkt4& set64(RegId lo_reg, RegId hi_reg, uint64_t v, PatchRole role, uint64_t add) {
    set64(lo_reg, hi_reg, v);
    if (sites_) sites_->push_back(offset_site(at() + dword(lo_reg), PatchFormat::LoHi64, role, add));
    return *this;
  }
  // A patch site over field `f` for a value written minus one (`add` kMinusOne) or as is.
  Pkt4& site(const RegField& f, PatchRole role, uint64_t add = 0) {
    if (!sites_) return *this;
    const desc::Bits b = f.bits(g_);
    PatchSite s = field_site(at() + dword(f.reg), role, b.lo, b.width);
    s.add = add;
    sites_->push_back(s);
    return *this;
  }
  uint32_t dword(RegId r) const { return 1 + reg_address(r, g_) - base_; }

 private:
  Gen g_;
  uint32_t base_;
  std::vector<PatchSite>* sites_;
};

// Where a kernel's value enters a field: the exact error when it does not fit.
template <class F>
void check_fits(const AdrenoKernel& k, const F& field, uint64_t v, const char* what) {
  try {
    desc::checked(field, v, what);
  } catch (const InvalidInput& e) {
    throw InvalidInput("kernel '" + k.name + "': " + e.what());
  }
}

}  // namespace

void CpEncoder::indirect_buffer(uint32_t* p, uint64_t va, uint32_t dwords) {
  desc::checked(CP_INDIRECT_BUFFER_IB_SIZE, dwords, "CP_INDIRECT_BUFFER");
  desc::PacketWriter w(p, pkt::CP_INDIRECT_BUFFER.dwords);
  p[0] = pkt7(CP_INDIRECT_BUFFER, w.size() - 1);
  w.set64(CP_INDIRECT_BUFFER_IB_BASE_LO, CP_INDIRECT_BUFFER_IB_BASE_HI, va)
      .set(CP_INDIRECT_BUFFER_IB_SIZE, dwords);
}

void CpEncoder::uav_descriptor(uint32_t* d, Ir3UavFormat format) {
  // As computerator's cs_ibo_emit and freedreno's fdl6_buffer_view_init build a storage
  // buffer's descriptor (descriptors.def): linear, one element per texel, TYPE buffer. The
  // element count is the largest the descriptor holds (WIDTH and HEIGHT all ones: 2^30 - 1
  // elements): kernel arguments carry addresses, not sizes, and OpenCL's global buffers are
  // unbounded, so the UAV imposes no bound of its own.
  constexpr uint32_t kFormats[] = {FMT6_32_UINT, FMT6_16_UINT, FMT6_8_UINT};  // by Ir3UavFormat
  desc::PacketWriter(d, kTEX_MEMOBJ_DWORDS)
      .set(TEX_MEMOBJ_TILE_MODE, TILE6_LINEAR)
      .set(TEX_MEMOBJ_FMT, kFormats[size_t(format)])
      .set(TEX_MEMOBJ_WIDTH, TEX_MEMOBJ_WIDTH.mask())
      .set(TEX_MEMOBJ_HEIGHT, TEX_MEMOBJ_HEIGHT.mask())
      .set(TEX_MEMOBJ_STRUCTSIZETEXELS, 1)
      .set(TEX_MEMOBJ_TYPE, A6XX_TEX_BUFFER);
}

void CpEncoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  auto wait_reg_mem = [&](uint64_t addr, uint32_t ref, PatchFormat half, uint64_t add) {
    Pkt7(cs, pkt::CP_WAIT_REG_MEM, &s)
        .set(CP_WAIT_REG_MEM_FUNCTION, WRITE_GE)
        .set(CP_WAIT_REG_MEM_POLL, POLL_MEMORY)
        .set64(CP_WAIT_REG_MEM_POLL_ADDR_LO, CP_WAIT_REG_MEM_POLL_ADDR_HI, addr,
               PatchRole::WaitAddress, add)
        .set(CP_WAIT_REG_MEM_REF, ref)
        .set(CP_WAIT_REG_MEM_MASK, CP_WAIT_REG_MEM_MASK.mask())
        .set(CP_WAIT_REG_MEM_DELAY_LOOP_CYCLES, kPollDelay)
        .site32(CP_WAIT_REG_MEM_REF, half, PatchRole::WaitValue);
  };
  wait_reg_mem(va + 4, hi(value), PatchFormat::Hi32, 4);  // the high word reaches H
  // and while it is still H (the high word < H + 1, signed), the low word reaches L: the
  // CP_COND_EXEC skips the second wait, the dwords after it.
  Pkt7(cs, pkt::CP_COND_EXEC, &s)
      .set64(CP_COND_EXEC_BOOL_ADDR_LO, CP_COND_EXEC_BOOL_ADDR_HI, mem_.one_va)
      .set64(CP_COND_EXEC_TIMESTAMP_ADDR_LO, CP_COND_EXEC_TIMESTAMP_ADDR_HI, va + 4,
             PatchRole::WaitAddress, 4)
      .set(CP_COND_EXEC_ACTIVE_TIMESTAMP, hi(value) + 1)
      .site32(CP_COND_EXEC_ACTIVE_TIMESTAMP, PatchFormat::Hi32, PatchRole::WaitValue, 1ull << 32)
      .set(CP_COND_EXEC_DWORDS, pkt::CP_WAIT_REG_MEM.dwords);
  wait_reg_mem(va, lo(value), PatchFormat::Lo32, 0);
}

uint32_t CpEncoder::flush_event_dwords(uint32_t event_a6xx) const {
  if (gen_ != Gen::A6xx) return through(CP_EVENT_WRITE7_EVENT);
  return event_a6xx == CACHE_FLUSH_TS ? through(CP_EVENT_WRITE_VALUE) : through(CP_EVENT_WRITE_EVENT);
}

// The signal and the cache flushes follow every launch: they are written dword by dword at
// the places cp.def gives (each dword's fields composed, then stored once), not through a
// zeroed PacketWriter, which cost a third of a launch's encoding.
void CpEncoder::flush_event(uint32_t* p, uint32_t event_a6xx, uint32_t event_a7xx) const {
  if (gen_ == Gen::A6xx) {
    // CACHE_FLUSH_TS flushes only with an address to write (freedreno fd6_cache_flush).
    const bool ts = event_a6xx == CACHE_FLUSH_TS;
    static_assert(CP_EVENT_WRITE_EVENT.dword == CP_EVENT_WRITE_TIMESTAMP.dword);
    p[0] = pkt7(CP_EVENT_WRITE, flush_event_dwords(event_a6xx) - 1);
    p[CP_EVENT_WRITE_EVENT.dword] = CP_EVENT_WRITE_EVENT(event_a6xx) | CP_EVENT_WRITE_TIMESTAMP(ts);
    if (!ts) return;
    p[CP_EVENT_WRITE_ADDR_LO.dword] = lo(mem_.scratch_va);
    p[CP_EVENT_WRITE_ADDR_HI.dword] = hi(mem_.scratch_va);
    p[CP_EVENT_WRITE_VALUE.dword] = 0;
    return;
  }
  p[0] = pkt7(CP_EVENT_WRITE7, flush_event_dwords(event_a6xx) - 1);
  p[CP_EVENT_WRITE7_EVENT.dword] = CP_EVENT_WRITE7_EVENT(event_a7xx);
}

void CpEncoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool,
                     std::vector<PatchSite>& s) {
  // Prior dispatches done, their writes flushed, then the value (KGSL's own timestamps wake
  // sleeping hosts: no interrupt packet is needed for `wake`). One grow for all of it.
  constexpr uint32_t idle = pkt::CP_WAIT_FOR_IDLE.dwords, mem = pkt::CP_WAIT_MEM_WRITES.dwords;
  constexpr uint32_t write = CP_MEM_WRITE_DATA.dword + 2;  // a 64-bit value
  static_assert(idle == 1 && mem == 1, "cp.def: header-only packets");
  const uint32_t flush = flush_event_dwords(CACHE_FLUSH_TS);
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(idle + flush + idle + mem + write);
  p[0] = pkt7(CP_WAIT_FOR_IDLE, 0);
  flush_event(p + idle, CACHE_FLUSH_TS, CACHE_CLEAN);
  p[idle + flush] = pkt7(CP_WAIT_FOR_IDLE, 0);
  p[2 * idle + flush] = pkt7(CP_WAIT_MEM_WRITES, 0);
  const uint32_t w_at = 2 * idle + flush + mem;
  uint32_t* w = p + w_at;
  w[0] = pkt7(CP_MEM_WRITE, write - 1);
  w[CP_MEM_WRITE_ADDR_LO.dword] = lo(va);
  w[CP_MEM_WRITE_ADDR_HI.dword] = hi(va);
  w[CP_MEM_WRITE_DATA.dword] = lo(value);
  w[CP_MEM_WRITE_DATA.dword + 1] = hi(value);
  s.push_back({at + w_at + CP_MEM_WRITE_ADDR_LO.dword, PatchFormat::LoHi64,
               PatchRole::SignalAddress});
  s.push_back({at + w_at + CP_MEM_WRITE_DATA.dword, PatchFormat::LoHi64, PatchRole::SignalValue});
}

void CpEncoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  Pkt7(cs, pkt::CP_WAIT_FOR_IDLE);
  Pkt7(cs, pkt::CP_REG_TO_MEM, &s)
      .set(CP_REG_TO_MEM_REG, reg(RegId::CP_ALWAYS_ON_COUNTER_LO))
      .set(CP_REG_TO_MEM_CNT, 2)
      .set(CP_REG_TO_MEM_64B, 1)
      // the record's second half (CpEncoder::timestamp)
      .set64(CP_REG_TO_MEM_DEST_LO, CP_REG_TO_MEM_DEST_HI, va + 8, PatchRole::TimestampAddress, 8);
}

void CpEncoder::memory_barrier(CommandStream& cs) {
  const uint32_t flush = flush_event_dwords(CACHE_FLUSH_TS);
  const uint32_t idle = pkt::CP_WAIT_FOR_IDLE.dwords;
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(idle + flush + flush_event_dwords(CACHE_INVALIDATE));
  Pkt7(p, at, pkt::CP_WAIT_FOR_IDLE, idle);
  flush_event(p + idle, CACHE_FLUSH_TS, CACHE_FLUSH7);
  flush_event(p + idle + flush, CACHE_INVALIDATE, CACHE_INVALIDATE7);
}

void CpEncoder::prepare(AdrenoKernel& k) const {
  CommandStream cs;
  k.launch_sites.clear();
  encode_launch(cs, k, 0, {0, 0, 0}, {1, 1, 1}, k.launch_sites);
  k.launch_words.assign(cs.data(), cs.data() + cs.size());
  k.prepared_for = gen_;
  // The size registers' places, from the sites: BlockX's first in NDRANGE_0, its second in
  // LAST_LOCAL_SIZE (a7xx), GridX's in CP_EXEC_CS.
  k.ndrange_at = k.last_local_at = k.exec_at = 0;
  bool ndrange_seen = false;
  for (const PatchSite& site : k.launch_sites) {
    if (site.role == PatchRole::BlockX) {
      (ndrange_seen ? k.last_local_at : k.ndrange_at) = site.dword;
      ndrange_seen = true;
    }
    if (site.role == PatchRole::GridX) k.exec_at = site.dword;
  }
}

namespace {

// How far register `r` lies after `base` in one type-4 packet on G.
template <Gen G>
constexpr uint32_t after(RegId base, RegId r) {
  return reg_address(r, G) - reg_address(base, G);
}

// Write a launch's values into a copy `p` of k's prepared launch. The generation is a template
// argument so every field's place is a constant: exec does this per launch.
template <Gen G>
void put_launch_values(uint32_t* p, const AdrenoKernel& k, uint64_t kernargs, Dim3 grid,
                       Dim3 block) {
  for (const PatchSite& site : k.launch_sites) {  // the kernarg sites come first
    if (site.role != PatchRole::KernargAddress) break;
    p[site.dword] = lo(kernargs + site.add);
    p[site.dword + 1] = hi(kernargs + site.add);
  }
  // Local sizes are written minus one. Every place is a compile-time constant.
  constexpr desc::Bits lx = HLSQ_CS_NDRANGE_0_LOCALSIZEX.bits(G);
  constexpr desc::Bits ly = HLSQ_CS_NDRANGE_0_LOCALSIZEY.bits(G);
  constexpr desc::Bits lz = HLSQ_CS_NDRANGE_0_LOCALSIZEZ.bits(G);
  uint32_t* nd = p + k.ndrange_at;
  nd[0] = lz.replace(ly.replace(lx.replace(nd[0], block.x - 1), block.y - 1), block.z - 1);
  // HLSQ_CS_NDRANGE_1/3/5: threads in each dimension.
  constexpr RegId N0 = RegId::HLSQ_CS_NDRANGE_0;
  constexpr uint32_t gx = after<G>(N0, RegId::HLSQ_CS_NDRANGE_1);
  constexpr uint32_t gy = after<G>(N0, RegId::HLSQ_CS_NDRANGE_3);
  constexpr uint32_t gz = after<G>(N0, RegId::HLSQ_CS_NDRANGE_5);
  nd[gx] = grid.x * block.x;
  nd[gy] = grid.y * block.y;
  nd[gz] = grid.z * block.z;
  if constexpr (G != Gen::A6xx) {
    constexpr desc::Bits tx = HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX.bits(G);
    constexpr desc::Bits ty = HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY.bits(G);
    constexpr desc::Bits tz = HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ.bits(G);
    uint32_t& last = p[k.last_local_at];
    last = tz.replace(ty.replace(tx.replace(last, block.x - 1), block.y - 1), block.z - 1);
  }
  uint32_t* exec = p + k.exec_at - CP_EXEC_CS_NGROUPS_X.dword;  // the CP_EXEC_CS header
  exec[CP_EXEC_CS_NGROUPS_X.dword] = grid.x;
  exec[CP_EXEC_CS_NGROUPS_Y.dword] = grid.y;
  exec[CP_EXEC_CS_NGROUPS_Z.dword] = grid.z;
}

// The grid's thread counts go into HLSQ_CS_NDRANGE_1/3/5's GLOBALSIZE fields (32 bits): they
// are checked where the grid enters, as Dim3's product could wrap. A template like
// put_launch_values, so that the widths are constants on the per-launch path.
template <Gen G>
bool global_sizes_fit(Dim3 grid, Dim3 block) {
  constexpr desc::Bits x = HLSQ_CS_NDRANGE_1_GLOBALSIZE_X.bits(G);
  constexpr desc::Bits y = HLSQ_CS_NDRANGE_3_GLOBALSIZE_Y.bits(G);
  constexpr desc::Bits z = HLSQ_CS_NDRANGE_5_GLOBALSIZE_Z.bits(G);
  return x.fits(uint64_t(grid.x) * block.x) && y.fits(uint64_t(grid.y) * block.y) &&
         z.fits(uint64_t(grid.z) * block.z);
}

// The narrowest GLOBALSIZE field of either generation.
constexpr unsigned narrowest_global_size_bits() {
  unsigned w = 32;
  for (Gen g : {Gen::A6xx, Gen::A7xx})
    for (const RegField* f : {&HLSQ_CS_NDRANGE_1_GLOBALSIZE_X, &HLSQ_CS_NDRANGE_3_GLOBALSIZE_Y,
                              &HLSQ_CS_NDRANGE_5_GLOBALSIZE_Z})
      w = std::min(w, unsigned(f->bits(g).width));
  return w;
}

// The exact error for the first that does not fit.
// Out of line and cold: inlined, its string building gave exec a 0x220-byte frame.
[[noreturn, gnu::cold, gnu::noinline]] void global_size_error(const AdrenoKernel& k, Dim3 grid, Dim3 block, Gen g) {
  const RegField* global[3] = {&HLSQ_CS_NDRANGE_1_GLOBALSIZE_X, &HLSQ_CS_NDRANGE_3_GLOBALSIZE_Y,
                               &HLSQ_CS_NDRANGE_5_GLOBALSIZE_Z};
  const char* regs[3] = {"HLSQ_CS_NDRANGE_1", "HLSQ_CS_NDRANGE_3", "HLSQ_CS_NDRANGE_5"};
  const uint64_t threads[3] = {uint64_t(grid.x) * block.x, uint64_t(grid.y) * block.y,
                               uint64_t(grid.z) * block.z};
  for (int i = 0; i < 3; i++)
    if (!global[i]->bits(g).fits(threads[i]))
      desc::throw_does_not_fit("kernel '" + k.name + "': " + regs[i], global[i]->name,
                               threads[i], global[i]->bits(g).width);
  throw InvalidInput("kernel '" + k.name + "': the grid's sizes do not fit");  // not reached
}

}  // namespace

void CpEncoder::exec(CommandStream& cs, const KernelObject& obj, uint64_t kernargs, Dim3 grid,
                     Dim3 block, std::vector<PatchSite>& s) {
  const auto& k = static_cast<const AdrenoKernel&>(obj);
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.count() > 1024)
    throw InvalidInput("kernel '" + k.name + "': a workgroup of " + std::to_string(block.x) +
                       "x" + std::to_string(block.y) + "x" + std::to_string(block.z) +
                       " (each at least 1, at most 1024 invocations)");
  // A block holds at most 1024 = 2^10 invocations, so a grid below 2^(width - 10) in every
  // dimension fits every GLOBALSIZE field: one test per launch; larger grids are checked exactly.
  constexpr uint32_t kAlwaysFits = 1u << (narrowest_global_size_bits() - 10);
  if ((grid.x | grid.y | grid.z) >= kAlwaysFits &&
      !(gen_ == Gen::A6xx ? global_sizes_fit<Gen::A6xx>(grid, block)
                          : global_sizes_fit<Gen::A7xx>(grid, block))) [[unlikely]]
    global_size_error(k, grid, block, gen_);
  if (k.launch_words.empty() || k.prepared_for != gen_) {  // not prepared for this generation
    encode_launch(cs, k, kernargs, grid, block, s);
    return;
  }
  // Copy the prepared launch and its sites, and write this launch's values.
  const uint32_t at = uint32_t(cs.size());
  const size_t n = k.launch_words.size();
  uint32_t* p = cs.grow(n);
  std::memcpy(p, k.launch_words.data(), n * 4);
  append_sites(s, k.launch_sites.data(), k.launch_sites.size(), at);
  if (gen_ == Gen::A6xx) put_launch_values<Gen::A6xx>(p, k, kernargs, grid, block);
  else put_launch_values<Gen::A7xx>(p, k, kernargs, grid, block);
}

void CpEncoder::encode_launch(CommandStream& cs, const AdrenoKernel& k, uint64_t kernargs,
                              Dim3 grid, Dim3 block, std::vector<PatchSite>& s) const {
  const Gen g = gen_;
  // The kernel's sizes enter their fields here, at program load (prepare): the exact error
  // for one that does not fit. ir3_program checks the register counts and ids it reads.
  const uint64_t shader_units = (k.instr_dwords * 4 + 127) / 128;  // SP_CS_INSTRLEN's units
  check_fits(k, CP_LOAD_STATE6_NUM_UNIT, shader_units, "CP_LOAD_STATE6_FRAG");
  Pkt7(cs, pkt::CP_SET_MARKER).set(CP_SET_MARKER_MODE, RM6_COMPUTE);
  Pkt4(cs, g, RegId::HLSQ_INVALIDATE_CMD)
      .set(HLSQ_INVALIDATE_CMD_CS_STATE, 1)
      .set(HLSQ_INVALIDATE_CMD_CS_IBO, 1);
  Pkt4(cs, g, RegId::SP_CS_CONFIG)
      .set(SP_CS_CONFIG_ENABLED, 1)
      .set(SP_CS_CONFIG_NIBO, k.uav_count);
  Pkt4(cs, g, RegId::SP_CS_CTRL_REG0)
      .set(SP_CS_CTRL_REG0_HALFREGFOOTPRINT, k.half_regs)
      .set(SP_CS_CTRL_REG0_FULLREGFOOTPRINT, k.full_regs)
      .set(SP_CS_CTRL_REG0_BRANCHSTACK, k.branch_stack)
      .set(SP_CS_CTRL_REG0_THREADSIZE, k.threadsize == 128);
  Pkt4(cs, g, RegId::HLSQ_CS_CNTL)
      .set(HLSQ_CS_CNTL_CONSTLEN, (k.const_dwords + 15) / 16)
      .set(HLSQ_CS_CNTL_ENABLED, 1);
  // Where the shader finds its workgroup and local ids, and its wave size: HLSQ_CS_CNTL_0/1
  // on a6xx, SP_CS_CNTL_0/1 plus HLSQ_CS_CNTL_1 on a7xx (freedreno fd6_compute.cc
  // cs_program_emit, under the 2024 register names). Workgroup size and offset, and the linear
  // local id, are never asked for (regid(63, 0)). a6xx parts with LPAC (a660) mirror
  // CNTL_0/1 into SP_CS_CNTL_0/1 for the LPAC pipe, which hcq does not use.
  constexpr uint32_t kNoRegid = 0xfc;
  const bool wave128 = k.threadsize == 128;
  if (g == Gen::A6xx) {
    Pkt4(cs, g, RegId::HLSQ_CS_CNTL_0, RegId::HLSQ_CS_CNTL_1)
        .set(HLSQ_CS_CNTL_0_WGIDCONSTID, k.workgroup_id_regid)
        .set(HLSQ_CS_CNTL_0_WGSIZECONSTID, kNoRegid)
        .set(HLSQ_CS_CNTL_0_WGOFFSETCONSTID, kNoRegid)
        .set(HLSQ_CS_CNTL_0_LOCALIDREGID, k.local_id_regid)
        .set(HLSQ_CS_CNTL_1_LINEARLOCALIDREGID, kNoRegid)
        .set(HLSQ_CS_CNTL_1_THREADSIZE, wave128);
  } else {
    Pkt4(cs, g, RegId::SP_CS_CNTL_0, RegId::SP_CS_CNTL_1)
        .set(SP_CS_CNTL_0_WGIDCONSTID, k.workgroup_id_regid)
        .set(SP_CS_CNTL_0_WGSIZECONSTID, kNoRegid)
        .set(SP_CS_CNTL_0_WGOFFSETCONSTID, kNoRegid)
        .set(SP_CS_CNTL_0_LOCALIDREGID, k.local_id_regid)
        .set(SP_CS_CNTL_1_LINEARLOCALIDREGID, kNoRegid)
        .set(SP_CS_CNTL_1_THREADSIZE, wave128);
    // The workgroup raster order (UNK11: z first; UNK22: tile width 4) and tile height
    // (UNK26 | YALIGN << 1): 17, the height freedreno uses when block.y is odd and which
    // suits every block, so the launch template needs no patch for it.
    Pkt4(cs, g, RegId::HLSQ_CS_CNTL_1)
        .set(HLSQ_CS_CNTL_1_LINEARLOCALIDREGID, kNoRegid)
        .set(HLSQ_CS_CNTL_1_THREADSIZE, wave128)
        .set(HLSQ_CS_CNTL_1_UNK11, 1)
        .set(HLSQ_CS_CNTL_1_UNK22, 1)
        .set(HLSQ_CS_CNTL_1_UNK26, 1)
        .set(HLSQ_CS_CNTL_1_YALIGN, 8);
  }
  Pkt4(cs, g, RegId::SP_CS_OBJ_START_LO, RegId::SP_CS_OBJ_START_HI)
      .set64(RegId::SP_CS_OBJ_START_LO, RegId::SP_CS_OBJ_START_HI, k.code_va);
  // The shader's length and its load count the same 128-byte units (regs.def SP_CS_INSTRLEN).
  Pkt4(cs, g, RegId::SP_CS_INSTRLEN).set(SP_CS_INSTRLEN_INSTRLEN, shader_units);
  // The shader, then the argument block (and ir3's immediates) into the constant file.
  auto load_state = [&](uint32_t type, uint32_t dst_off, uint32_t units) {
    Pkt7 w(cs, pkt::CP_LOAD_STATE6_FRAG, through(CP_LOAD_STATE6_EXT_SRC_ADDR_HI), &s);
    w.set(CP_LOAD_STATE6_DST_OFF, dst_off)
        .set(CP_LOAD_STATE6_STATE_TYPE, type)
        .set(CP_LOAD_STATE6_STATE_SRC, SS6_INDIRECT)
        .set(CP_LOAD_STATE6_STATE_BLOCK, SB6_CS_SHADER)
        .set(CP_LOAD_STATE6_NUM_UNIT, units);
    return w;
  };
  load_state(ST6_SHADER, 0, uint32_t(shader_units))
      .set64(CP_LOAD_STATE6_EXT_SRC_ADDR_LO, CP_LOAD_STATE6_EXT_SRC_ADDR_HI, k.code_va);
  if (k.immediates_dwords)
    load_state(ST6_CONSTANTS, k.immediates_offset / 16, (k.immediates_dwords + 3) / 4)
        .set64(CP_LOAD_STATE6_EXT_SRC_ADDR_LO, CP_LOAD_STATE6_EXT_SRC_ADDR_HI, k.immediates_va);
  if (k.args_bytes)
    load_state(ST6_CONSTANTS, k.args_offset / 16, k.args_bytes / 16)
        .set64(CP_LOAD_STATE6_EXT_SRC_ADDR_LO, CP_LOAD_STATE6_EXT_SRC_ADDR_HI, kernargs,
               PatchRole::KernargAddress);
  // UAVs, as computerator's cs_ibo_emit loads them (the same for a6xx and a7xx): the
  // descriptors preloaded with CP_LOAD_STATE6_FRAG (ST6_UAV, "ST6_IBO" in 2024 Mesa, into
  // SB6_CS_SHADER; NUM_UNIT counts descriptors), SP_CS_IBO pointing at them and
  // SP_CS_IBO_COUNT. First each buffer's address is copied from the argument block into its
  // descriptor's BASE (BASE_LO's dword and the next) by CP_MEM_TO_MEM (DOUBLE: one 64-bit
  // source), and the CP waits for those writes (CP_WAIT_MEM_WRITES, then CP_WAIT_FOR_ME as
  // freedreno does before the CP reads what it wrote) before the state load reads them.
  if (!k.uav_arg_offsets.empty()) {
    const uint32_t n = uint32_t(k.uav_arg_offsets.size());
    for (uint32_t i = 0; i < n; i++) {
      const uint64_t dst = k.uav_table_offset + uint64_t(i) * kTEX_MEMOBJ_DWORDS * 4 +
                           TEX_MEMOBJ_BASE_LO.dword * 4;
      const uint64_t src = k.uav_arg_offsets[i];
      Pkt7(cs, pkt::CP_MEM_TO_MEM, through(CP_MEM_TO_MEM_SRC_A_HI), &s)
          .set(CP_MEM_TO_MEM_DOUBLE, 1)
          .set64(CP_MEM_TO_MEM_DST_LO, CP_MEM_TO_MEM_DST_HI, kernargs + dst,
                 PatchRole::KernargAddress, dst)
          .set64(CP_MEM_TO_MEM_SRC_A_LO, CP_MEM_TO_MEM_SRC_A_HI, kernargs + src,
                 PatchRole::KernargAddress, src);
    }
    const uint64_t table = kernargs + k.uav_table_offset;
    Pkt7(cs, pkt::CP_WAIT_MEM_WRITES);
    Pkt7(cs, pkt::CP_WAIT_FOR_ME);
    load_state(ST6_UAV, 0, n).set64(CP_LOAD_STATE6_EXT_SRC_ADDR_LO,
                                    CP_LOAD_STATE6_EXT_SRC_ADDR_HI, table,
                                    PatchRole::KernargAddress, k.uav_table_offset);
    Pkt4(cs, g, RegId::SP_CS_IBO_LO, RegId::SP_CS_IBO_HI, &s)
        .set64(RegId::SP_CS_IBO_LO, RegId::SP_CS_IBO_HI, table, PatchRole::KernargAddress,
               k.uav_table_offset);
    Pkt4(cs, g, RegId::SP_CS_IBO_COUNT).set(RegId::SP_CS_IBO_COUNT, n);
  }
  // The sizes, with a patch site for each: written minus one into NDRANGE_0 (and a7xx's
  // LAST_LOCAL_SIZE, the last workgroup's size: whole workgroups, the local size).
  const RegField* local[3] = {&HLSQ_CS_NDRANGE_0_LOCALSIZEX, &HLSQ_CS_NDRANGE_0_LOCALSIZEY,
                              &HLSQ_CS_NDRANGE_0_LOCALSIZEZ};
  const RegField* last[3] = {&HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX,
                             &HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY,
                             &HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ};
  const PatchRole blocks[3] = {PatchRole::BlockX, PatchRole::BlockY, PatchRole::BlockZ};
  const PatchRole grids[3] = {PatchRole::GridX, PatchRole::GridY, PatchRole::GridZ};
  const uint32_t sizes[3] = {block.x, block.y, block.z};
  Pkt4 nd(cs, g, RegId::HLSQ_CS_NDRANGE_0, RegId::HLSQ_CS_NDRANGE_6, &s);
  nd.set(HLSQ_CS_NDRANGE_0_KERNELDIM, 3)
      .set(HLSQ_CS_NDRANGE_1_GLOBALSIZE_X, uint64_t(grid.x) * block.x)
      .set(HLSQ_CS_NDRANGE_3_GLOBALSIZE_Y, uint64_t(grid.y) * block.y)
      .set(HLSQ_CS_NDRANGE_5_GLOBALSIZE_Z, uint64_t(grid.z) * block.z);
  for (int i = 0; i < 3; i++) nd.set(*local[i], sizes[i] - 1).site(*local[i], blocks[i], kMinusOne);
  Pkt4(cs, g, RegId::HLSQ_CS_KERNEL_GROUP_X, RegId::HLSQ_CS_KERNEL_GROUP_Z)
      .set(RegId::HLSQ_CS_KERNEL_GROUP_X, 1)
      .set(RegId::HLSQ_CS_KERNEL_GROUP_Y, 1)
      .set(RegId::HLSQ_CS_KERNEL_GROUP_Z, 1);
  if (g != Gen::A6xx) {
    Pkt4 l(cs, g, RegId::HLSQ_CS_LAST_LOCAL_SIZE, &s);
    for (int i = 0; i < 3; i++) l.set(*last[i], sizes[i] - 1).site(*last[i], blocks[i], kMinusOne);
  }
  const Field* groups[3] = {&CP_EXEC_CS_NGROUPS_X, &CP_EXEC_CS_NGROUPS_Y, &CP_EXEC_CS_NGROUPS_Z};
  const uint32_t counts[3] = {grid.x, grid.y, grid.z};
  Pkt7 exec(cs, pkt::CP_EXEC_CS, &s);
  for (int i = 0; i < 3; i++)
    exec.set(*groups[i], counts[i]).site32(*groups[i], PatchFormat::Lo32, grids[i]);
  Pkt7(cs, pkt::CP_WAIT_FOR_IDLE);  // launches in a queue run one after another
  // HLSQ_CS_NDRANGE_1/3/5 (global sizes) are grid * block: a patch of one of them leaves them
  // stale; the emulated GPU and hcq's kernels do not read them.
}

void CpEncoder::copy(CommandStream&, uint64_t, uint64_t, uint64_t, std::vector<PatchSite>&) {
  throw InvalidInput("Adreno GPUs have no copy engine: copy with Device::copy (a host copy on "
                     "their shared memory) or a kernel");
}

}  // namespace hcq::qcom
