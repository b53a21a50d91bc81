// Recorded queues: commands encoded once by the device's encoder, patchable afterwards (a
// signal or wait value or address, a copy address, a launch's grid, block or arguments) and
// submitted any number of times. bind() places the commands in device memory so a
// resubmission copies nothing: patches land there and submit() rings one indirect buffer.
//
// A recording longer than one indirect buffer of its queue (Device::max_indirect_dwords) is
// submitted as several, back to back on the queue, split between commands: while recording,
// a command that would overflow the current piece starts the next one (on a queue with a
// granule above 1, SDMA, after zero-dword NOPs up to it). A single command longer than that
// is refused. The pieces run in order on one queue, so waits and signals mean what they
// mean in one buffer.
//
// Commands are numbered in recording order from 0; the update_* calls take that number.
// A bound recording must not be patched while a submission of it may still be running.
//
// Thread safety: one Queue object is not thread-safe (record, patch and submit it from one
// thread at a time); different Queue objects may be used from different threads at once,
// also on one device and one hardware queue. A recording that waits on and signals the
// device timeline must take its values under Device::submit_mutex() (Timeline::reserve()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/command_stream.hpp"
#include "core/device.hpp"

namespace hcq {

class Program;
class KernelArgs;

class Queue {
 public:
  // A recording for the device's `index`-th queue of `kind`.
  Queue(Device& dev, QueueKind kind, uint32_t index = 0);
  virtual ~Queue() = default;
  Queue(Queue&&) = default;

  Queue& wait(const Signal& s, uint64_t value) { return wait(s.va(), value); }
  Queue& wait(uint64_t va, uint64_t value);
  Queue& signal(const Signal& s, uint64_t value, bool wake = true) {
    return signal_at(s.va(), value, wake);
  }
  // Write `value` to the 64-bit word at `va` once prior commands are done.
  Queue& signal_at(uint64_t va, uint64_t value, bool wake);
  Queue& timestamp(const Signal& s);
  // Write a 16-byte timestamp record at `va` (16-byte aligned) once prior commands are done:
  // the GPU timestamp lands at va+8, the first 8 bytes are clobbered (Encoder::timestamp).
  Queue& timestamp_at(uint64_t va);

  void update_wait(size_t cmd, std::optional<uint64_t> va, std::optional<uint64_t> value);
  void update_signal(size_t cmd, std::optional<uint64_t> va, std::optional<uint64_t> value);

  void bind();
  // Encode the commands recorded from now on straight into device memory sized for about
  // `dwords` (bind() then copies nothing); more than that still works, through host memory.
  void encode_in_place(uint64_t dwords);
  void submit();
  // Bound recordings of one device's queues submitted together, in one driver call: a
  // driver that orders its doorbells with a read (NVIDIA) reads once for all of them.
  // Throws InvalidInput, submitting nothing, for a recording not bound or of another device,
  // or more than 16 queues.
  // capture=false: the caller put them in the capture already (record_capture()).
  static void submit_together(std::span<Queue* const> queues, bool capture = true);
  // Record the submission in the capture (HCQ_CAPTURE) without submitting; throws OsError
  // when the capture file cannot be written. Returns the record's sequence number, or
  // nullopt when no capture file is open (capture::submission).
  // `grouped`: submitted together with the next queue recorded (capture::submission).
  std::optional<uint64_t> record_capture(bool grouped = false) const;

  size_t commands() const { return cmds_.size(); }
  // The patch sites of command `cmd`, for callers that keep their own patch tables (lib/batch);
  // patch_site() writes one (and its bound copy).
  std::span<const PatchSite> sites_of(size_t cmd) const {
    return {sites_.data() + cmds_.at(cmd).first_site, cmds_.at(cmd).sites};
  }
  void patch_site(const PatchSite& site, uint64_t value) {
    cs_.patch(site, value);
    mark_patched(site);
  }
  // Where patch_site() writes: the recording's words and, when it was bound apart from
  // them, its device copy (else null). Fixed once bound. Where the device copy is a shadow
  // (bound_memory().shadowed()), whoever writes these words marks them there.
  std::pair<uint32_t*, uint32_t*> patch_bases() { return {cs_.data(), cs_.bound()}; }
  const CommandStream& stream() const { return cs_; }
  // Where each indirect buffer a bound submission runs starts, in dwords: {0} unless the
  // recording is longer than one (see above).
  std::vector<size_t> piece_starts() const;
  // The memory the recording is bound to (empty before bind() or encode_in_place()).
  ShadowMemory& bound_memory() { return bound_; }
  QueueKind kind() const { return kind_; }
  Device& device() const { return *dev_; }

 protected:
  enum class Cmd : uint8_t { Wait, Signal, Timestamp, Barrier, Exec, Copy };
  struct Recorded {
    Cmd cmd;
    uint32_t first_site, sites;
  };
  template <class F>
  Queue& record(Cmd c, F&& encode);
  void patch(size_t cmd, Cmd expect, PatchRole role, uint64_t value);
  void patch(size_t cmd, Cmd expect, PatchRole a, PatchRole b, std::optional<uint64_t> va,
             std::optional<uint64_t> value);

  Device* dev_;
  QueueKind kind_;
  uint32_t index_;
  Encoder* enc_;
  CommandStream cs_;
  std::vector<PatchSite> sites_;
  std::vector<Recorded> cmds_;
  void check_bindable() const;
  // Marks a patched site's dwords for publishing (a device whose memory the CPU cannot map).
  void mark_patched(const PatchSite& site) {
    bound_.mark(uint64_t(site.dword) * 4, site_bytes(site));
  }
  ShadowMemory bound_;
  bool bound_done_ = false;
  HwQueue& hw();  // the device's queue this records for, looked up once
  HwQueue* hw_ = nullptr;
  // Splitting (see the top): the piece being recorded starts at piece_start_; pieces_ holds
  // where the second and later ones start.
  size_t max_piece_ = SIZE_MAX, granule_ = 1, piece_start_ = 0;
  std::vector<uint32_t> pieces_;
  void start_piece(size_t begin, uint32_t first_site);
  // The bound recording's indirect buffers, appended to `out`.
  void add_runs(std::vector<IndirectRun>& out);
};

class ComputeQueue : public Queue {
 public:
  explicit ComputeQueue(Device& dev) : Queue(dev, QueueKind::Compute) {}
  ComputeQueue& memory_barrier();
  // Launch with kernel arguments already in device memory at `kernargs`.
  ComputeQueue& exec(const Program& p, uint64_t kernargs, Dim3 grid, Dim3 block);
  void update_exec(size_t cmd, std::optional<uint64_t> kernargs, std::optional<Dim3> grid,
                   std::optional<Dim3> block);
};

class CopyQueue : public Queue {
 public:
  explicit CopyQueue(Device& dev, uint32_t index = 0) : Queue(dev, QueueKind::Copy, index) {}
  CopyQueue& copy(uint64_t dst, uint64_t src, uint64_t size);
  // The size is fixed at recording; the addresses may change.
  void update_copy(size_t cmd, std::optional<uint64_t> dst, std::optional<uint64_t> src);
};

}  // namespace hcq
