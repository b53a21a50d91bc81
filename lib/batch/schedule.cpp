// Recording a schedule: launches, copies and loads with the ranges they read and write.
#include "batch/batch.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace hcq::batch {

Schedule::Schedule(std::vector<Device*> devices) : devs_(std::move(devices)) {
  if (devs_.empty()) throw InvalidInput("batch: a schedule needs a device");
  for (size_t i = 0; i < devs_.size(); i++)
    for (size_t j = 0; j < i; j++)
      if (devs_[i] == devs_[j]) throw InvalidInput("batch: a device is listed twice");
}

bool Schedule::ours(const Device* d) const {
  return std::find(devs_.begin(), devs_.end(), d) != devs_.end();
}

Mem Schedule::input(Device& dev, uint64_t size) {
  if (size == 0) throw InvalidInput("batch: an input must have a size");
  if (!ours(&dev)) throw InvalidInput("batch: input on " + dev.name() + ", not a schedule device");
  input_sizes_.push_back(size);
  input_devices_.push_back(&dev);
  return {nullptr, int32_t(input_sizes_.size() - 1), size, &dev};
}

void Schedule::check(const Mem& m, uint64_t off, uint64_t size, const std::string& what) const {
  if (m.bound) {
    if (!ours(m.bound->device()))
      throw InvalidInput("batch: " + what + " uses a buffer of " +
                         (m.bound->device() ? m.bound->device()->name() : "a closed device") +
                         ", which is not one of the schedule's devices");
  } else if (m.input < 0 || size_t(m.input) >= input_sizes_.size()) {
    throw InvalidInput("batch: " + what + " uses an input this schedule did not declare");
  }
  if (off > m.size || size > m.size - off)
    throw InvalidInput("batch: " + what + ": range [" + std::to_string(off) + ", " +
                       std::to_string(off) + "+" + std::to_string(size) +
                       ") is outside the buffer of " + std::to_string(m.size) + " bytes");
}

size_t Schedule::launch(const Program& p, Dim3 grid, Dim3 block, std::vector<Arg> args,
                        std::vector<Access> accesses) {
  const std::string what = "launch #" + std::to_string(calls_.size()) + " ('" +
                           p.kernel().name + "')";
  if (!ours(&p.device()))
    throw InvalidInput("batch: " + what + " was loaded on " + p.device().name() +
                       ", which is not one of the schedule's devices");
  if (grid.count() == 0 || block.count() == 0)
    throw InvalidInput("batch: " + what + " has an empty grid or workgroup");
  std::vector<const KernelArg*> want;
  for (auto& a : p.kernel().args)
    if (a.kind != KernelArg::Kind::Hidden) want.push_back(&a);
  if (want.size() != args.size())
    throw InvalidInput("batch: " + what + " takes " + std::to_string(want.size()) +
                       " arguments, " + std::to_string(args.size()) + " given");
  for (size_t i = 0; i < args.size(); i++) {
    bool is_buf = args[i].kind_ == Arg::Kind::Buffer;
    std::string which = what + " argument " + std::to_string(i);
    if (want[i]->kind != KernelArg::Kind::Bytes && is_buf != (want[i]->kind == KernelArg::Kind::Buffer))
      throw InvalidInput("batch: " + which + (is_buf ? " is a value" : " is a buffer") +
                         " in the kernel");
    if (is_buf) {
      if (want[i]->size != 8) throw InvalidInput("batch: " + which + " is " + std::to_string(want[i]->size) + " bytes, not an address");
      check(args[i].mem_, args[i].offset_, 0, which);
    } else {
      if (args[i].kind_ == Arg::Kind::Scalar &&
          (args[i].slot_ >= scalar_bytes_.size() ||
           scalar_bytes_[args[i].slot_] != args[i].bytes_.size()))
        throw InvalidInput("batch: " + which + " uses an undeclared scalar");
      if (args[i].bytes_.size() != want[i]->size)
        throw InvalidInput("batch: " + which + " is " + std::to_string(want[i]->size) +
                           " bytes, got " + std::to_string(args[i].bytes_.size()));
    }
  }
  if (accesses.empty()) {
    // From the metadata: const buffers are read, the rest read and written, each from the
    // argument's offset to the end of its buffer.
    for (size_t i = 0; i < args.size(); i++) {
      const Arg& a = args[i];
      if (a.kind_ != Arg::Kind::Buffer) continue;
      bool read_only = want[i]->access == KernelArg::Access::ReadOnly;
      accesses.push_back({a.mem_, a.offset_, a.mem_.size - a.offset_, !read_only});
    }
  }
  for (auto& a : accesses) {
    check(a.mem, a.offset, a.size, what);
    if (a.mem.device != &p.device())
      throw InvalidInput("batch: " + what + " on " + p.device().name() + " uses memory of " +
                         a.mem.device->name() + "; copy it over first");
  }
  calls_.push_back({.launch = true,
                    .program = &p,
                    .grid = grid,
                    .block = block,
                    .args = std::move(args),
                    .accesses = std::move(accesses)});
  return calls_.size() - 1;
}

