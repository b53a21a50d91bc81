#include "nv/rm_channel.hpp"

#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "nv/encoders.hpp"
#include "nv/push.hpp"
#include "nv/rm_device.hpp"

namespace hcq::nv {
namespace {

using namespace rm;

constexpr uint32_t kGpfifoEntries = 1024;
constexpr uint64_t kPushBytes = 1 << 20;
// A direct submission takes at most half the push ring: always less than one entry's LENGTH.
static_assert(kPushBytes / 2 / 4 <= GP_ENTRY_LENGTH.bits().mask());
// UVM reserves this much VA per channel for RM's own use (tinygrad ops_nv.py).
constexpr uint64_t kChannelVaBytes = 0x4000000;

}  // namespace

GpfifoChannel::GpfifoChannel(RmDriver& drv, QueueKind kind, uint32_t index) : drv_(drv) {
  // The GPFIFO ring and its USERD in one video-memory allocation (tinygrad's layout), or
  // with HCQ_NV_GPFIFO_HOST in system memory (where UVM's own channels keep them by default:
  // open-gpu-kernel-modules uvm_channel.c, uvm_channel_gpfifo_loc and uvm_channel_gpput_loc);
  // the push ring and the error notifier in system memory.
  const uint64_t ring_bytes = uint64_t(kGpfifoEntries) * 8;
  ring_in_host_ = drv.options().gpfifo_host;
  ring_ = drv.private_alloc(ring_bytes + kUserdBytes,
                            ring_in_host_ ? MemoryKind::Host : MemoryKind::Device);
  if (!ring_.host)
    throw Error(drv.properties().name + ": the GPFIFO ring is not CPU-visible (BAR too small?)");
  push_ = drv.private_alloc(kPushBytes, MemoryKind::Host);
  notifier_ = drv.private_alloc(kPage, MemoryKind::Host);
  gpfifo_ = static_cast<uint64_t*>(ring_.host);
  userd_ = reinterpret_cast<Userd*>(static_cast<char*>(ring_.host) + ring_bytes);
  std::memset(userd_, 0, sizeof(Userd));

  ChannelAllocParams p{};
  p.hObjectError = NvHandle(notifier_.handle);
  p.hObjectBuffer = NvHandle(ring_.handle);
  p.gpFifoOffset = ring_.va;
  p.gpFifoEntries = kGpfifoEntries;
  p.hContextShare = drv.ctxshare();
  p.hUserdMemory[0] = NvHandle(ring_.handle);
  p.userdOffset[0] = ring_bytes;
  const char* what = kind == QueueKind::Compute ? "compute channel" : "copy channel";
  handle_ = drv.alloc_object(drv.channel_group(), drv.classes().gpfifo, &p, sizeof(p), what);
  const uint32_t engine_class = kind == QueueKind::Compute ? drv.classes().compute : drv.classes().copy;
  drv.alloc_object(handle_, engine_class, nullptr, 0, what);
  WorkSubmitTokenParams t{~0u};
  drv.control(handle_, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, &t, sizeof(t),
              "GPFIFO_GET_WORK_SUBMIT_TOKEN");
  token_ = t.workSubmitToken;
  UvmRegisterChannelParams rc{};
  rc.gpuUuid = drv.uuid();
  rc.rmCtrlFd = drv.ctl_fd();
  rc.hClient = drv.root();
  rc.hChannel = handle_;
  // Address space UVM keeps for RM's use of this channel: anywhere, but ours alone.
  void* range = drv.kernel().mmap(nullptr, kChannelVaBytes, PROT_NONE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) throw OsError(drv.properties().name + ": channel address space", errno);
  channel_va_ = range;
  rc.base = reinterpret_cast<uint64_t>(range);
  rc.length = kChannelVaBytes;
  drv.uvm(UVM_REGISTER_CHANNEL, &rc, &rc.rmStatus, "UVM_REGISTER_CHANNEL");
  GpfifoScheduleParams s{};
  s.bEnable = 1;
  drv.control(drv.channel_group(), NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, &s, sizeof(s), "GPFIFO_SCHEDULE");
  name_ = std::string(to_string(kind)) + " channel " + std::to_string(index);
  drv.register_channel(this);
  // Bind the engine class and set up the channel before any user work.
  auto setup = kind == QueueKind::Compute
                   ? ComputeEncoder::setup(drv.classes().compute, kSharedWindow, kLocalWindow)
                   : CopyEncoder::setup(drv.classes().copy);
  submit(setup.data(), setup.size());
}

GpfifoChannel::~GpfifoChannel() {
  drv_.unregister_channel(this);
  drv_.uvm_unregister_channel(handle_);
  drv_.free_object(handle_);
  if (channel_va_) drv_.kernel().munmap(channel_va_, kChannelVaBytes);
}

uint64_t GpfifoChannel::completed() {
  const uint64_t put = put_seq_ % kGpfifoEntries;
  const uint64_t get = gp_get() % kGpfifoEntries;
  return put_seq_ - (put + kGpfifoEntries - get) % kGpfifoEntries;
}

void GpfifoChannel::retire() {
  const uint64_t done = done_seen_ = completed();
  constexpr size_t kRetiredKept = 3;
  while (!inflight_.empty() && inflight_.front().seq < done) {
    if (inflight_.front().push_end) push_done_ = inflight_.front().push_end;
    retired_.push_back(inflight_.front());
    if (retired_.size() > kRetiredKept) retired_.pop_front();
    inflight_.pop_front();
  }
}

uint64_t GpfifoChannel::push_words(const uint32_t* w, size_t n) {
  const uint64_t bytes = n * 4;
  if (bytes > kPushBytes / 2)
    throw InvalidInput(drv_.properties().name + ": " + name_ + ": a submission of " +
                       std::to_string(bytes) + " bytes does not fit the push buffer (" +
                       std::to_string(kPushBytes / 2) + " at most); bind it instead");
  uint64_t pos = push_put_ % kPushBytes;
  const uint64_t pad = pos + bytes > kPushBytes ? kPushBytes - pos : 0;
  auto start = std::chrono::steady_clock::now();
  // Room is judged from what retire() last read; GP_GET is read again only when that says
  // the push ring or the GPFIFO may be full (a read of it is a round trip over PCIe).
  while (push_put_ + pad + bytes - push_done_ > kPushBytes ||
         put_seq_ - done_seen_ + 3 >= kGpfifoEntries) {
    retire();
    if (push_put_ + pad + bytes - push_done_ <= kPushBytes &&
        put_seq_ - done_seen_ + 3 < kGpfifoEntries)
      break;
    drv_.check_faults();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      throw TimeoutError(drv_.properties().name + ": " + name_ +
                         ": push buffer or GPFIFO full for 10 s (GP_GET " +
                         std::to_string(gp_get()) + ", GP_PUT " +
                         std::to_string(put_seq_ % kGpfifoEntries) + ")");
    __builtin_ia32_pause();
  }
  push_put_ += pad;
  pos = push_put_ % kPushBytes;
  if (bytes) std::memcpy(static_cast<char*>(push_.host) + pos, w, bytes);
  push_put_ += bytes;
  return push_.va + pos;
}

void GpfifoChannel::add_entry(uint64_t va, uint32_t dwords, uint64_t push_end) {
  // Level SUBROUTINE, as tinygrad writes its entries.
  gpfifo_[put_seq_ % kGpfifoEntries] = encode_gpfifo({va, dwords, true, false});
  inflight_.push_back({put_seq_, va, dwords, push_end});
  put_seq_++;
}

void GpfifoChannel::put_gp_put() {
  // Entries, then GP_PUT, must be visible before the doorbell.
  __atomic_store_n(&userd_->GPPut, uint32_t(put_seq_ % kGpfifoEntries), __ATOMIC_RELEASE);
#if defined(__x86_64__)
  __builtin_ia32_sfence();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

void GpfifoChannel::ring_doorbell() { drv_.ring_doorbell(token_); }

void GpfifoChannel::kick() {
  put_gp_put();
  // USERD and the ring are video memory written through BAR1, the doorbell a register in
  // another BAR: writes on two paths may land in either order, and a doorbell ahead of its
  // GP_PUT wakes an engine that finds nothing and sleeps on. A read on the BAR1 path cannot
  // pass the writes before it (nouveau reads its channel control page back the same way).
  // In host memory (HCQ_NV_GPFIFO_HOST) they are ordered before the doorbell's write by
  // put_gp_put's fence, and the GPU reads them from there after it.
  if (!ring_in_host_) order_writes();
  ring_doorbell();
}

void GpfifoChannel::submit(const uint32_t* words, size_t n) {
  drv_.check_faults();
  std::lock_guard lk(mu_);
  if (n == 0) return;
  const uint64_t va = push_words(words, n);
  add_entry(va, uint32_t(n), push_put_);
  kick();
}

void GpfifoChannel::submit_indirect(uint64_t va, size_t ndwords) {
  const IndirectRun run{this, va, ndwords};
  drv_.submit_indirect({&run, 1});
}

void GpfifoChannel::check_entry(size_t ndwords) const {
  // One entry's LENGTH field (21 bits of dwords) bounds a command buffer.
  check_gpfifo_length(ndwords, drv_.properties().name + ": " + name_ + ": GPFIFO entry");
}

void GpfifoChannel::stage_indirect(uint64_t va, size_t ndwords) {
  std::lock_guard lk(mu_);
  push_words(nullptr, 0);  // waits for GPFIFO room
  add_entry(va, uint32_t(ndwords), 0);  // the command buffer runs where it lives
  put_gp_put();
}

std::string GpfifoChannel::report() {
  // A fault found while this channel waits for ring space reports from inside submit().
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return drv_.properties().name + ": " + name_ + ": (busy submitting)";
  retire();
  // GP_GET counts entries the GPU fetched, not finished: a real GPU fetches past a semaphore
  // acquire it then waits on, so with nothing left to fetch the last entries fetched are
  // shown too (where a stopped channel stopped, or where a waiting one may wait).
  const bool stopped = __atomic_load_n(&notifier().status, __ATOMIC_ACQUIRE) != 0;
  const bool all_fetched = inflight_.empty();
  if (all_fetched && retired_.empty()) return "";
  const uint32_t get = gp_get();
  std::string out = drv_.properties().name + ": " + name_ + ": GP_GET " + std::to_string(get) +
                    ", GP_PUT " + std::to_string(put_seq_ % kGpfifoEntries) +
                    (stopped       ? "; push buffer segments, the last ones done first:"
                     : all_fetched ? "; all fetched, the last (the engine may be on it):"
                                   : "; push buffer segments from GP_GET:");
  SubchannelMap subs = kDefaultSubchannels;
  std::vector<std::pair<const Segment*, const char*>> shown;
  if (stopped)
    for (const Segment& s : retired_) shown.push_back({&s, "done   "});
  else if (all_fetched)  // the one the engine may be on (an idle channel's last, too)
    shown.push_back({&retired_.back(), "fetched"});
  for (const Segment& s : inflight_)
    shown.push_back({&s, &s == &inflight_.front() ? "HERE > " : "pending"});
  for (auto [seg, mark] : shown) {
    const Segment& s = *seg;
    out += "\n  " + std::string(mark) + " entry " + std::to_string(s.seq % kGpfifoEntries) +
           ": " + hex(s.va) + ", " + std::to_string(s.dwords) + " dwords";
    const void* w = drv_.host_view(s.va, uint64_t(s.dwords) * 4);
    if (!w) continue;
    auto packets = decode_push({static_cast<const uint32_t*>(w), s.dwords}, drv_.gen(), subs);
    if (std::string(mark) == "HERE > " || std::string(mark) == "fetched") {
      // USERD Get/GetHi: the push buffer get pointer (clc56f.h, "get offset, read only"). The
      // emulated GPU leaves it on the method it waits at; whether a Volta+ host keeps it
      // current in USERD is not documented, so a value outside the segment means unknown.
      const uint64_t get = uint64_t(__atomic_load_n(&userd_->GetHi, __ATOMIC_ACQUIRE)) << 32 |
                           __atomic_load_n(&userd_->Get, __ATOMIC_ACQUIRE);
      const bool inside = get >= s.va && get < s.va + uint64_t(s.dwords) * 4;
      const uint32_t at = inside ? uint32_t((get - s.va) / 4) : 0;
      out.append("\n").append(indirect_buffer_text(s.va, s.dwords, packets, inside ? &at : nullptr, "    "));
      continue;
    }
    for (auto& p : packets) out += "\n            " + to_text(p);
  }
  return out;
}

}  // namespace hcq::nv
