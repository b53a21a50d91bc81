#include "nv/encoders.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/launch_template.hpp"

namespace hcq::nv {
namespace {

constexpr uint32_t lo(uint64_t v) { return uint32_t(v); }
constexpr uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }
uint32_t round_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

// SEM_EXECUTE operations (open-gpu-doc clc56f.h NVC56F_SEM_EXECUTE_OPERATION_*).
constexpr uint32_t kSemRelease = 1, kSemAcquireStrictGeq = 2;
// SEND_SIGNALING_PCAS2_B PCAS_ACTION: invalidate, copy and schedule the QMD (clc6c0.h; what
// tinygrad ops_nv.py sends).
constexpr uint32_t kPcasInvalidateCopySchedule = 9;
// COPY LAUNCH_DMA DATA_TRANSFER_TYPE_NON_PIPELINED: a transfer starts after the previous one
// ends, so copies in a channel complete in order (clc6b5.h).
constexpr uint32_t kNonPipelined = 2;
// COMPUTE LAUNCH_DMA COMPLETION_TYPE_FLUSH_ONLY (clc6c0.h).
constexpr uint32_t kLaunchDmaFlushOnly = 1;

// The QMD fields a launch writes, per version (qmd.def).
struct QmdLayout {
  const QmdField* grid[3];
  const QmdField* block[3];
  const QmdField* cbuf_lo;
  const QmdField* cbuf_hi;
  uint8_t cbuf_shift;  // the constant buffer address is stored >> this
};
constexpr QmdLayout layout(QmdVersion v) {
  if (v == QmdVersion::V03)
    return {{&QMD_V03_CTA_RASTER_WIDTH, &QMD_V03_CTA_RASTER_HEIGHT, &QMD_V03_CTA_RASTER_DEPTH},
            {&QMD_V03_CTA_THREAD_DIMENSION0, &QMD_V03_CTA_THREAD_DIMENSION1,
             &QMD_V03_CTA_THREAD_DIMENSION2},
            &QMD_V03_CONSTANT_BUFFER_ADDR_LOWER0,
            &QMD_V03_CONSTANT_BUFFER_ADDR_UPPER0,
            0};
  if (v == QmdVersion::V04)
    return {{&QMD_V04_GRID_WIDTH, &QMD_V04_GRID_HEIGHT, &QMD_V04_GRID_DEPTH},
            {&QMD_V04_CTA_THREAD_DIMENSION0, &QMD_V04_CTA_THREAD_DIMENSION1,
             &QMD_V04_CTA_THREAD_DIMENSION2},
            &QMD_V04_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0,
            &QMD_V04_CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0,
            6};
  return {{&QMD_V05_GRID_WIDTH, &QMD_V05_GRID_HEIGHT, &QMD_V05_GRID_DEPTH},
          {&QMD_V05_CTA_THREAD_DIMENSION0, &QMD_V05_CTA_THREAD_DIMENSION1,
           &QMD_V05_CTA_THREAD_DIMENSION2},
          &QMD_V05_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0,
          &QMD_V05_CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0,
          6};
}

// Where a launch's words hold what varies (ComputeEncoder::encode_launch lays them out): the
// kernarg address for the inline DMA at dword 1, the inline data (QMD, then the launch
// dimensions) from dword 9, SEND_PCAS_A's QMD address after it.
constexpr uint32_t kLaunchInlineAt = 9;
// Write a launch's values into its words `p`. The version is a template argument so every
// field's place is a constant: exec does this per launch, on a copy of the prepared launch.
template <QmdVersion V>
void put_launch_values(uint32_t* p, uint64_t kernargs, Dim3 grid, Dim3 block) {
  constexpr QmdLayout L = layout(V);
  constexpr uint32_t qmd_dw = qmd_bytes(V) / 4;
  const uint64_t cbuf = kernargs + cbuf0_offset(V);
  p[1] = hi(kernargs);
  p[2] = lo(kernargs);
  uint32_t* q = p + kLaunchInlineAt;
  // Written out, not looped: GCC -O2 keeps a loop over the fields and reads their places.
  L.grid[0]->put(q, grid.x);
  L.grid[1]->put(q, grid.y);
  L.grid[2]->put(q, grid.z);
  L.block[0]->put(q, block.x);
  L.block[1]->put(q, block.y);
  L.block[2]->put(q, block.z);
  uint32_t* dims = q + qmd_dw;  // blockDim, then gridDim
  dims[0] = block.x;
  dims[1] = block.y;
  dims[2] = block.z;
  dims[3] = grid.x;
  dims[4] = grid.y;
  dims[5] = grid.z;
  L.cbuf_lo->put(q, cbuf >> L.cbuf_shift);
  L.cbuf_hi->put(q, cbuf >> (32 + L.cbuf_shift));
  q[qmd_dw + kCbuf0DimDwords + 1] = uint32_t(kernargs >> 8);  // SEND_PCAS_A
}

void put_launch_values(QmdVersion v, uint32_t* p, uint64_t kernargs, Dim3 grid, Dim3 block) {
  switch (v) {
    case QmdVersion::V03: return put_launch_values<QmdVersion::V03>(p, kernargs, grid, block);
    case QmdVersion::V04: return put_launch_values<QmdVersion::V04>(p, kernargs, grid, block);
    case QmdVersion::V05: return put_launch_values<QmdVersion::V05>(p, kernargs, grid, block);
  }
}

PatchSite site_of(uint32_t base, const QmdField& f, PatchRole role, uint8_t shift = 0) {
  return field_site(base + f.dword(), role, uint8_t(f.lo % 32), uint8_t(f.width()), shift);
}

// The shared-memory carveout a launch asks for, in the QMD's units (4 KiB blocks plus one):
// the smallest of 32, 64 and 100 KiB that holds the kernel's shared memory (tinygrad ops_nv.py).
uint32_t smem_config(uint32_t shared_bytes) {
  for (uint32_t kb : {32u, 64u, 100u})
    if (kb * 1024 >= shared_bytes) return kb * 1024 / 4096 + 1;
  return 100 * 1024 / 4096 + 1;
}

}  // namespace

