#include "qcom/encoders.hpp"

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

}  // namespace

void CpEncoder::indirect_buffer(uint32_t* p, uint64_t va, uint32_t dwords) {
  p[0] = pkt7(CP_INDIRECT_BUFFER, 3);
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = CP_INDIRECT_BUFFER_IB_SIZE(dwords);
}

void CpEncoder::uav_descriptor(uint32_t* d, Ir3UavFormat format) {
  // As computerator's cs_ibo_emit and freedreno's fdl6_buffer_view_init build a storage
  // buffer's descriptor (descriptors.def): linear, one element per texel, TYPE buffer. The
  // element count is the largest the descriptor holds (WIDTH and HEIGHT all ones: 2^30 - 1
  // elements): kernel arguments carry addresses, not sizes, and OpenCL's global buffers are
  // unbounded, so the UAV imposes no bound of its own.
  constexpr uint32_t kFormats[] = {FMT6_32_UINT, FMT6_16_UINT, FMT6_8_UINT};  // by Ir3UavFormat
  std::memset(d, 0, kTEX_MEMOBJ_DWORDS * 4);
  d[0] = TEX_MEMOBJ_TILE_MODE(TILE6_LINEAR) | TEX_MEMOBJ_FMT(kFormats[size_t(format)]);
  d[1] = TEX_MEMOBJ_WIDTH(TEX_MEMOBJ_WIDTH.mask()) | TEX_MEMOBJ_HEIGHT(TEX_MEMOBJ_HEIGHT.mask());
  d[2] = TEX_MEMOBJ_STRUCTSIZETEXELS(1) | TEX_MEMOBJ_TYPE(A6XX_TEX_BUFFER);
}

void CpEncoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(21);
  auto wait_reg_mem = [&](uint32_t* w, uint64_t addr, uint32_t ref) {
    w[0] = pkt7(CP_WAIT_REG_MEM, 6);
    w[1] = CP_WAIT_REG_MEM_FUNCTION(WRITE_GE) | CP_WAIT_REG_MEM_POLL(POLL_MEMORY);
    w[2] = lo(addr);
    w[3] = hi(addr);
    w[4] = ref;
    w[5] = 0xffffffff;
    w[6] = kPollDelay;
  };
  wait_reg_mem(p, va + 4, hi(value));  // the high word reaches H
  p[7] = pkt7(CP_COND_EXEC, 6);        // and while it is still H, the low word reaches L
  p[8] = lo(mem_.one_va);
  p[9] = hi(mem_.one_va);
  p[10] = lo(va + 4);
  p[11] = hi(va + 4);
  p[12] = hi(value) + 1;  // executes while (int32) high word < H + 1
  p[13] = 7;
  wait_reg_mem(p + 14, va, lo(value));
  s.push_back(offset_site(at + 2, PatchFormat::LoHi64, PatchRole::WaitAddress, 4));
  s.push_back(offset_site(at + 10, PatchFormat::LoHi64, PatchRole::WaitAddress, 4));
  s.push_back({at + 16, PatchFormat::LoHi64, PatchRole::WaitAddress});
  s.push_back({at + 4, PatchFormat::Hi32, PatchRole::WaitValue});
  s.push_back(offset_site(at + 12, PatchFormat::Hi32, PatchRole::WaitValue, 1ull << 32));
  s.push_back({at + 18, PatchFormat::Lo32, PatchRole::WaitValue});
}

uint32_t CpEncoder::flush_event_dwords(uint32_t event_a6xx) const {
  return gen_ == Gen::A6xx && event_a6xx == CACHE_FLUSH_TS ? 5 : 2;
}

uint32_t* CpEncoder::flush_event(uint32_t* p, uint32_t event_a6xx, uint32_t event_a7xx) const {
  if (gen_ == Gen::A6xx) {
    // CACHE_FLUSH_TS flushes only with an address to write (freedreno fd6_cache_flush).
    const bool ts = event_a6xx == CACHE_FLUSH_TS;
    p[0] = pkt7(CP_EVENT_WRITE, ts ? 4 : 1);
    p[1] = CP_EVENT_WRITE_EVENT(event_a6xx) | CP_EVENT_WRITE_TIMESTAMP(ts);
    if (!ts) return p + 2;
    p[2] = lo(mem_.scratch_va);
    p[3] = hi(mem_.scratch_va);
    p[4] = 0;
    return p + 5;
  }
  p[0] = pkt7(CP_EVENT_WRITE7, 1);
  p[1] = CP_EVENT_WRITE7_EVENT(event_a7xx);
  return p + 2;
}

void CpEncoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool,
                     std::vector<PatchSite>& s) {
  // Prior dispatches done, their writes flushed, then the value (KGSL's own timestamps wake
  // sleeping hosts: no interrupt packet is needed for `wake`). One grow for all of it.
  uint32_t* p = cs.grow(1 + flush_event_dwords(CACHE_FLUSH_TS) + 2 + 5);
  p[0] = pkt7(CP_WAIT_FOR_IDLE, 0);
  p = flush_event(p + 1, CACHE_FLUSH_TS, CACHE_CLEAN);
  p[0] = pkt7(CP_WAIT_FOR_IDLE, 0);
  p[1] = pkt7(CP_WAIT_MEM_WRITES, 0);
  p[2] = pkt7(CP_MEM_WRITE, 4);
  p[3] = lo(va);
  p[4] = hi(va);
  p[5] = lo(value);
  p[6] = hi(value);
  const uint32_t at = uint32_t(cs.size()) - 5;  // the CP_MEM_WRITE
  s.push_back({at + 1, PatchFormat::LoHi64, PatchRole::SignalAddress});
  s.push_back({at + 3, PatchFormat::LoHi64, PatchRole::SignalValue});
}

void CpEncoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(5);
  p[0] = pkt7(CP_WAIT_FOR_IDLE, 0);
  p[1] = pkt7(CP_REG_TO_MEM, 3);
  p[2] = CP_REG_TO_MEM_REG(reg(RegId::CP_ALWAYS_ON_COUNTER_LO)) | CP_REG_TO_MEM_CNT(2) |
         CP_REG_TO_MEM_64B(1);
  p[3] = lo(va + 8);  // the record's second half (CpEncoder::timestamp)
  p[4] = hi(va + 8);
  s.push_back(offset_site(at + 3, PatchFormat::LoHi64, PatchRole::TimestampAddress, 8));
}

void CpEncoder::memory_barrier(CommandStream& cs) {
  uint32_t* p = cs.grow(1 + flush_event_dwords(CACHE_FLUSH_TS) +
                        flush_event_dwords(CACHE_INVALIDATE));
  p[0] = pkt7(CP_WAIT_FOR_IDLE, 0);
  p = flush_event(p + 1, CACHE_FLUSH_TS, CACHE_FLUSH7);
  flush_event(p, CACHE_INVALIDATE, CACHE_INVALIDATE7);
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

// Write a launch's values into a copy `p` of k's prepared launch. The generation is a template
// argument so every field's place in its dword is a constant: exec does this per launch.
template <Gen G>
void put_launch_values(uint32_t* p, const AdrenoKernel& k, uint64_t kernargs, Dim3 grid,
                       Dim3 block) {
  for (const PatchSite& site : k.launch_sites) {  // the kernarg sites come first
    if (site.role != PatchRole::KernargAddress) break;
    p[site.dword] = lo(kernargs + site.add);
    p[site.dword + 1] = hi(kernargs + site.add);
  }
  // Local sizes are written minus one.
  uint32_t* nd = p + k.ndrange_at;
  nd[0] = (nd[0] & ~(HLSQ_CS_NDRANGE_0_LOCALSIZEX(G, kMinusOne) |
                     HLSQ_CS_NDRANGE_0_LOCALSIZEY(G, kMinusOne) |
                     HLSQ_CS_NDRANGE_0_LOCALSIZEZ(G, kMinusOne))) |
          HLSQ_CS_NDRANGE_0_LOCALSIZEX(G, block.x - 1) |
          HLSQ_CS_NDRANGE_0_LOCALSIZEY(G, block.y - 1) |
          HLSQ_CS_NDRANGE_0_LOCALSIZEZ(G, block.z - 1);
  nd[1] = grid.x * block.x;  // HLSQ_CS_NDRANGE_1/3/5: threads in each dimension
  nd[3] = grid.y * block.y;
  nd[5] = grid.z * block.z;
  if constexpr (G != Gen::A6xx) {
    uint32_t& last = p[k.last_local_at];
    last = (last & ~(HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX(G, kMinusOne) |
                     HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY(G, kMinusOne) |
                     HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ(G, kMinusOne))) |
           HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX(G, block.x - 1) |
           HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY(G, block.y - 1) |
           HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ(G, block.z - 1);
  }
  p[k.exec_at] = grid.x;
  p[k.exec_at + 1] = grid.y;
  p[k.exec_at + 2] = grid.z;
}

}  // namespace

