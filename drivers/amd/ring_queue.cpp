#include "amd/ring_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "amd/decode.hpp"
#include "amd/encoders.hpp"
#include "core/error.hpp"

namespace hcq::amd {

std::optional<IbPosition> find_ib_position(const std::string& lines, const std::string& queue) {
  const std::string prefix = queue + ": IB ";
  std::optional<IbPosition> found;
  std::istringstream in(lines);
  for (std::string l; std::getline(in, l);) {
    unsigned long long ib_va = 0;
    unsigned ib_size = 0, pos = 0;
    if (l.rfind(prefix, 0) == 0 &&
        std::sscanf(l.c_str() + prefix.size(), "%llx %u dwords, at dword %u", &ib_va, &ib_size,
                    &pos) == 3)
      found = IbPosition{ib_va, ib_size, pos};
  }
  return found;
}
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

RingQueue::RingQueue(QueueKind kind, std::string device_name)
    : kind_(kind), device_name_(std::move(device_name)) {}

void RingQueue::attach(const RingMemory& m, std::string queue_name) {
  if (m.ring_bytes < 256 || (m.ring_bytes & (m.ring_bytes - 1)) != 0)
    throw InvalidInput(device_name_ + ": " + queue_name + ": a ring of " +
                       std::to_string(m.ring_bytes) + " bytes is not a power of two of 256 or more");
  ring_ = m.ring;
  ring_bytes_ = m.ring_bytes;
  ring_mask_ = m.ring_bytes / 4 - 1;
  rptr_ = m.rptr;
  wptr_ = m.wptr;
  published_ = m.published;
  doorbell_ = m.doorbell;
  put_ = rptr_seen_ = published_put_ = 0;
  name_ = std::move(queue_name);
}

void RingQueue::wait_for_space(uint64_t needed) {
  // Units as the queue counts them (dwords or bytes).
  const uint64_t capacity = kind_ == QueueKind::Compute ? ring_bytes_ / 4 : ring_bytes_;
  if (needed >= capacity)
    throw InvalidInput(device_name_ + ": " + name_ + ": submission of " + std::to_string(needed) +
                       " units does not fit a ring of " + std::to_string(capacity));
  // The read pointer lives in memory the GPU writes: look at it only when the cached value
  // says the ring may be full (a read is a cache miss on the submit path).
  if (put_ + needed - rptr_seen_ <= capacity) return;
  rptr_seen_ = read_pointer();
  auto start = std::chrono::steady_clock::now();
  while (put_ + needed - (rptr_seen_ = read_pointer()) > capacity) {
    check_faults();
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10))
      throw TimeoutError(device_name_ + ": " + name_ + ": ring full for 10 s (read pointer " +
                         std::to_string(read_pointer()) + ", write pointer " +
                         std::to_string(put_) + ")");
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

std::string RingQueue::report(Gen gen) {
  std::lock_guard lk(mu_);
  const uint64_t r = read_pointer(), w = put_;
  if (r >= w) return "";
  // Decode from the start of the submission the read pointer is in up to the write pointer.
  const bool pm4 = kind_ == QueueKind::Compute;
  const uint64_t unit = pm4 ? 1 : 4;  // queue units per dword
  uint64_t start = r;
  for (uint64_t i = nstarts_; i > 0 && i + kStarts > nstarts_; i--)  // newest first
    if (starts_[(i - 1) % kStarts] <= r) {
      start = starts_[(i - 1) % kStarts];
      break;
    }
  const uint64_t ring_dw = ring_mask_ + 1;
  std::vector<uint32_t> words;
  for (uint64_t u = start; u < w && words.size() < ring_dw; u += unit)
    words.push_back(ring_[(u / unit) & ring_mask_]);
  auto packets = pm4 ? decode_pm4(words, gen) : decode_sdma(words, gen);
  const uint64_t at = (r - start) / unit;  // the read pointer, in dwords into `words`
  std::string out = device_name_ + ": " + name_ + ": read pointer " + hex(r) +
                    ", write pointer " + hex(w) + (pm4 ? " (dwords)" : " (bytes)") +
                    "; packets from the start of the submission it is in:";
  size_t current = packets.size();
  for (size_t i = 0; i < packets.size(); i++)
    if (at >= packets[i].offset && at < packets[i].offset + packets[i].dwords) current = i;
  size_t first = current > 8 && current != packets.size() ? current - 8 : 0;
  for (size_t i = first; i < packets.size() && i < current + 9; i++) {
    const char* mark = i < current ? "done   " : i == current ? "HERE > " : "pending";
    out += "\n  " + std::string(mark) + " " + to_text(packets[i]);
  }
  if (current < packets.size() && packets[current].ib_address)
    out.append("\n").append(ib_report(packets[current], gen));
  return out;
}

std::string RingQueue::ib_report(const DecodedPacket& call, Gen gen) {
  // Without the device saying where the engine is inside the IB, it shows from the start.
  uint64_t va = call.ib_address, size = call.ib_dwords;
  uint32_t at = 0;
  const std::optional<IbPosition> where = ib_position();
  if (where) va = where->va, size = where->dwords, at = where->at;
  const void* host = host_view(va, size * 4);
  std::vector<uint32_t> read;  // through the owner's port where the CPU does not map it
  if (!host) {
    read.resize(size_t(size));
    if (!read_device(va, std::as_writable_bytes(std::span(read))))
      return "    indirect buffer " + hex(va) + ", " + std::to_string(size) +
             " dwords: not mapped for the CPU";
    host = read.data();
  }
  std::span<const uint32_t> words{static_cast<const uint32_t*>(host), size_t(size)};
  auto packets = kind_ == QueueKind::Compute ? decode_pm4(words, gen) : decode_sdma(words, gen);
  return indirect_buffer_text(va, size, packets, where ? &at : nullptr, "    ");
}

void RingQueue::publish_pending() {
  // The dwords written since the last doorbell, [published_put_, put_) in queue units: at most
  // the ring (wait_for_space), so one range, or two where it wraps around the ring's end.
  const uint64_t unit = kind_ == QueueKind::Compute ? 1 : 4;
  const uint64_t ring_dw = ring_mask_ + 1;
  const uint64_t first = published_put_ / unit, count = put_ / unit - first;
  const uint64_t start = first & ring_mask_, head = std::min(count, ring_dw - start);
  if (head) publish_ring(start * 4, {ring_ + start, size_t(head)});
  if (count > head) publish_ring(0, {ring_, size_t(count - head)});
  published_put_ = put_;
}

void RingQueue::ring_doorbell() {
  if (published_) {
    publish_pending();
    publish_write_pointer(put_);
  } else {
    __atomic_store_n(wptr_, put_, __ATOMIC_RELEASE);
    // Ring contents and wptr must reach memory before the doorbell. On x86 stores stay in
    // order, and an sfence drains write-combining buffers (rings are mapped uncached/WC).
#if defined(__x86_64__)
    __builtin_ia32_sfence();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
  }
  before_doorbell();
  if (doorbell_)
    *doorbell_ = put_;
  else
    write_doorbell(put_);
}

void RingQueue::publish_ring(uint64_t, std::span<const uint32_t>) {
  throw Error(device_name_ + ": " + name_ + ": this queue cannot publish its ring");
}

void RingQueue::publish_write_pointer(uint64_t) {
  throw Error(device_name_ + ": " + name_ + ": this queue cannot publish its write pointer");
}

uint64_t RingQueue::fetch_read_pointer() const {
  throw Error(device_name_ + ": " + name_ + ": this queue cannot read its read pointer");
}

void RingQueue::write_doorbell(uint64_t) {
  throw Error(device_name_ + ": " + name_ + ": this queue has no doorbell");
}

void RingQueue::submit(const uint32_t* words, size_t n) {
  std::lock_guard lk(mu_);
  submit_locked(words, n);
}

void RingQueue::submit_locked(const uint32_t* words, size_t n) {
  check_faults();
  if (kind_ == QueueKind::Compute) {
    // PM4 packets may wrap around the ring end; the write pointer counts dwords.
    wait_for_space(n);
    remember_start(put_);
    for (size_t i = 0; i < n; i++) ring_[(put_ + i) & ring_mask_] = words[i];
    put_ += n;
  } else {
    // SDMA packets must not wrap: pad the tail with NOPs (zero dwords) and restart at 0.
    const uint64_t ring_dw = ring_mask_ + 1;
    uint64_t pos = (put_ / 4) & ring_mask_;
    uint64_t pad = pos + n > ring_dw ? ring_dw - pos : 0;
    wait_for_space((pad + n) * 4);
    for (uint64_t i = 0; i < pad; i++) ring_[pos + i] = 0;
    put_ += pad * 4;
    remember_start(put_);
    pos = (put_ / 4) & ring_mask_;
    std::memcpy(ring_ + pos, words, n * 4);
    put_ += n * 4;
  }
  ring_doorbell();
}

size_t RingQueue::max_indirect_dwords() const {
  // PM4 INDIRECT_BUFFER's IB_SIZE; SDMA INDIRECT's IB_SIZE, whole 8-dword runs only.
  if (kind_ == QueueKind::Compute) return pm4::INDIRECT_BUFFER_IB_SIZE.mask();
  return sdma::INDIRECT_IB_SIZE_ALL.mask() / kSdmaIbAlign * kSdmaIbAlign;
}

void RingQueue::submit_indirect(uint64_t va, size_t ndwords) {
  // A command buffer longer than the packet's IB_SIZE holds is refused with the field's exact
  // error, never truncated (the CP would run its first IB_SIZE-masked dwords only).
  const bool pm4 = kind_ == QueueKind::Compute;
  const uint64_t run = pm4 ? ndwords : align_up(ndwords, kSdmaIbAlign);
  if (ndwords > max_indirect_dwords()) {
    if (pm4) desc::checked(pm4::INDIRECT_BUFFER_IB_SIZE, run, "INDIRECT_BUFFER");
    desc::checked(sdma::INDIRECT_IB_SIZE_ALL, run, "INDIRECT");
  }
  uint32_t words[kSdmaIbAlign + 8] = {};
  size_t n = 0;
  std::lock_guard lk(mu_);
  if (pm4) {
    Pm4Encoder::indirect_buffer(words + n, va, uint32_t(run));
    n += Pm4Encoder::indirect_buffer_dwords();
  } else {
    // An SDMA IB runs a multiple of 8 dwords (the recording's bound copy is zero-padded) and
    // its packet must end on an 8-dword boundary in the ring: NOPs (zero dwords) before it.
    const uint64_t ring_dw = ring_mask_ + 1;
    const uint32_t len = SdmaEncoder::indirect_dwords();
    uint64_t pos = (put_ / 4) & ring_mask_;
    auto pad_at = [&](uint64_t start) {
      return (kSdmaIbAlign - (start + len) % kSdmaIbAlign) % kSdmaIbAlign;
    };
    uint64_t pad = pad_at(pos);
    if (pos + pad + len > ring_dw) {  // submit_locked will restart at 0
      pos = 0;
      pad = pad_at(0);
    }
    n += pad;  // zero dwords: SDMA NOPs
    SdmaEncoder::indirect(words + n, va, uint32_t(run));
    n += len;
  }
  submit_locked(words, n);
}

}  // namespace hcq::amd
