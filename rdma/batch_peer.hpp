#pragma once
// Batches across processes and machines (issue 20, item 4; docs/rdma.md): lib/batch's
// transport-neutral RemotePeer over an rdma::Connection, and the receiving side's signal as a
// region the sender writes. lib/batch does not know rdma/: a schedule names a RemotePeer,
// and this is the one that moves the bytes.
//
// Thread safety: BatchPeer's write_and_signal, read and signal may be called from several
// threads at once (the host-queue threads of several executables): calls are serialised,
// each waiting for its own operations. A SignalRegion is immutable once made.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "batch/batch.hpp"
#include "rdma/transport.hpp"

namespace hcq::rdma {

// A signal of this process registered so a peer's RDMA WRITE of a value lands in it: its
// page mapped through the signal's IPC export (core/ipc.hpp), so the write reaches the memory
// this process's GPU queues wait on, with no CPU of this side in between (a NIC writes it;
// the shared-memory transport's progress thread is this side's CPU, see docs/rdma.md).
// Throws InvalidInput for a signal that cannot be exported (see Signal::export_ipc).
class SignalRegion {
 public:
  SignalRegion(Endpoint& ep, const Signal& s);
  ~SignalRegion();
  SignalRegion(const SignalRegion&) = delete;
  SignalRegion& operator=(const SignalRegion&) = delete;
  // The signal's 8-byte value as peers address it: send it to the writer.
  RemoteRegion remote() const { return region_->remote(); }

 private:
  void* map_ = nullptr;
  uint64_t bytes_ = 0;
  std::unique_ptr<Region> region_;
};

class BatchPeer final : public batch::RemotePeer {
 public:
  struct Options {
    // Before the signal, an 8-byte RDMA READ of the target just written: a READ's response
    // leaves the peer's NIC only after the WRITEs before it were placed, so the value is not
    // seen before the data where the target is device memory behind PCIe (NCCL's flush).
    // The shared-memory transport places each write with a memcpy before it completes, so
    // there the flush orders nothing and only costs a round trip: turn it off.
    bool flush = true;
    std::chrono::milliseconds timeout = Connection::kDefaultTimeout;
  };
  // `conn` to the peer that advertised `targets` (the regions remote addresses fall in) and
  // `signal` (its SignalRegion::remote()); `dev` gives the completion signal. Endpoint,
  // connection and device must outlive this peer.
  BatchPeer(Device& dev, Endpoint& ep, Connection& conn, std::vector<RemoteRegion> targets,
            RemoteRegion signal, Options options);
  BatchPeer(Device& dev, Endpoint& ep, Connection& conn, std::vector<RemoteRegion> targets,
            RemoteRegion signal)
      : BatchPeer(dev, ep, conn, std::move(targets), signal, Options{}) {}

  // Registers `src` (a bound buffer's range through the endpoint's registration cache, so a
  // replay reuses it; the host thread's bounce buffer for the call), writes it to the target
  // region holding [remote_addr, +size), flushes, writes `value` to the peer's signal, and
  // waits for all three. Where the registration is host staging (verbs without dma-buf) the
  // bytes are copied into it first. Throws InvalidInput for an address in no advertised
  // target, and the connection's errors (ConnectionError when the peer is gone).
  void write_and_signal(Local src, uint64_t size, uint64_t remote_addr,
                        uint64_t value) override;
  // Registers `dst` as write_and_signal does its source, reads [remote_addr, +size) of the
  // target region holding it into it (copied out of host staging after), and waits. Errors
  // as write_and_signal.
  void read(Local dst, uint64_t size, uint64_t remote_addr) override;
  // Writes `value` to the peer's signal and waits for it. The connection's errors.
  void signal(uint64_t value) override;

 private:
  const RemoteRegion& target_of(uint64_t remote_addr, uint64_t size) const;
  std::shared_ptr<const Region> register_local(const Local& l, uint64_t size);
  Endpoint& ep_;
  Connection& conn_;
  std::vector<RemoteRegion> targets_;
  RemoteRegion signal_;
  Options options_;
  std::mutex mu_;
  Signal done_;
  uint64_t posted_ = 0;     // done_'s value for the last operation posted
  uint64_t words_[2] = {};  // the signal value being written; the flush's landing
  std::unique_ptr<Region> words_region_;
};

}  // namespace hcq::rdma