// ---- host semaphores ------------------------------------------------------------------

void encode_semaphore_wait(CommandStream& cs, uint64_t va, uint64_t value,
                           std::vector<PatchSite>& s) {
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(6);
  p[0] = inc(kSubHost, HOST_SEM_ADDR_LO, 5);
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = lo(value);
  p[4] = hi(value);
  p[5] = HOST_SEM_EXECUTE_OPERATION_ALL(kSemAcquireStrictGeq) |
         HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL(1);
  s.push_back({at + 1, PatchFormat::LoHi64, PatchRole::WaitAddress});
  s.push_back({at + 3, PatchFormat::LoHi64, PatchRole::WaitValue});
}

void encode_semaphore_release(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                              bool timestamp, std::vector<PatchSite>& s) {
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(wake ? 8 : 6);
  p[0] = inc(kSubHost, HOST_SEM_ADDR_LO, 5);
  p[1] = lo(va);
  p[2] = hi(va);
  p[3] = lo(value);
  p[4] = hi(value);
  // RELEASE_WFI: the release waits until the channel's engine is idle (prior work done).
  p[5] = HOST_SEM_EXECUTE_OPERATION_ALL(kSemRelease) | HOST_SEM_EXECUTE_RELEASE_WFI_ALL(1) |
         HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL(1) | HOST_SEM_EXECUTE_RELEASE_TIMESTAMP_ALL(timestamp);
  if (wake) {
    p[6] = inc(kSubHost, HOST_NON_STALL_INTERRUPT, 1);
    p[7] = 0;
  }
  if (timestamp) {
    s.push_back({at + 1, PatchFormat::LoHi64, PatchRole::TimestampAddress});
  } else {
    s.push_back({at + 1, PatchFormat::LoHi64, PatchRole::SignalAddress});
    s.push_back({at + 3, PatchFormat::LoHi64, PatchRole::SignalValue});
  }
}