void CpEncoder::exec(CommandStream& cs, const KernelObject& obj, uint64_t kernargs, Dim3 grid,
                     Dim3 block, std::vector<PatchSite>& s) {
  const auto& k = static_cast<const AdrenoKernel&>(obj);
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.count() > 1024)
    throw InvalidInput("kernel '" + k.name + "': a workgroup of " + std::to_string(block.x) +
                       "x" + std::to_string(block.y) + "x" + std::to_string(block.z) +
                       " (each at least 1, at most 1024 invocations)");
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
  const uint32_t at = uint32_t(cs.size());
  std::vector<uint32_t> w;
  w.reserve(80);
  auto pkt4s = [&](RegId r, std::initializer_list<uint32_t> values) {
    w.push_back(pkt4(reg(r), uint32_t(values.size())));
    w.insert(w.end(), values);
  };
  w.insert(w.end(), {pkt7(CP_SET_MARKER, 1), CP_SET_MARKER_MODE(RM6_COMPUTE)});
  pkt4s(RegId::HLSQ_INVALIDATE_CMD,
        {HLSQ_INVALIDATE_CMD_CS_STATE(g, 1) | HLSQ_INVALIDATE_CMD_CS_IBO(g, 1)});
  pkt4s(RegId::SP_CS_CONFIG, {SP_CS_CONFIG_ENABLED(g, 1) | SP_CS_CONFIG_NIBO(g, k.uav_count)});
  pkt4s(RegId::SP_CS_CTRL_REG0,
        {SP_CS_CTRL_REG0_HALFREGFOOTPRINT(g, k.half_regs) |
         SP_CS_CTRL_REG0_FULLREGFOOTPRINT(g, k.full_regs) |
         SP_CS_CTRL_REG0_BRANCHSTACK(g, k.branch_stack) |
         SP_CS_CTRL_REG0_THREADSIZE(g, k.threadsize == 128)});
  pkt4s(RegId::HLSQ_CS_CNTL, {HLSQ_CS_CNTL_CONSTLEN(g, (k.const_dwords + 15) / 16) |
                              HLSQ_CS_CNTL_ENABLED(g, 1)});
  // Where the shader finds its workgroup and local ids, and its wave size: HLSQ_CS_CNTL_0/1
  // on a6xx, SP_CS_CNTL_0/1 plus HLSQ_CS_CNTL_1 on a7xx (freedreno fd6_compute.cc
  // cs_program_emit, under the 2024 register names). Workgroup size and offset, and the linear
  // local id, are never asked for (regid(63, 0)). a6xx parts with LPAC (a660) mirror
  // CNTL_0/1 into SP_CS_CNTL_0/1 for the LPAC pipe, which hcq does not use.
  constexpr uint32_t kNoRegid = 0xfc;
  const bool wave128 = k.threadsize == 128;
  if (g == Gen::A6xx) {
    pkt4s(RegId::HLSQ_CS_CNTL_0,
          {HLSQ_CS_CNTL_0_WGIDCONSTID(g, k.workgroup_id_regid) |
               HLSQ_CS_CNTL_0_WGSIZECONSTID(g, kNoRegid) |
               HLSQ_CS_CNTL_0_WGOFFSETCONSTID(g, kNoRegid) |
               HLSQ_CS_CNTL_0_LOCALIDREGID(g, k.local_id_regid),
           HLSQ_CS_CNTL_1_LINEARLOCALIDREGID(g, kNoRegid) | HLSQ_CS_CNTL_1_THREADSIZE(g, wave128)});
  } else {
    pkt4s(RegId::SP_CS_CNTL_0,
          {SP_CS_CNTL_0_WGIDCONSTID(g, k.workgroup_id_regid) |
               SP_CS_CNTL_0_WGSIZECONSTID(g, kNoRegid) | SP_CS_CNTL_0_WGOFFSETCONSTID(g, kNoRegid) |
               SP_CS_CNTL_0_LOCALIDREGID(g, k.local_id_regid),
           SP_CS_CNTL_1_LINEARLOCALIDREGID(g, kNoRegid) | SP_CS_CNTL_1_THREADSIZE(g, wave128)});
    // The workgroup raster order (UNK11: z first; UNK22: tile width 4) and tile height
    // (UNK26 | YALIGN << 1): 17, the height freedreno uses when block.y is odd and which
    // suits every block, so the launch template needs no patch for it.
    pkt4s(RegId::HLSQ_CS_CNTL_1,
          {HLSQ_CS_CNTL_1_LINEARLOCALIDREGID(g, kNoRegid) | HLSQ_CS_CNTL_1_THREADSIZE(g, wave128) |
           HLSQ_CS_CNTL_1_UNK11(g, 1) | HLSQ_CS_CNTL_1_UNK22(g, 1) | HLSQ_CS_CNTL_1_UNK26(g, 1) |
           HLSQ_CS_CNTL_1_YALIGN(g, 8)});
  }
  pkt4s(RegId::SP_CS_OBJ_START_LO, {lo(k.code_va), hi(k.code_va)});
  // The shader's length and its load count the same 128-byte units (regs.def SP_CS_INSTRLEN).
  const uint32_t shader_units = uint32_t((k.instr_dwords * 4 + 127) / 128);
  pkt4s(RegId::SP_CS_INSTRLEN, {SP_CS_INSTRLEN_INSTRLEN(g, shader_units)});
  // The shader, then the argument block (and ir3's immediates) into the constant file.
  w.insert(w.end(), {pkt7(CP_LOAD_STATE6_FRAG, 3),
                     CP_LOAD_STATE6_FRAG_STATE_TYPE(ST6_SHADER) |
                         CP_LOAD_STATE6_FRAG_STATE_SRC(SS6_INDIRECT) |
                         CP_LOAD_STATE6_FRAG_STATE_BLOCK(SB6_CS_SHADER) |
                         CP_LOAD_STATE6_FRAG_NUM_UNIT(shader_units),
                     lo(k.code_va), hi(k.code_va)});
  if (k.immediates_dwords)
    w.insert(w.end(), {pkt7(CP_LOAD_STATE6_FRAG, 3),
                       CP_LOAD_STATE6_FRAG_DST_OFF(k.immediates_offset / 16) |
                           CP_LOAD_STATE6_FRAG_STATE_TYPE(ST6_CONSTANTS) |
                           CP_LOAD_STATE6_FRAG_STATE_SRC(SS6_INDIRECT) |
                           CP_LOAD_STATE6_FRAG_STATE_BLOCK(SB6_CS_SHADER) |
                           CP_LOAD_STATE6_FRAG_NUM_UNIT((k.immediates_dwords + 3) / 4),
                       lo(k.immediates_va), hi(k.immediates_va)});
  uint32_t args_at = 0;
  if (k.args_bytes) {
    args_at = uint32_t(w.size()) + 2;
    w.insert(w.end(), {pkt7(CP_LOAD_STATE6_FRAG, 3),
                       CP_LOAD_STATE6_FRAG_DST_OFF(k.args_offset / 16) |
                           CP_LOAD_STATE6_FRAG_STATE_TYPE(ST6_CONSTANTS) |
                           CP_LOAD_STATE6_FRAG_STATE_SRC(SS6_INDIRECT) |
                           CP_LOAD_STATE6_FRAG_STATE_BLOCK(SB6_CS_SHADER) |
                           CP_LOAD_STATE6_FRAG_NUM_UNIT(k.args_bytes / 16),
                       lo(kernargs), hi(kernargs)});
  }
  // UAVs, as computerator's cs_ibo_emit loads them (the same for a6xx and a7xx): the
  // descriptors preloaded with CP_LOAD_STATE6_FRAG (ST6_UAV, "ST6_IBO" in 2024 Mesa, into
  // SB6_CS_SHADER; NUM_UNIT counts descriptors), SP_CS_IBO pointing at them and
  // SP_CS_IBO_COUNT. First each buffer's address is copied from the argument block into its
  // descriptor's BASE (dwords 4-5) by CP_MEM_TO_MEM (DOUBLE: one 64-bit source), and the CP
  // waits for those writes (CP_WAIT_MEM_WRITES, then CP_WAIT_FOR_ME as freedreno does before
  // the CP reads what it wrote) before the state load reads them.
  std::vector<std::pair<uint32_t, uint64_t>> uav_sites;  // (dword, offset in the kernarg area)
  if (!k.uav_arg_offsets.empty()) {
    const uint32_t n = uint32_t(k.uav_arg_offsets.size());
    for (uint32_t i = 0; i < n; i++) {
      const uint64_t dst = k.uav_table_offset + uint64_t(i) * kTEX_MEMOBJ_DWORDS * 4 +
                           TEX_MEMOBJ_BASE_LO.dword * 4;
      const uint64_t src = k.uav_arg_offsets[i];
      uav_sites.push_back({uint32_t(w.size()) + 2, dst});
      uav_sites.push_back({uint32_t(w.size()) + 4, src});
      w.insert(w.end(), {pkt7(CP_MEM_TO_MEM, 5), CP_MEM_TO_MEM_DOUBLE(1), lo(kernargs + dst),
                         hi(kernargs + dst), lo(kernargs + src), hi(kernargs + src)});
    }
    const uint64_t table = kernargs + k.uav_table_offset;
    uav_sites.push_back({uint32_t(w.size()) + 4, k.uav_table_offset});
    w.insert(w.end(), {pkt7(CP_WAIT_MEM_WRITES, 0), pkt7(CP_WAIT_FOR_ME, 0),
                       pkt7(CP_LOAD_STATE6_FRAG, 3),
                       CP_LOAD_STATE6_FRAG_STATE_TYPE(ST6_UAV) |
                           CP_LOAD_STATE6_FRAG_STATE_SRC(SS6_INDIRECT) |
                           CP_LOAD_STATE6_FRAG_STATE_BLOCK(SB6_CS_SHADER) |
                           CP_LOAD_STATE6_FRAG_NUM_UNIT(n),
                       lo(table), hi(table)});
    uav_sites.push_back({uint32_t(w.size()) + 1, k.uav_table_offset});
    pkt4s(RegId::SP_CS_IBO_LO, {lo(table), hi(table)});
    pkt4s(RegId::SP_CS_IBO_COUNT, {n});
  }
  const uint32_t ndrange_at = uint32_t(w.size()) + 1;
  pkt4s(RegId::HLSQ_CS_NDRANGE_0,
        {HLSQ_CS_NDRANGE_0_KERNELDIM(g, 3) | HLSQ_CS_NDRANGE_0_LOCALSIZEX(g, block.x - 1) |
             HLSQ_CS_NDRANGE_0_LOCALSIZEY(g, block.y - 1) |
             HLSQ_CS_NDRANGE_0_LOCALSIZEZ(g, block.z - 1),
         grid.x * block.x, 0, grid.y * block.y, 0, grid.z * block.z, 0});
  pkt4s(RegId::HLSQ_CS_KERNEL_GROUP_X, {1, 1, 1});
  uint32_t last_at = 0;  // a7xx: the last workgroup's size (whole workgroups: the local size)
  if (g != Gen::A6xx) {
    last_at = uint32_t(w.size()) + 1;
    pkt4s(RegId::HLSQ_CS_LAST_LOCAL_SIZE, {HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX(g, block.x - 1) |
                                           HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY(g, block.y - 1) |
                                           HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ(g, block.z - 1)});
  }
  const uint32_t exec_at = uint32_t(w.size()) + 2;
  w.insert(w.end(), {pkt7(CP_EXEC_CS, 4), 0, grid.x, grid.y, grid.z});
  w.push_back(pkt7(CP_WAIT_FOR_IDLE, 0));  // launches in a queue run one after another
  std::memcpy(cs.grow(w.size()), w.data(), w.size() * 4);

  if (args_at) s.push_back({at + args_at, PatchFormat::LoHi64, PatchRole::KernargAddress});
  for (auto [dword, offset] : uav_sites)
    s.push_back(offset_site(at + dword, PatchFormat::LoHi64, PatchRole::KernargAddress, offset));
  const RegField* local[3] = {&HLSQ_CS_NDRANGE_0_LOCALSIZEX, &HLSQ_CS_NDRANGE_0_LOCALSIZEY,
                              &HLSQ_CS_NDRANGE_0_LOCALSIZEZ};
  const RegField* last[3] = {&HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEX,
                             &HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEY,
                             &HLSQ_CS_LAST_LOCAL_SIZE_LOCALSIZEZ};
  const PatchRole blocks[3] = {PatchRole::BlockX, PatchRole::BlockY, PatchRole::BlockZ};
  const PatchRole grids[3] = {PatchRole::GridX, PatchRole::GridY, PatchRole::GridZ};
  const size_t gi = g == Gen::A6xx ? 0 : 1;
  for (int i = 0; i < 3; i++) {
    PatchSite b = field_site(at + ndrange_at, blocks[i], local[i]->lo[gi], local[i]->width[gi]);
    b.add = kMinusOne;  // written minus one
    s.push_back(b);
    if (last_at) {
      PatchSite l = field_site(at + last_at, blocks[i], last[i]->lo[gi], last[i]->width[gi]);
      l.add = kMinusOne;
      s.push_back(l);
    }
    s.push_back({at + exec_at + uint32_t(i), PatchFormat::Lo32, grids[i]});
  }
  // HLSQ_CS_NDRANGE_1/3/5 (global sizes) are grid * block: a patch of one of them leaves them
  // stale; the emulated GPU and hcq's kernels do not read them.
}

void CpEncoder::copy(CommandStream&, uint64_t, uint64_t, uint64_t, std::vector<PatchSite>&) {
  throw InvalidInput("Adreno GPUs have no copy engine: copy with Device::copy (a host copy on "
                     "their shared memory) or a kernel");
}

}  // namespace hcq::qcom
