// BatchPeer and SignalRegion (rdma/batch_peer.hpp).
#include "rdma/batch_peer.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>

#include "core/ipc.hpp"

namespace hcq::rdma {

SignalRegion::SignalRegion(Endpoint& ep, const Signal& s) {
  IpcHandle h = s.export_ipc();
  bytes_ = h.alloc_bytes;
  // The same pages as this process's own mapping of the signal (MAP_SHARED of its fd).
  map_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, h.fd.get(), 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("rdma: mapping signal " + std::to_string(s.id()) + "'s page: " +
                std::strerror(errno));
  }
  region_ = ep.register_host(static_cast<std::byte*>(map_) + h.offset, 8);
}

SignalRegion::~SignalRegion() {
  region_.reset();  // deregistered before the memory goes
  if (map_) ::munmap(map_, bytes_);
}

BatchPeer::BatchPeer(Device& dev, Endpoint& ep, Connection& conn,
                     std::vector<RemoteRegion> targets, RemoteRegion signal, Options options)
    : ep_(ep), conn_(conn), targets_(std::move(targets)), signal_(signal), options_(options),
      done_(dev.new_signal(0)) {
  words_region_ = ep_.register_host(words_, sizeof words_);
}

const RemoteRegion& BatchPeer::target_of(uint64_t remote_addr, uint64_t size) const {
  for (const RemoteRegion& r : targets_)
    if (remote_addr >= r.addr && size <= r.length && remote_addr - r.addr <= r.length - size)
      return r;
  throw InvalidInput("rdma: batch peer: remote address " + hex(remote_addr) + " (" +
                     std::to_string(size) + " bytes) is in no region the peer advertised");
}

std::shared_ptr<const Region> BatchPeer::register_local(const Local& l, uint64_t size) {
  // A bound buffer's range: the endpoint's cached registration (a replay reuses it).
  if (l.buffer) return ep_.register_cached(*l.buffer, l.offset, size);
  return ep_.register_host(l.host, size);  // the bounce buffer: for this call
}

void BatchPeer::write_and_signal(Local src, uint64_t size, uint64_t remote_addr,
                                 uint64_t value) {
  const RemoteRegion& target = target_of(remote_addr, size);
  std::lock_guard lk(mu_);
  auto local = register_local(src, size);
  if (local->host() && local->host() != src.host)  // host staging: the bytes go through it
    std::memcpy(local->host(), src.host, size);
  const uint64_t at = remote_addr - target.addr;
  conn_.write(*local, 0, target, at, size, done_, ++posted_, options_.timeout);
  if (options_.flush)
    conn_.read(*words_region_, 8, target, at + size - std::min<uint64_t>(size, 8),
               std::min<uint64_t>(size, 8), done_, ++posted_, options_.timeout);
  words_[0] = value;
  conn_.write(*words_region_, 0, signal_, 0, 8, done_, ++posted_, options_.timeout);
  conn_.wait(done_, posted_, options_.timeout);
}

void BatchPeer::read(Local dst, uint64_t size, uint64_t remote_addr) {
  const RemoteRegion& target = target_of(remote_addr, size);
  std::lock_guard lk(mu_);
  auto local = register_local(dst, size);
  conn_.read(*local, 0, target, remote_addr - target.addr, size, done_, ++posted_,
             options_.timeout);
  conn_.wait(done_, posted_, options_.timeout);
  if (local->host() && local->host() != dst.host) std::memcpy(dst.host, local->host(), size);
}

void BatchPeer::signal(uint64_t value) {
  std::lock_guard lk(mu_);
  words_[0] = value;
  conn_.write(*words_region_, 0, signal_, 0, 8, done_, ++posted_, options_.timeout);
  conn_.wait(done_, posted_, options_.timeout);
}

}  // namespace hcq::rdma