// ---- compute --------------------------------------------------------------------------

void ComputeEncoder::wait(CommandStream& cs, uint64_t va, uint64_t value,
                          std::vector<PatchSite>& s) {
  encode_semaphore_wait(cs, va, value, s);
}

void ComputeEncoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                            std::vector<PatchSite>& s) {
  encode_semaphore_release(cs, va, value, wake, false, s);
}

void ComputeEncoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  // A release with a timestamp writes the payload (0) at va and the timestamp at va+8.
  encode_semaphore_release(cs, va, 0, false, true, s);
}

void ComputeEncoder::memory_barrier(CommandStream& cs) {
  uint32_t* p = cs.grow(2);
  p[0] = inc(kSubCompute, COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI, 1);
  p[1] = COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION_ALL(1) |
         COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA_ALL(1) |
         COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT_ALL(1);
}

std::vector<uint32_t> ComputeEncoder::setup(uint32_t compute_class, uint64_t shared_window,
                                            uint64_t local_window) {
  return {inc(kSubCompute, COMPUTE_SET_OBJECT, 1), compute_class,
          inc(kSubCompute, COMPUTE_SET_SHADER_SHARED_MEMORY_WINDOW_A, 2), hi(shared_window),
          lo(shared_window),
          inc(kSubCompute, COMPUTE_SET_SHADER_LOCAL_MEMORY_WINDOW_A, 2), hi(local_window),
          lo(local_window)};
}

