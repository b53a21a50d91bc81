#pragma once
// What both transports' connections share (rdma/local.cpp, rdma/verbs.cpp): the error state,
// waits on Signals and immediates, and the local range check. Internal to rdma/.
#include <condition_variable>
#include <deque>
#include <mutex>

#include "rdma/transport.hpp"

namespace hcq::rdma {

class ConnectionBase : public Connection {
 public:
  explicit ConnectionBase(std::string name) : name_(std::move(name)) {}

  void wait(const Signal& signal, uint64_t value, std::chrono::milliseconds timeout) override;
  uint32_t wait_immediate(std::chrono::milliseconds timeout) override;
  std::string error() const override;

 protected:
  static constexpr std::chrono::milliseconds kPollInterval{20};

  // InvalidInput when [offset, offset + size) is not inside `local`.
  static void check_local(const Region& local, uint64_t offset, uint64_t size);
  // Under mu_: the connection's error as its exception.
  [[noreturn]] void throw_error() const;
  // Under mu_: the first failure puts the connection in the error state; failed() then drops
  // the transport's pending operations. Waiters wake.
  void fail(const std::string& why, bool remote_access);
  virtual void failed() = 0;
  // Under mu_: an immediate arrived.
  void deliver_immediate(uint32_t imm) {
    immediates_.push_back(imm);
    cv_.notify_all();
  }

  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string error_;

 private:
  bool error_remote_ = false;
  std::deque<uint32_t> immediates_;
};

}  // namespace hcq::rdma
