#include "core/queue.hpp"

#include "core/capture.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/program.hpp"

namespace hcq {

Queue::Queue(Device& dev, QueueKind kind, uint32_t index)
    : dev_(&dev), kind_(kind), index_(index), enc_(&dev.encoder(kind)) {
  if (kind == QueueKind::Copy && !dev.properties().caps.copy_engine)
    throw InvalidInput(dev.name() + ": no copy queues: the device has no copy engine (copy with "
                                    "Device::copy, a host copy on shared memory, or a kernel)");
  const HwQueue& queue = dev.hw_queue(kind, index);  // throws for a queue the device lacks
  if (dev.properties().caps.indirect_buffers) {  // else never submitted as indirect buffers
    max_piece_ = dev.max_indirect_dwords(kind, index);
    granule_ = queue.indirect_granule_dwords();
  }
  cs_.reserve(64);
}

template <class F>
Queue& Queue::record(Cmd c, F&& encode) {
  if (bound_done_)
    throw InvalidInput(dev_->name() + ": " + to_string(kind_) +
                       " queue recording is bound to device memory; record before bind()");
  uint32_t first = uint32_t(sites_.size());
  const size_t begin = cs_.size();
  encode();
  if (cs_.size() - piece_start_ > max_piece_) start_piece(begin, first);
  cmds_.push_back({c, first, uint32_t(sites_.size()) - first});
  return *this;
}

// The command just encoded at [begin, size) overflows the current piece: it starts the next,
// at the next multiple of the granule (zero dwords before it, its patch sites moved with it).
void Queue::start_piece(size_t begin, uint32_t first_site) {
  const size_t len = cs_.size() - begin;
  const size_t pad = (granule_ - begin % granule_) % granule_;
  if (len > max_piece_) {
    cs_.truncate(begin);  // the recording stays as it was before the command
    sites_.resize(first_site);
    throw InvalidInput(dev_->name() + ": " + to_string(kind_) + " queue: a command of " +
                       std::to_string(len) + " dwords does not fit one indirect buffer (at most " +
                       std::to_string(max_piece_) +
                       " dwords); recordings are split only between commands");
  }
  if (begin + pad > UINT32_MAX)
    throw InvalidInput(dev_->name() + ": " + to_string(kind_) + " queue: a recording of more "
                       "than 2^32 dwords");
  if (pad) {
    cs_.grow(pad);
    uint32_t* w = cs_.data();
    std::memmove(w + begin + pad, w + begin, len * 4);
    std::memset(w + begin, 0, pad * 4);  // NOPs where the granule is above 1 (SDMA)
    for (size_t s = first_site; s < sites_.size(); s++) sites_[s].dword += uint32_t(pad);
  }
  piece_start_ = begin + pad;
  pieces_.push_back(uint32_t(piece_start_));
}

std::vector<size_t> Queue::piece_starts() const {
  std::vector<size_t> out{0};
  out.insert(out.end(), pieces_.begin(), pieces_.end());
  return out;
}

void Queue::add_runs(std::vector<IndirectRun>& out) {
  size_t start = 0;
  for (uint32_t next : pieces_) {
    out.push_back({&hw(), bound_.va() + start * 4, next - start});
    start = next;
  }
  out.push_back({&hw(), bound_.va() + start * 4, cs_.size() - start});
}

Queue& Queue::wait(uint64_t va, uint64_t value) {
  return record(Cmd::Wait, [&] { enc_->wait(cs_, va, value, sites_); });
}

Queue& Queue::signal_at(uint64_t va, uint64_t value, bool wake) {
  return record(Cmd::Signal, [&] { enc_->signal(cs_, va, value, wake, sites_); });
}

Queue& Queue::timestamp_at(uint64_t va) {
  return record(Cmd::Timestamp, [&] { enc_->timestamp(cs_, va, sites_); });
}

Queue& Queue::timestamp(const Signal& s) {
  return record(Cmd::Timestamp, [&] { enc_->timestamp(cs_, s.timestamp_va(), sites_); });
}

void Queue::patch(size_t cmd, Cmd expect, PatchRole role, uint64_t value) {
  if (cmd >= cmds_.size() || cmds_[cmd].cmd != expect)
    throw InvalidInput(dev_->name() + ": " + to_string(kind_) + " queue has no command #" +
                       std::to_string(cmd) + " of the kind being updated");
  const Recorded& r = cmds_[cmd];
  for (uint32_t i = r.first_site; i < r.first_site + r.sites; i++)
    if (sites_[i].role == role) patch_site(sites_[i], value);
}

void Queue::patch(size_t cmd, Cmd expect, PatchRole a, PatchRole b, std::optional<uint64_t> va,
                  std::optional<uint64_t> value) {
  if (va) patch(cmd, expect, a, *va);
  if (value) patch(cmd, expect, b, *value);
}

void Queue::update_wait(size_t cmd, std::optional<uint64_t> va, std::optional<uint64_t> value) {
  patch(cmd, Cmd::Wait, PatchRole::WaitAddress, PatchRole::WaitValue, va, value);
}

void Queue::update_signal(size_t cmd, std::optional<uint64_t> va,
                          std::optional<uint64_t> value) {
  patch(cmd, Cmd::Signal, PatchRole::SignalAddress, PatchRole::SignalValue, va, value);
}

void Queue::check_bindable() const {
  if (!dev_->properties().caps.indirect_buffers)
    throw InvalidInput(dev_->name() + ": " + to_string(kind_) +
                       " queues cannot run command buffers from device memory");
}

void Queue::encode_in_place(uint64_t dwords) {
  check_bindable();
  if (bound_ || cs_.size()) return;
  // Padded to a multiple of 8 dwords, as bind() needs.
  uint64_t bytes = (std::max<uint64_t>(dwords, 1) + 7) / 8 * 32;
  bound_ = ShadowMemory(*dev_, bytes);
  cs_.use_storage(reinterpret_cast<uint32_t*>(bound_.host()), bytes / 4);
}

void Queue::bind() {
  check_bindable();
  // Padded with zero dwords to a multiple of 8 (SDMA runs IBs in 8-dword units; a zero dword
  // is a NOP there). The padding is not part of the stream.
  const uint64_t padded = (cs_.size() + 7) / 8 * 8;
  if (bound_done_) return;
  if (bound_ && cs_.data() == reinterpret_cast<uint32_t*>(bound_.host())) {
    if (padded * 4 <= bound_.size()) {
      std::memset(cs_.data() + cs_.size(), 0, (padded - cs_.size()) * 4);
      bound_.mark(0, padded * 4);
      bound_done_ = true;
      return;
    }
    cs_.reserve(cs_.capacity() + 8);  // no room for the padding: move to host memory
  }
  ShadowMemory old = std::move(bound_);  // in-place storage outgrown: the stream is on the host
  bound_ = ShadowMemory(*dev_, std::max<uint64_t>(padded, 8) * 4);
  std::memset(bound_.host(), 0, bound_.size());
  cs_.bind(reinterpret_cast<uint32_t*>(bound_.host()));
  bound_.mark(0, padded * 4);
  bound_done_ = true;
}

std::optional<uint64_t> Queue::record_capture(bool grouped) const {
  if (!bound_done_ || pieces_.empty()) {
    const capture::Segment seg{bound_done_, bound_done_ ? bound_.va() : 0,
                               {cs_.data(), cs_.data() + cs_.size()}};
    return capture::submission(*dev_, kind_, index_, {&seg, 1}, grouped);
  }
  // A split recording: one segment per indirect buffer the queue runs (a replay runs the same).
  std::vector<capture::Segment> segs;
  size_t start = 0;
  for (size_t i = 0; i <= pieces_.size(); i++) {
    const size_t end = i < pieces_.size() ? pieces_[i] : cs_.size();
    segs.push_back({true, bound_.va() + start * 4, {cs_.data() + start, cs_.data() + end}});
    start = end;
  }
  return capture::submission(*dev_, kind_, index_, segs, grouped);
}

void Queue::submit_together(std::span<Queue* const> queues, bool capture) {
  if (queues.empty()) return;
  Device& dev = *queues.front()->dev_;
  IndirectRun runs[16];  // a device has a handful of queues
  if (queues.size() > std::size(runs))
    throw InvalidInput(dev.name() + ": at most " + std::to_string(std::size(runs)) +
                       " queues submitted together, not " + std::to_string(queues.size()));
  for (const Queue* q : queues) {
    if (q->dev_ != &dev)
      throw InvalidInput(dev.name() + ": queues submitted together must be of one device, " +
                         "not also of " + q->dev_->name());
    if (!q->bound_done_)
      throw InvalidInput(dev.name() + ": " + to_string(q->kind_) +
                         " queue: submitting together needs bound recordings");
  }
  size_t n = 0;
  std::vector<IndirectRun> split;  // only when a recording is split: then every run goes here
  const Queue* last = nullptr;     // the last one submitted: the end of the capture's group
  for (const Queue* q : queues)
    if (q->cs_.size()) last = q;
  for (Queue* q : queues) {
    if (q->cs_.size() == 0) continue;
    if (capture && capture::enabled()) q->record_capture(q != last);
    q->bound_.publish();
    if (q->pieces_.empty() && split.empty()) {
      runs[n++] = {&q->hw(), q->bound_.va(), q->cs_.size()};
      continue;
    }
    if (split.empty()) split.assign(runs, runs + n);
    q->add_runs(split);
  }
  if (!split.empty())
    dev.driver().submit_indirect(split);
  else if (n)
    dev.driver().submit_indirect(std::span<const IndirectRun>(runs, n));
}

HwQueue& Queue::hw() {
  if (!hw_) hw_ = &dev_->hw_queue(kind_, index_);
  return *hw_;
}

void Queue::submit() {
  if (cs_.size() == 0) return;
  if (capture::enabled()) record_capture();
  if (bound_done_) bound_.publish();
  if (bound_done_ && pieces_.empty()) {
    hw().submit_indirect(bound_.va(), cs_.size());
  } else if (bound_done_) {
    std::vector<IndirectRun> runs;
    add_runs(runs);
    dev_->driver().submit_indirect(runs);
  } else {
    hw().submit(cs_.data(), cs_.size());
  }
}

ComputeQueue& ComputeQueue::memory_barrier() {
  record(Cmd::Barrier, [&] { enc_->memory_barrier(cs_); });
  return *this;
}

ComputeQueue& ComputeQueue::exec(const Program& p, uint64_t kernargs, Dim3 grid, Dim3 block) {
  if (&p.device() != dev_)
    throw InvalidInput(dev_->name() + ": program '" + p.kernel().name + "' was loaded on " +
                       p.device().name());
  if (grid.count() == 0 || block.count() == 0)
    throw InvalidInput(dev_->name() + ": launch of '" + p.kernel().name +
                       "' with an empty grid or workgroup");
  record(Cmd::Exec, [&] { enc_->exec(cs_, p.kernel(), kernargs, grid, block, sites_); });
  return *this;
}

void ComputeQueue::update_exec(size_t cmd, std::optional<uint64_t> kernargs,
                               std::optional<Dim3> grid, std::optional<Dim3> block) {
  // A launch the encoder wrote into memory rather than the recording (NVIDIA with
  // HCQ_NV_QMD_BY_ADDRESS) has no sites: patching it would change nothing.
  if ((kernargs || grid || block) && cmd < commands() && cmds_[cmd].cmd == Cmd::Exec &&
      sites_of(cmd).empty())
    throw InvalidInput(dev_->name() + ": launch #" + std::to_string(cmd) +
                       " cannot be updated: its launch descriptor is in memory, not in the "
                       "recording (record the launch again)");
  if (kernargs) patch(cmd, Cmd::Exec, PatchRole::KernargAddress, *kernargs);
  if (grid) {
    patch(cmd, Cmd::Exec, PatchRole::GridX, grid->x);
    patch(cmd, Cmd::Exec, PatchRole::GridY, grid->y);
    patch(cmd, Cmd::Exec, PatchRole::GridZ, grid->z);
  }
  if (block) {
    patch(cmd, Cmd::Exec, PatchRole::BlockX, block->x);
    patch(cmd, Cmd::Exec, PatchRole::BlockY, block->y);
    patch(cmd, Cmd::Exec, PatchRole::BlockZ, block->z);
  }
}

CopyQueue& CopyQueue::copy(uint64_t dst, uint64_t src, uint64_t size) {
  // A zero-byte copy still takes a command number, so numbering never depends on sizes.
  record(Cmd::Copy, [&] {
    if (size) enc_->copy(cs_, dst, src, size, sites_);
  });
  return *this;
}

void CopyQueue::update_copy(size_t cmd, std::optional<uint64_t> dst, std::optional<uint64_t> src) {
  patch(cmd, Cmd::Copy, PatchRole::CopyDst, PatchRole::CopySrc, dst, src);
}

}  // namespace hcq