void ComputeEncoder::prepare(NvKernel& k) const {
  const uint64_t pgm = k.code_va;
  const uint32_t cbuf_size = round_up(k.cbuf0_bytes, 16) >> 4;
  k.qmd_version = version_;
  k.qmd.assign(qmd_bytes(version_) / 4, 0);
  uint32_t* q = k.qmd.data();
  // Launch-independent fields, set as tinygrad ops_nv.py sets them.
  switch (version_) {
    case QmdVersion::V03:
      QMD_V03_QMD_GROUP_ID.put(q, 0x3f);
      QMD_V03_SM_GLOBAL_CACHING_ENABLE.put(q, 1);
      QMD_V03_INVALIDATE_TEXTURE_HEADER_CACHE.put(q, 1);
      QMD_V03_INVALIDATE_TEXTURE_SAMPLER_CACHE.put(q, 1);
      QMD_V03_INVALIDATE_TEXTURE_DATA_CACHE.put(q, 1);
      QMD_V03_INVALIDATE_SHADER_DATA_CACHE.put(q, 1);
      QMD_V03_CWD_MEMBAR_TYPE.put(q, 1);  // L1_SYSMEMBAR
      QMD_V03_API_VISIBLE_CALL_LIMIT.put(q, 1);  // NO_CHECK
      QMD_V03_SAMPLER_INDEX.put(q, 1);  // VIA_HEADER_INDEX
      QMD_V03_SHARED_MEMORY_SIZE.put(q, std::max(0x400u, round_up(k.shared_bytes, 0x100)));
      QMD_V03_MIN_SM_CONFIG_SHARED_MEM_SIZE.put(q, 3);
      QMD_V03_MAX_SM_CONFIG_SHARED_MEM_SIZE.put(q, 0x1a);
      QMD_V03_TARGET_SM_CONFIG_SHARED_MEM_SIZE.put(q, smem_config(k.shared_bytes));
      QMD_V03_QMD_MAJOR_VERSION.put(q, 3);
      QMD_V03_REGISTER_COUNT_V.put(q, k.registers);
      QMD_V03_BARRIER_COUNT.put(q, std::max(1u, k.barriers));
      QMD_V03_CONSTANT_BUFFER_VALID0.put(q, 1);
      QMD_V03_CONSTANT_BUFFER_INVALIDATE0.put(q, 1);
      QMD_V03_CONSTANT_BUFFER_SIZE_SHIFTED4_0.put(q, cbuf_size);
      QMD_V03_PROGRAM_ADDRESS_LOWER.put(q, lo(pgm));
      QMD_V03_PROGRAM_ADDRESS_UPPER.put(q, hi(pgm));
      QMD_V03_PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED.put(q, lo(pgm >> 8));
      QMD_V03_PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED.put(q, uint32_t(pgm >> 40));
      QMD_V03_PROGRAM_PREFETCH_SIZE.put(q, std::min<uint64_t>(k.code_bytes >> 8, 0x1ff));
      QMD_V03_SASS_VERSION.put(q, (k.sm / 10) << 4 | (k.sm % 10));  // sm_89 -> 0x89
      break;
    case QmdVersion::V04:
      // An H200 (RM 580.159) ran these launches; without the group id and QMD_TYPE it ran
      // no CTA and raised no error.
      QMD_V04_QMD_GROUP_ID.put(q, 0x1f);
      QMD_V04_QMD_TYPE.put(q, 2);  // GRID_CTA (as V05's NVCEC0_QMDV05_00_QMD_TYPE_GRID_CTA)
      QMD_V04_API_VISIBLE_CALL_LIMIT.put(q, 1);
      QMD_V04_SAMPLER_INDEX.put(q, 1);
      QMD_V04_QMD_MAJOR_VERSION.put(q, 4);
      QMD_V04_SHARED_MEMORY_SIZE.put(q, round_up(k.shared_bytes, 0x100));
      QMD_V04_INVALIDATE_SHADER_DATA_CACHE.put(q, 1);
      QMD_V04_INVALIDATE_INSTRUCTION_CACHE.put(q, 1);
      QMD_V04_INVALIDATE_SHADER_CONSTANT_CACHE.put(q, 1);
      QMD_V04_REGISTER_COUNT.put(q, k.registers);
      QMD_V04_BARRIER_COUNT.put(q, std::max(1u, k.barriers));
      QMD_V04_PROGRAM_ADDRESS_LOWER.put(q, lo(pgm));
      QMD_V04_PROGRAM_ADDRESS_UPPER.put(q, hi(pgm));
      QMD_V04_CONSTANT_BUFFER_SIZE_SHIFTED4_0.put(q, cbuf_size);
      QMD_V04_CONSTANT_BUFFER_VALID0.put(q, 1);
      break;
    case QmdVersion::V05:
      QMD_V05_QMD_GROUP_ID.put(q, 0x1f);
      QMD_V05_QMD_TYPE.put(q, 2);  // NVCEC0_QMDV05_00_QMD_TYPE_GRID_CTA
      QMD_V05_API_VISIBLE_CALL_LIMIT.put(q, 1);
      QMD_V05_SAMPLER_INDEX.put(q, 1);
      QMD_V05_QMD_MAJOR_VERSION.put(q, 5);
      QMD_V05_INVALIDATE_SHADER_DATA_CACHE.put(q, 1);
      QMD_V05_INVALIDATE_INSTRUCTION_CACHE.put(q, 1);
      QMD_V05_INVALIDATE_SHADER_CONSTANT_CACHE.put(q, 1);
      QMD_V05_PROGRAM_ADDRESS_LOWER_SHIFTED4.put(q, lo(pgm >> 4));
      QMD_V05_PROGRAM_ADDRESS_UPPER_SHIFTED4.put(q, hi(pgm >> 4));
      QMD_V05_REGISTER_COUNT.put(q, k.registers);
      QMD_V05_BARRIER_COUNT.put(q, std::max(1u, k.barriers));
      QMD_V05_SHARED_MEMORY_SIZE_SHIFTED7.put(q, round_up(k.shared_bytes, 0x80) >> 7);
      QMD_V05_CONSTANT_BUFFER_SIZE_SHIFTED4_0.put(q, cbuf_size);
      QMD_V05_CONSTANT_BUFFER_VALID0.put(q, 1);
      break;
  }
  CommandStream cs;
  k.launch_sites.clear();
  encode_launch(cs, k, 0, {0, 0, 0}, {0, 0, 0}, k.launch_sites);
  k.launch_words.assign(cs.data(), cs.data() + cs.size());
}

