#include "nv/encoders.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/launch_template.hpp"
#include "common/bitfield.hpp"

namespace hcq::nv {
namespace {

constexpr uint32_t lo(uint64_t v) { return uint32_t(v); }
constexpr uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }
uint32_t round_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

// A launch's words, as encode_launch writes them: incrementing runs (a header, then one data
// dword per method) for the inline DMA's destination, its length and LAUNCH_DMA; the inline
// data (the QMD, then the launch dimensions) after its non-incrementing header; then the tail
// (SEND_PCAS_A, SEND_SIGNALING_PCAS2_B, host WFI). Every place below follows from the runs'
// methods; put_launch_values writes through them per launch.
constexpr uint32_t run_dwords(uint16_t first, uint16_t last) { return 2 + (last - first) / 4u; }
constexpr uint32_t kDstRun = 0;
constexpr uint32_t kLengthRun = kDstRun + run_dwords(COMPUTE_OFFSET_OUT_UPPER, COMPUTE_OFFSET_OUT);
constexpr uint32_t kDmaRun = kLengthRun + run_dwords(COMPUTE_LINE_LENGTH_IN, COMPUTE_LINE_COUNT);
constexpr uint32_t kInlineRun = kDmaRun + run_dwords(COMPUTE_LAUNCH_DMA, COMPUTE_LAUNCH_DMA);
constexpr uint32_t kLaunchInlineAt = kInlineRun + 1;  // the QMD's first dword
constexpr uint32_t kDstHi = kDstRun + run_data_dword(COMPUTE_OFFSET_OUT_UPPER, COMPUTE_OFFSET_OUT_UPPER);
constexpr uint32_t kDstLo = kDstRun + run_data_dword(COMPUTE_OFFSET_OUT_UPPER, COMPUTE_OFFSET_OUT);
// The tail's runs, from the tail's start.
constexpr uint32_t kPcasRun = 0;
constexpr uint32_t kPcas2Run = kPcasRun + run_dwords(COMPUTE_SEND_PCAS_A, COMPUTE_SEND_PCAS_A);
constexpr uint32_t kWfiRun = kPcas2Run + run_dwords(COMPUTE_SEND_SIGNALING_PCAS2_B,
                                                    COMPUTE_SEND_SIGNALING_PCAS2_B);
constexpr uint32_t kPcasData = kPcasRun + run_data_dword(COMPUTE_SEND_PCAS_A, COMPUTE_SEND_PCAS_A);
// V03 PROGRAM_PREFETCH_*_SHIFTED and V05 SHARED_MEMORY_SIZE_SHIFTED7: the fields' units.
constexpr uint8_t kPrefetchShift = 8, kShared7Shift = 7;
// Constant bank 0 starts with blockDim, then gridDim (kCbuf0DimDwords).
constexpr uint32_t kCbuf0BlockAt = 0, kCbuf0GridAt = 3;

// The exact error for a grid or CTA dimension its QMD field cannot hold.
[[noreturn]] void dimension_does_not_fit(const NvKernel& k, const QmdField& f, uint32_t v) {
  desc::throw_does_not_fit("kernel '" + k.name + "': QMD V0" + std::to_string(int(k.qmd_version)),
                           f.name, v, f.width);
}

// Grid and CTA sizes enter here, at recording: the fields narrower than 32 bits are checked
// (CTA_THREAD_DIMENSION1/2 and the grid's height and depth are 16 bits, V05's DIMENSION2 8).
template <QmdVersion V>
void check_dims(const NvKernel& k, Dim3 grid, Dim3 block) {
  constexpr QmdLayout L = qmd_layout(V);
  auto check = [&](const QmdField& f, uint32_t v) {
    if (!f.bits().fits(v)) [[unlikely]]
      dimension_does_not_fit(k, f, v);
  };
  check(*L.grid[0], grid.x);
  check(*L.grid[1], grid.y);
  check(*L.grid[2], grid.z);
  check(*L.block[0], block.x);
  check(*L.block[1], block.y);
  check(*L.block[2], block.z);
}

// Write a launch's values into its words `p`. The version is a template argument so every
// field's place is a constant: exec does this per launch, on a copy of the prepared launch.
template <QmdVersion V>
void put_launch_values(uint32_t* p, uint64_t kernargs, Dim3 grid, Dim3 block) {
  constexpr QmdLayout L = qmd_layout(V);
  constexpr uint32_t qmd_dw = qmd_bytes(V) / 4;
  const uint64_t cbuf = kernargs + cbuf0_offset(V);
  p[kDstHi] = hi(kernargs);
  p[kDstLo] = lo(kernargs);
  uint32_t* q = p + kLaunchInlineAt;
  // Written out, not looped: GCC -O2 keeps a loop over the fields and reads their places.
  L.grid[0]->put(q, grid.x);
  L.grid[1]->put(q, grid.y);
  L.grid[2]->put(q, grid.z);
  L.block[0]->put(q, block.x);
  L.block[1]->put(q, block.y);
  L.block[2]->put(q, block.z);
  const uint32_t dims[kCbuf0DimDwords] = {block.x, block.y, block.z, grid.x, grid.y, grid.z};
  static_assert(kCbuf0BlockAt == 0 && kCbuf0GridAt == 3, "dims above: blockDim, then gridDim");
  std::memcpy(q + qmd_dw, dims, sizeof dims);
  L.cbuf_lo->put(q, cbuf >> L.cbuf_shift);
  L.cbuf_hi->put(q, cbuf >> (32 + L.cbuf_shift));
  q[qmd_dw + kCbuf0DimDwords + kPcasData] = uint32_t(kernargs >> kQmdAddressShift);  // SEND_PCAS_A
}

void put_launch_values(QmdVersion v, uint32_t* p, uint64_t kernargs, Dim3 grid, Dim3 block) {
  switch (v) {
    case QmdVersion::V03: return put_launch_values<QmdVersion::V03>(p, kernargs, grid, block);
    case QmdVersion::V04: return put_launch_values<QmdVersion::V04>(p, kernargs, grid, block);
    case QmdVersion::V05: return put_launch_values<QmdVersion::V05>(p, kernargs, grid, block);
  }
}

// Out of line and cold: the exact error is built only when some dimension does not fit.
[[gnu::cold, gnu::noinline]] void check_dims(const NvKernel& k, Dim3 grid, Dim3 block) {
  switch (k.qmd_version) {
    case QmdVersion::V03: return check_dims<QmdVersion::V03>(k, grid, block);
    case QmdVersion::V04: return check_dims<QmdVersion::V04>(k, grid, block);
    case QmdVersion::V05: return check_dims<QmdVersion::V05>(k, grid, block);
  }
}

// The largest value dimension `i` of the grid (or of the block) holds in every QMD version:
// launches within them skip the per-version check.
constexpr uint32_t every_version_mask(bool grid, int i) {
  uint32_t m = 0xffffffffu;
  for (QmdVersion v : {QmdVersion::V03, QmdVersion::V04, QmdVersion::V05}) {
    const QmdLayout L = qmd_layout(v);
    const uint32_t f = (grid ? L.grid[i] : L.block[i])->mask();
    m = f < m ? f : m;
  }
  return m;
}
HCQ_DESC_INLINE bool fits_every_version(Dim3 grid, Dim3 block) {
  constexpr uint32_t gx = every_version_mask(true, 0), gy = every_version_mask(true, 1),
                     gz = every_version_mask(true, 2), bx = every_version_mask(false, 0),
                     by = every_version_mask(false, 1), bz = every_version_mask(false, 2);
  return grid.x <= gx && grid.y <= gy && grid.z <= gz && block.x <= bx && block.y <= by &&
         block.z <= bz;
}

PatchSite site_of(uint32_t base, const QmdField& f, PatchRole role, uint8_t shift = 0) {
  return field_site(base + f.dword, role, f.lo, f.width, shift);
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
  MethodRun(cs, kSubHost, HOST_SEM_ADDR_LO, 5, &s)
      .set64(HOST_SEM_ADDR_LO, HOST_SEM_ADDR_HI, va, PatchRole::WaitAddress)
      .set64(HOST_SEM_PAYLOAD_LO, HOST_SEM_PAYLOAD_HI, value, PatchRole::WaitValue)
      .set(HOST_SEM_EXECUTE_OPERATION_ALL, HOST_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ)
      .set(HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL, HOST_SEM_EXECUTE_PAYLOAD_SIZE_64BIT);
}

void encode_semaphore_release(CommandStream& cs, uint64_t va, uint64_t value, bool wake,
                              bool timestamp, std::vector<PatchSite>& s) {
  MethodRun run(cs, kSubHost, HOST_SEM_ADDR_LO, 5, &s);
  // RELEASE_WFI: the release waits until the channel's engine is idle (prior work done).
  // Written before the addresses: recording their sites may alias the stream's words.
  run.set(HOST_SEM_EXECUTE_OPERATION_ALL, HOST_SEM_EXECUTE_OPERATION_RELEASE)
      .set(HOST_SEM_EXECUTE_RELEASE_WFI_ALL, 1)
      .set(HOST_SEM_EXECUTE_PAYLOAD_SIZE_ALL, HOST_SEM_EXECUTE_PAYLOAD_SIZE_64BIT)
      .set(HOST_SEM_EXECUTE_RELEASE_TIMESTAMP_ALL, timestamp);
  if (timestamp) {
    run.set64(HOST_SEM_ADDR_LO, HOST_SEM_ADDR_HI, va, PatchRole::TimestampAddress)
        .set64(HOST_SEM_PAYLOAD_LO, HOST_SEM_PAYLOAD_HI, value);
  } else {
    run.set64(HOST_SEM_ADDR_LO, HOST_SEM_ADDR_HI, va, PatchRole::SignalAddress)
        .set64(HOST_SEM_PAYLOAD_LO, HOST_SEM_PAYLOAD_HI, value, PatchRole::SignalValue);
  }
  if (wake) MethodRun(cs, kSubHost, HOST_NON_STALL_INTERRUPT, 1).set(HOST_NON_STALL_INTERRUPT, 0);
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
  MethodRun(cs, kSubCompute, COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI, 1)
      .set(COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION_ALL, 1)
      .set(COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA_ALL, 1)
      .set(COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT_ALL, 1);
}

std::vector<uint32_t> ComputeEncoder::setup(uint32_t compute_class, uint64_t shared_window,
                                            uint64_t local_window) {
  CommandStream cs;
  MethodRun(cs, kSubCompute, COMPUTE_SET_OBJECT, 1).set(COMPUTE_SET_OBJECT, compute_class);
  // The windows' A methods take the upper address bits, B the lower.
  MethodRun(cs, kSubCompute, COMPUTE_SET_SHADER_SHARED_MEMORY_WINDOW_A, 2)
      .set64(COMPUTE_SET_SHADER_SHARED_MEMORY_WINDOW_B, COMPUTE_SET_SHADER_SHARED_MEMORY_WINDOW_A,
             shared_window);
  MethodRun(cs, kSubCompute, COMPUTE_SET_SHADER_LOCAL_MEMORY_WINDOW_A, 2)
      .set64(COMPUTE_SET_SHADER_LOCAL_MEMORY_WINDOW_B, COMPUTE_SET_SHADER_LOCAL_MEMORY_WINDOW_A,
             local_window);
  return {cs.data(), cs.data() + cs.size()};
}

void ComputeEncoder::prepare(NvKernel& k) const {
  const uint64_t pgm = k.code_va;
  k.qmd_version = version_;
  k.qmd.assign(qmd_bytes(version_) / 4, 0);
  uint32_t* q = k.qmd.data();
  // What the program brings enters here, at load: each checked against its field.
  const std::string what = "kernel '" + k.name + "': QMD V0" + std::to_string(int(version_));
  auto put_checked = [&](const QmdField& f, uint64_t v) {
    q[f.dword] |= desc::checked(f, v, what);
  };
  const QmdLayout L = qmd_layout(version_);
  put_checked(*L.register_count, k.registers);
  put_checked(*L.barrier_count, std::max(1u, k.barriers));
  put_checked(*L.cbuf_size_shifted4, round_up(k.cbuf0_bytes, 1u << kCbufSizeShift) >> kCbufSizeShift);
  L.program_lo->put(q, lo(pgm >> L.program_shift));
  L.program_hi->put(q, hi(pgm >> L.program_shift));
  L.cbuf_valid->put(q, 1);
  L.major_version->put(q, uint32_t(version_));
  // Launch-independent fields, set as tinygrad ops_nv.py sets them.
  switch (version_) {
    case QmdVersion::V03:
      QMD_V03_QMD_GROUP_ID.put(q, 0x3f);
      QMD_V03_SM_GLOBAL_CACHING_ENABLE.put(q, 1);
      QMD_V03_INVALIDATE_TEXTURE_HEADER_CACHE.put(q, 1);
      QMD_V03_INVALIDATE_TEXTURE_SAMPLER_CACHE.put(q, 1);
      QMD_V03_INVALIDATE_TEXTURE_DATA_CACHE.put(q, 1);
      QMD_V03_INVALIDATE_SHADER_DATA_CACHE.put(q, 1);
      QMD_V03_CWD_MEMBAR_TYPE.put(q, QMD_V03_CWD_MEMBAR_TYPE_L1_SYSMEMBAR);
      QMD_V03_API_VISIBLE_CALL_LIMIT.put(q, QMD_V03_API_VISIBLE_CALL_LIMIT_NO_CHECK);
      QMD_V03_SAMPLER_INDEX.put(q, QMD_V03_SAMPLER_INDEX_VIA_HEADER_INDEX);
      put_checked(QMD_V03_SHARED_MEMORY_SIZE, std::max(0x400u, round_up(k.shared_bytes, 0x100)));
      QMD_V03_MIN_SM_CONFIG_SHARED_MEM_SIZE.put(q, 3);
      QMD_V03_MAX_SM_CONFIG_SHARED_MEM_SIZE.put(q, 0x1a);
      QMD_V03_TARGET_SM_CONFIG_SHARED_MEM_SIZE.put(q, smem_config(k.shared_bytes));
      QMD_V03_CONSTANT_BUFFER_INVALIDATE0.put(q, 1);
      // The prefetch address and size count 256-byte units (the fields' _SHIFTED).
      QMD_V03_PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED.put(q, lo(pgm >> kPrefetchShift));
      QMD_V03_PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED.put(q, hi(pgm >> kPrefetchShift));
      QMD_V03_PROGRAM_PREFETCH_SIZE.put(q, std::min<uint64_t>(k.code_bytes >> kPrefetchShift,
                                                              QMD_V03_PROGRAM_PREFETCH_SIZE.mask()));
      QMD_V03_SASS_VERSION.put(q, (k.sm / 10) * 16 + (k.sm % 10));  // sm_89 -> 0x89
      break;
    case QmdVersion::V04:
      // An H200 (RM 580.159) ran these launches; without the group id and QMD_TYPE it ran
      // no CTA and raised no error.
      QMD_V04_QMD_GROUP_ID.put(q, 0x1f);
      QMD_V04_QMD_TYPE.put(q, QMD_V04_QMD_TYPE_GRID_CTA);
      QMD_V04_API_VISIBLE_CALL_LIMIT.put(q, QMD_V04_API_VISIBLE_CALL_LIMIT_NO_CHECK);
      QMD_V04_SAMPLER_INDEX.put(q, QMD_V04_SAMPLER_INDEX_VIA_HEADER_INDEX);
      put_checked(QMD_V04_SHARED_MEMORY_SIZE, round_up(k.shared_bytes, 0x100));
      QMD_V04_INVALIDATE_SHADER_DATA_CACHE.put(q, 1);
      QMD_V04_INVALIDATE_INSTRUCTION_CACHE.put(q, 1);
      QMD_V04_INVALIDATE_SHADER_CONSTANT_CACHE.put(q, 1);
      break;
    case QmdVersion::V05:
      QMD_V05_QMD_GROUP_ID.put(q, 0x1f);
      QMD_V05_QMD_TYPE.put(q, QMD_V05_QMD_TYPE_GRID_CTA);
      QMD_V05_API_VISIBLE_CALL_LIMIT.put(q, QMD_V05_API_VISIBLE_CALL_LIMIT_NO_CHECK);
      QMD_V05_SAMPLER_INDEX.put(q, QMD_V05_SAMPLER_INDEX_VIA_HEADER_INDEX);
      QMD_V05_INVALIDATE_SHADER_DATA_CACHE.put(q, 1);
      QMD_V05_INVALIDATE_INSTRUCTION_CACHE.put(q, 1);
      QMD_V05_INVALIDATE_SHADER_CONSTANT_CACHE.put(q, 1);
      put_checked(QMD_V05_SHARED_MEMORY_SIZE_SHIFTED7,
                  round_up(k.shared_bytes, 1u << kShared7Shift) >> kShared7Shift);
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
  if (kernargs % (1u << kQmdAddressShift))
    throw InvalidInput("kernel '" + k.name + "': kernarg area " + hex(kernargs) +
                       " is not 256-byte aligned (the QMD is sent as address >> 8)");
  if (!fits_every_version(grid, block)) [[unlikely]]
    check_dims(k, grid, block);
  if (host_view_) return exec_by_address(cs, k, kernargs, grid, block);
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
  const QmdLayout L = qmd_layout(version_);
  const uint32_t tail = at + uint32_t(n) - kLaunchTailDwords;
  std::memcpy(cs.data() + tail, chain.tail, sizeof chain.tail);
  uint32_t* prev_qmd = cs.data() + chain.qmd_at;
  L.dependent_pointer->put(prev_qmd, uint32_t(kernargs >> kQmdAddressShift));
  L.dependent_enable->put(prev_qmd, 1);
  L.dependent_action->put(prev_qmd, QMD_V03_DEPENDENT_QMD0_ACTION_QMD_SCHEDULE);
  L.dependent_prefetch->put(prev_qmd, 1);
  for (size_t i = first; i < s.size(); i++)  // this launch's SEND_PCAS site goes
    if (s[i].dword == tail + kPcasData) {
      s.erase(s.begin() + long(i));
      break;
    }
  s[chain.pcas_site].dword = tail + kPcasData;  // the previous launch's SEND_PCAS moved
  s.push_back(site_of(chain.qmd_at, *L.dependent_pointer, PatchRole::KernargAddress,
                      kQmdAddressShift));
}

void ComputeEncoder::exec_by_address(CommandStream& cs, const NvKernel& k, uint64_t kernargs,
                                     Dim3 grid, Dim3 block) const {
  // The prepared launch's words with this launch's values, as the inline path has them; its
  // inline data (the QMD, then the dimensions) goes to memory, its tail to the stream.
  constexpr uint32_t kMostDwords = kLaunchInlineAt + 384 / 4 + kCbuf0DimDwords + kLaunchTailDwords;
  static_assert(qmd_bytes(QmdVersion::V03) <= 384 && qmd_bytes(QmdVersion::V05) <= 384);
  const size_t n = k.launch_words.size();
  if (n > kMostDwords)
    throw Error("NVIDIA launch layout: " + std::to_string(n) + " dwords, more than the " +
                std::to_string(kMostDwords) + " a launch by address expects");
  uint32_t words[kMostDwords];
  std::memcpy(words, k.launch_words.data(), n * 4);
  put_launch_values(version_, words, kernargs, grid, block);
  const uint64_t bytes = uint64_t(n - kLaunchInlineAt - kLaunchTailDwords) * 4;
  void* qmd = host_view_(kernargs, bytes);
  if (!qmd)
    throw InvalidInput("kernel '" + k.name + "': kernarg area " + hex(kernargs) +
                       " is not memory the CPU writes (a launch by address, "
                       "HCQ_NV_QMD_BY_ADDRESS, writes its QMD there)");
  std::memcpy(qmd, words + kLaunchInlineAt, bytes);
  // The CPU's writes reach memory before the doorbell that makes the GPU read them (the
  // channel's fence before GP_PUT), so the QMD needs no flush of its own.
  std::memcpy(cs.grow(kLaunchTailDwords), words + n - kLaunchTailDwords, kLaunchTailDwords * 4);
}

ComputeEncoder::Chain ComputeEncoder::chainable(const CommandStream& cs,
                                                const std::vector<PatchSite>& s) const {
  Chain c;
  // Dependent QMDs are described for V03 (clc9c0qmd.h); V04/V05 launches stay separate.
  const QmdLayout L = qmd_layout(version_);
  if (!L.dependent_enable) return c;
  const uint32_t* w = cs.data();
  uint32_t end = uint32_t(cs.size());
  const uint32_t barrier = inc(kSubCompute, COMPUTE_INVALIDATE_SHADER_CACHES_NO_WFI, 1);
  const uint32_t barrier_dwords = parse_method_header(barrier).dwords();
  // The QMD invalidates the caches itself: a barrier between the launches goes.
  if (end >= barrier_dwords && w[end - barrier_dwords] == barrier) end -= barrier_dwords;
  if (end < kLaunchTailDwords) return c;
  const uint32_t t = end - kLaunchTailDwords;
  if (w[t + kPcasRun] != inc(kSubCompute, COMPUTE_SEND_PCAS_A, 1) ||
      w[t + kPcas2Run] != inc(kSubCompute, COMPUTE_SEND_SIGNALING_PCAS2_B, 1) ||
      w[t + kWfiRun] != inc(kSubHost, HOST_WFI, 1))
    return c;
  // The previous launch's SEND_PCAS site names its QMD's place (inline data before the tail).
  const uint32_t inline_dw = qmd_bytes(version_) / 4 + kCbuf0DimDwords;
  if (t < inline_dw + 1) return c;
  const uint32_t qmd_at = t - inline_dw;
  if (w[qmd_at - 1] != non_inc(kSubCompute, COMPUTE_LOAD_INLINE_DATA, inline_dw)) return c;
  for (size_t i = s.size(); i-- > 0;)
    if (s[i].dword == t + kPcasData && s[i].role == PatchRole::KernargAddress) {
      c.pcas_site = i;
      c.ok = true;
      break;
    }
  if (!c.ok) return c;
  if (L.dependent_enable->get(w + qmd_at)) {  // already chained: keep it simple
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
  const QmdLayout L = qmd_layout(version_);
  const uint32_t qmd_dw = uint32_t(k.qmd.size());
  const uint32_t inline_dw = qmd_dw + kCbuf0DimDwords;
  const uint32_t at = uint32_t(cs.size());
  // Write the QMD and the launch dimensions into the kernarg area from the push buffer.
  MethodRun(cs, kSubCompute, COMPUTE_OFFSET_OUT_UPPER, 2, &s)
      .set64(COMPUTE_OFFSET_OUT, COMPUTE_OFFSET_OUT_UPPER, kernargs, PatchRole::KernargAddress);
  MethodRun(cs, kSubCompute, COMPUTE_LINE_LENGTH_IN, 2)
      .set(COMPUTE_LINE_LENGTH_IN, inline_dw * 4)
      .set(COMPUTE_LINE_COUNT, 1);
  // FLUSH_ONLY with the sysmembar: the QMD must be in memory before SEND_PCAS fetches it
  // (Mesa's nvc0 uploads launch descriptors so; the H200 runs were made with it).
  MethodRun(cs, kSubCompute, COMPUTE_LAUNCH_DMA, 1)
      .set(COMPUTE_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL, COMPUTE_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)
      .set(COMPUTE_LAUNCH_DMA_COMPLETION_TYPE_ALL, COMPUTE_LAUNCH_DMA_COMPLETION_TYPE_FLUSH_ONLY);
  cs.grow(1)[0] = non_inc(kSubCompute, COMPUTE_LOAD_INLINE_DATA, inline_dw);
  uint32_t* data = cs.grow(inline_dw);
  std::memcpy(data, k.qmd.data(), qmd_dw * 4);
  std::memset(data + qmd_dw, 0, kCbuf0DimDwords * 4);
  const uint32_t tail = uint32_t(cs.size());
  MethodRun(cs, kSubCompute, COMPUTE_SEND_PCAS_A, 1).set(COMPUTE_SEND_PCAS_A, 0);
  MethodRun(cs, kSubCompute, COMPUTE_SEND_SIGNALING_PCAS2_B, 1)
      .set(COMPUTE_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_ALL,
           COMPUTE_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE);
  // Launches in a channel may overlap; wait for this one before anything later runs.
  MethodRun(cs, kSubHost, HOST_WFI, 1).set(HOST_WFI, 0);
  // The places put_launch_values writes are the ones written above.
  if (at + kLaunchInlineAt + inline_dw != tail || cs.size() - tail != kLaunchTailDwords)
    throw Error("NVIDIA launch layout: the runs written differ from put_launch_values' places");
  // The kernarg address (the DMA's destination, SEND_PCAS_A, the constant buffer's in the
  // QMD), the grid and block in the QMD and in constant bank 0.
  uint32_t* p = cs.data() + at;
  put_launch_values(version_, p, kernargs, grid, block);

  const uint32_t qa = at + kLaunchInlineAt;  // the QMD's first dword in the stream
  const PatchRole grid_roles[3] = {PatchRole::GridX, PatchRole::GridY, PatchRole::GridZ};
  const PatchRole block_roles[3] = {PatchRole::BlockX, PatchRole::BlockY, PatchRole::BlockZ};
  for (uint32_t i = 0; i < 3; i++) {
    s.push_back(site_of(qa, *L.grid[i], grid_roles[i]));
    s.push_back(site_of(qa, *L.block[i], block_roles[i]));
    s.push_back({qa + qmd_dw + kCbuf0BlockAt + i, PatchFormat::Lo32, block_roles[i]});
    s.push_back({qa + qmd_dw + kCbuf0GridAt + i, PatchFormat::Lo32, grid_roles[i]});
  }
  const uint64_t to_cbuf = cbuf0_offset(version_);
  PatchSite c_lo = site_of(qa, *L.cbuf_lo, PatchRole::KernargAddress, L.cbuf_shift);
  PatchSite c_hi = site_of(qa, *L.cbuf_hi, PatchRole::KernargAddress, uint8_t(32 + L.cbuf_shift));
  c_lo.add = c_hi.add = to_cbuf;
  s.push_back(c_lo);
  s.push_back(c_hi);
  s.push_back(field_site(tail + kPcasData, PatchRole::KernargAddress, 0, 32,
                         kQmdAddressShift));  // SEND_PCAS_A
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
  CommandStream cs;
  MethodRun(cs, kSubCopy, COPY_SET_OBJECT, 1).set(COPY_SET_OBJECT, copy_class);
  return {cs.data(), cs.data() + cs.size()};
}

void CopyEncoder::copy(CommandStream& cs, uint64_t dst, uint64_t src, uint64_t size,
                       std::vector<PatchSite>& s) {
  for (uint64_t off = 0; off < size; off += kMaxCopy) {
    const uint64_t n = std::min(kMaxCopy, size - off);
    MethodRun(cs, kSubCopy, COPY_OFFSET_IN_UPPER, 4, &s)
        .set64(COPY_OFFSET_IN_LOWER, COPY_OFFSET_IN_UPPER, src + off, PatchRole::CopySrc, off)
        .set64(COPY_OFFSET_OUT_LOWER, COPY_OFFSET_OUT_UPPER, dst + off, PatchRole::CopyDst, off);
    MethodRun(cs, kSubCopy, COPY_LINE_LENGTH_IN, 1).set(COPY_LINE_LENGTH_IN, uint32_t(n));
    // Non-pipelined: a transfer starts after the previous one ends, so copies in a channel
    // complete in order (clc6b5.h).
    MethodRun(cs, kSubCopy, COPY_LAUNCH_DMA, 1)
        .set(COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_ALL, COPY_LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED)
        .set(COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_ALL, COPY_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH)
        .set(COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_ALL, COPY_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH);
  }
}

}  // namespace hcq::nv