size_t Schedule::copy(Mem dst, uint64_t dst_offset, Mem src, uint64_t src_offset, uint64_t size) {
  const std::string what = "copy #" + std::to_string(calls_.size());
  if (size == 0) throw InvalidInput("batch: " + what + " copies 0 bytes");
  check(dst, dst_offset, size, what + " destination");
  check(src, src_offset, size, what + " source");
  calls_.push_back({.launch = false,
                    .dst = dst,
                    .src = src,
                    .dst_offset = dst_offset,
                    .src_offset = src_offset,
                    .size = size,
                    .accesses = {Access::read(src, src_offset, size),
                                 Access::written(dst, dst_offset, size)}});
  return calls_.size() - 1;
}

size_t Schedule::load(Mem dst, uint64_t dst_offset, const std::string& path, uint64_t file_offset,
                      uint64_t size) {
  const std::string what = "load #" + std::to_string(calls_.size());
  if (size == 0) throw InvalidInput("batch: " + what + " reads 0 bytes");
  if (path.empty()) throw InvalidInput("batch: " + what + " names no file");
  check(dst, dst_offset, size, what + " destination");
  calls_.push_back({.launch = false,
                    .dst = dst,
                    .dst_offset = dst_offset,
                    .src_offset = file_offset,
                    .size = size,
                    .path = path,
                    .accesses = {Access::written(dst, dst_offset, size)}});
  return calls_.size() - 1;
}

namespace {
// A remote call's scalar must be one of the schedule's 8-byte ones.
void check_u64(const std::vector<uint32_t>& scalar_bytes, Scalar<uint64_t> s,
               const std::string& what) {
  if (s.slot >= scalar_bytes.size() || scalar_bytes[s.slot] != 8)
    throw InvalidInput("batch: " + what + " needs an 8-byte scalar of this schedule");
}
}  // namespace

size_t Schedule::remote_write(RemotePeer& peer, Mem src, uint64_t src_offset, uint64_t size,
                              Scalar<uint64_t> remote_addr, Scalar<uint64_t> signal_value) {
  const std::string what = "remote write #" + std::to_string(calls_.size());
  if (size == 0) throw InvalidInput("batch: " + what + " writes 0 bytes");
  check(src, src_offset, size, what + " source");
  for (uint32_t slot : {remote_addr.slot, signal_value.slot})
    if (slot >= scalar_bytes_.size() || scalar_bytes_[slot] != 8)
      throw InvalidInput("batch: " + what + " needs 8-byte scalars of this schedule");
  calls_.push_back({.launch = false,
                    .src = src,
                    .src_offset = src_offset,
                    .size = size,
                    .peer = &peer,
                    .addr_scalar = remote_addr.slot,
                    .value_scalar = signal_value.slot,
                    .accesses = {Access::read(src, src_offset, size)}});
  return calls_.size() - 1;
}

size_t Schedule::remote_read(RemotePeer& peer, Scalar<uint64_t> remote_addr, Mem dst,
                             uint64_t dst_offset, uint64_t size) {
  const std::string what = "remote read #" + std::to_string(calls_.size());
  if (size == 0) throw InvalidInput("batch: " + what + " reads 0 bytes");
  check(dst, dst_offset, size, what + " destination");
  check_u64(scalar_bytes_, remote_addr, what);
  calls_.push_back({.launch = false,
                    .dst = dst,
                    .dst_offset = dst_offset,
                    .size = size,
                    .peer = &peer,
                    .remote = detail::RemoteOp::Read,
                    .addr_scalar = remote_addr.slot,
                    .accesses = {Access::written(dst, dst_offset, size)}});
  return calls_.size() - 1;
}

size_t Schedule::remote_signal(RemotePeer& peer, Scalar<uint64_t> value, std::vector<Access> after) {
  const std::string what = "remote signal #" + std::to_string(calls_.size());
  check_u64(scalar_bytes_, value, what);
  if (after.empty())
    throw InvalidInput("batch: " + what + " follows no range (its device is the first range's)");
  for (Access& a : after) {
    check(a.mem, a.offset, a.size, what);
    a.write = false;
  }
  calls_.push_back({.launch = false,
                    .peer = &peer,
                    .remote = detail::RemoteOp::Signal,
                    .value_scalar = value.slot,
                    .accesses = std::move(after)});
  return calls_.size() - 1;
}

size_t Schedule::remote_wait(Device& dev, const Signal& signal, Scalar<uint64_t> value,
                             std::vector<Access> arrives) {
  const std::string what = "remote wait #" + std::to_string(calls_.size());
  if (!ours(&dev)) throw InvalidInput("batch: " + what + " on " + dev.name() + ", not a schedule device");
  if (!signal.va()) throw InvalidInput("batch: " + what + " waits on an empty signal");
  check_u64(scalar_bytes_, value, what);
  for (Access& a : arrives) {
    check(a.mem, a.offset, a.size, what);
    a.write = true;
  }
  calls_.push_back({.launch = false,
                    .signal = &signal,
                    .device = &dev,
                    .value_scalar = value.slot,
                    .accesses = std::move(arrives)});
  return calls_.size() - 1;
}

}  // namespace hcq::batch