void ComputeEncoder::exec(CommandStream& cs, const KernelObject& obj, uint64_t kernargs,
                          Dim3 grid, Dim3 block, std::vector<PatchSite>& s) {
  const auto& k = static_cast<const NvKernel&>(obj);
  if (k.qmd_version != version_ || k.launch_words.empty())
    throw InvalidInput("kernel '" + k.name + "' was not prepared for QMD V0" +
                       std::to_string(int(version_)) + " (loaded on another device?)");
  if (kernargs & 0xff)
    throw InvalidInput("kernel '" + k.name + "': kernarg area " + hex(kernargs) +
                       " is not 256-byte aligned (the QMD is sent as address >> 8)");
  // A launch straight after another (a memory barrier between them allowed) chains to it.
  // (Only V03 chains, and only after a launch's tail: the first command of a stream skips
  // the look.)
  Chain chain;
  if (version_ == QmdVersion::V03 && cs.size() >= kLaunchTailDwords) chain = chainable(cs, s);
  if (chain.ok) cs.truncate(chain.tail_at);
  // Copy the prepared launch, its sites, and write this launch's values.
  const uint32_t at = uint32_t(cs.size());
  const size_t n = k.launch_words.size();
  uint32_t* p = cs.grow(n);
  std::memcpy(p, k.launch_words.data(), n * 4);
  const size_t first = s.size();
  append_sites(s, k.launch_sites.data(), k.launch_sites.size(), at);
  put_launch_values(version_, p, kernargs, grid, block);
  if (!chain.ok) return;
  // The previous launch schedules this one when it completes (its QMD's dependent QMD);
  // its SEND_PCAS and WFI move after this launch's QMD, so both QMDs are in memory before it
  // starts, and this launch sends nothing itself.
  const uint32_t tail = at + uint32_t(n) - kLaunchTailDwords;
  std::memcpy(cs.data() + tail, chain.tail, sizeof chain.tail);
  uint32_t* prev_qmd = cs.data() + chain.qmd_at;
  QMD_V03_DEPENDENT_QMD0_POINTER.put(prev_qmd, uint32_t(kernargs >> 8));
  QMD_V03_DEPENDENT_QMD0_ENABLE.put(prev_qmd, 1);
  QMD_V03_DEPENDENT_QMD0_ACTION.put(prev_qmd, kDependentActionSchedule);
  QMD_V03_DEPENDENT_QMD0_PREFETCH.put(prev_qmd, 1);
  for (size_t i = first; i < s.size(); i++)  // this launch's SEND_PCAS site goes
    if (s[i].dword == tail + 1) {
      s.erase(s.begin() + long(i));
      break;
    }
  s[chain.pcas_site].dword = tail + 1;  // the previous launch's SEND_PCAS moved
  const QmdField& ptr = QMD_V03_DEPENDENT_QMD0_POINTER;
  s.push_back(field_site(chain.qmd_at + ptr.dword(), PatchRole::KernargAddress,
                         uint8_t(ptr.lo % 32), uint8_t(ptr.width()), 8));
}

ComputeEncoder::Chain ComputeEncoder::chainable(const CommandStream& cs,
                                                const std::vector<PatchSite>& s) const {
  Chain c;
  // Dependent QMDs are described for V03 (clc9c0qmd.h); V04/V05 launches stay separate.
  if (version_ != QmdVersion::V03) return c;
  const uint32_t* w = cs.data();
  uint32_t end = uint32_t(cs.size());
  const uint32_t barrier = inc(kSubCompute, COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI, 1);
  if (end >= 2 && w[end - 2] == barrier) end -= 2;  // the QMD invalidates the caches itself
  if (end < kLaunchTailDwords) return c;
  const uint32_t t = end - kLaunchTailDwords;
  if (w[t] != inc(kSubCompute, COMPUTE_SEND_PCAS_A, 1) ||
      w[t + 2] != inc(kSubCompute, COMPUTE_SEND_SIGNALING_PCAS2_B, 1) ||
      w[t + 4] != inc(kSubHost, HOST_WFI, 1))
    return c;
  // The previous launch's SEND_PCAS site names its QMD's place (inline data before the tail).
  const uint32_t qmd_dw = qmd_bytes(version_) / 4;
  if (t < qmd_dw + kCbuf0DimDwords) return c;
  const uint32_t qmd_at = t - kCbuf0DimDwords - qmd_dw;
  if (w[qmd_at - 1] != non_inc(kSubCompute, COMPUTE_LOAD_INLINE_DATA, qmd_dw + kCbuf0DimDwords))
    return c;
  for (size_t i = s.size(); i-- > 0;)
    if (s[i].dword == t + 1 && s[i].role == PatchRole::KernargAddress) {
      c.pcas_site = i;
      c.ok = true;
      break;
    }
  if (!c.ok) return c;
  if (QMD_V03_DEPENDENT_QMD0_ENABLE.get(w + qmd_at)) {  // already chained: keep it simple
    c.ok = false;
    return c;
  }
  c.tail_at = t;
  c.qmd_at = qmd_at;
  std::memcpy(c.tail, w + t, sizeof c.tail);
  return c;
}

void ComputeEncoder::encode_launch(CommandStream& cs, const NvKernel& k, uint64_t kernargs,
                                   Dim3 grid, Dim3 block, std::vector<PatchSite>& s) const {
  const QmdLayout L = layout(version_);
  const uint32_t qmd_dw = uint32_t(k.qmd.size());
  const uint32_t inline_dw = qmd_dw + kCbuf0DimDwords;
  const uint32_t at = uint32_t(cs.size());
  uint32_t* p = cs.grow(15 + inline_dw);
  // Write the QMD and the launch dimensions into the kernarg area from the push buffer.
  p[0] = inc(kSubCompute, COMPUTE_OFFSET_OUT_UPPER, 2);
  p[3] = inc(kSubCompute, COMPUTE_LINE_LENGTH_IN, 2);
  p[4] = inline_dw * 4;
  p[5] = 1;
  p[6] = inc(kSubCompute, COMPUTE_LAUNCH_DMA, 1);
  // FLUSH_ONLY with the sysmembar: the QMD must be in memory before SEND_PCAS fetches it
  // (Mesa's nvc0 uploads launch descriptors so; the H200 runs were made with it).
  p[7] = COMPUTE_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL(1) |
         COMPUTE_LAUNCH_DMA_COMPLETION_TYPE_ALL(kLaunchDmaFlushOnly);
  p[8] = non_inc(kSubCompute, COMPUTE_LOAD_INLINE_DATA, inline_dw);
  std::memcpy(p + kLaunchInlineAt, k.qmd.data(), qmd_dw * 4);
  uint32_t* t = p + kLaunchInlineAt + inline_dw;
  t[0] = inc(kSubCompute, COMPUTE_SEND_PCAS_A, 1);
  t[2] = inc(kSubCompute, COMPUTE_SEND_SIGNALING_PCAS2_B, 1);
  t[3] = COMPUTE_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_ALL(kPcasInvalidateCopySchedule);
  // Launches in a channel may overlap; wait for this one before anything later runs.
  t[4] = inc(kSubHost, HOST_WFI, 1);
  t[5] = 0;
  // The kernarg address (p[1-2], SEND_PCAS_A's t[1], the constant buffer's in the QMD), the
  // grid and block in the QMD and in constant bank 0.
  put_launch_values(version_, p, kernargs, grid, block);

  const uint32_t qa = at + kLaunchInlineAt;  // the QMD's first dword in the stream
  const PatchRole grid_roles[3] = {PatchRole::GridX, PatchRole::GridY, PatchRole::GridZ};
  const PatchRole block_roles[3] = {PatchRole::BlockX, PatchRole::BlockY, PatchRole::BlockZ};
  for (int i = 0; i < 3; i++) {
    s.push_back(site_of(qa, *L.grid[i], grid_roles[i]));
    s.push_back(site_of(qa, *L.block[i], block_roles[i]));
    s.push_back({qa + qmd_dw + uint32_t(i), PatchFormat::Lo32, block_roles[i]});
    s.push_back({qa + qmd_dw + 3 + uint32_t(i), PatchFormat::Lo32, grid_roles[i]});
  }
  const uint64_t to_cbuf = cbuf0_offset(version_);
  s.push_back({at + 1, PatchFormat::HiLo64, PatchRole::KernargAddress});
  PatchSite c_lo = site_of(qa, *L.cbuf_lo, PatchRole::KernargAddress, L.cbuf_shift);
  PatchSite c_hi = site_of(qa, *L.cbuf_hi, PatchRole::KernargAddress, uint8_t(32 + L.cbuf_shift));
  c_lo.add = c_hi.add = to_cbuf;
  s.push_back(c_lo);
  s.push_back(c_hi);
  s.push_back(field_site(qa + inline_dw + 1, PatchRole::KernargAddress, 0, 32, 8));  // SEND_PCAS_A
}

void ComputeEncoder::copy(CommandStream&, uint64_t, uint64_t, uint64_t, std::vector<PatchSite>&) {
  throw InvalidInput("NVIDIA compute queues do not copy; use the copy queue");
}

// ---- copy -----------------------------------------------------------------------------

void CopyEncoder::wait(CommandStream& cs, uint64_t va, uint64_t value, std::vector<PatchSite>& s) {
  encode_semaphore_wait(cs, va, value, s);
}

void CopyEncoder::signal(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                         std::vector<PatchSite>& s) {
  encode_semaphore_release(cs, va, value, wake, false, s);
}

void CopyEncoder::timestamp(CommandStream& cs, uint64_t va, std::vector<PatchSite>& s) {
  encode_semaphore_release(cs, va, 0, false, true, s);
}

// Non-pipelined transfers complete in order, and releases wait for idle.
void CopyEncoder::memory_barrier(CommandStream&) {}

void CopyEncoder::exec(CommandStream&, const KernelObject&, uint64_t, Dim3, Dim3,
                       std::vector<PatchSite>&) {
  throw InvalidInput("NVIDIA copy queues do not launch kernels; use the compute queue");
}

std::vector<uint32_t> CopyEncoder::setup(uint32_t copy_class) {
  return {inc(kSubCopy, COPY_SET_OBJECT, 1), copy_class};
}

void CopyEncoder::copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
                       std::vector<PatchSite>& s) {
  const uint32_t launch = COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_ALL(kNonPipelined) |
                          COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_ALL(1) |
                          COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL(1);
  for (uint64_t off = 0; off < size; off += kMaxCopy) {
    const uint64_t n = std::min(kMaxCopy, size - off);
    const uint32_t at = uint32_t(cs.size());
    uint32_t* p = cs.grow(9);
    p[0] = inc(kSubCopy, COPY_OFFSET_IN_UPPER, 4);
    p[1] = hi(src + off);
    p[2] = lo(src + off);
    p[3] = hi(dst + off);
    p[4] = lo(dst + off);
    p[5] = inc(kSubCopy, COPY_LINE_LENGTH_IN, 1);
    p[6] = uint32_t(n);
    p[7] = inc(kSubCopy, COPY_LAUNCH_DMA, 1);
    p[8] = launch;
    s.push_back(offset_site(at + 1, PatchFormat::HiLo64, PatchRole::CopySrc, off));
    s.push_back(offset_site(at + 3, PatchFormat::HiLo64, PatchRole::CopyDst, off));
  }
}

}  // namespace hcq::nv
