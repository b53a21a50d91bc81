#include "rdma/connection_base.hpp"

#include "core/deadline.hpp"

namespace hcq::rdma {

using Clock = std::chrono::steady_clock;

void ConnectionBase::wait(const Signal& signal, uint64_t value,
                          std::chrono::milliseconds timeout) {
  auto until = deadline_after(timeout);
  std::unique_lock l(mu_);
  while (signal.value() < value) {
    if (!error_.empty()) throw_error();
    if (Clock::now() >= until)
      throw TimeoutError("rdma: connection '" + name_ + "': signal " +
                         std::to_string(signal.id()) + " did not reach " +
                         std::to_string(value) + " in " + std::to_string(timeout.count()) +
                         " ms (it is " + std::to_string(signal.value()) + ")");
    // Completions notify; the bound also covers a Signal set by something else.
    cv_.wait_until(l, std::min(until, Clock::now() + kPollInterval));
  }
}

uint32_t ConnectionBase::wait_immediate(std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (!cv_.wait_for(l, bounded_wait(timeout), [&] { return !immediates_.empty() || !error_.empty(); }))
    throw TimeoutError("rdma: connection '" + name_ + "': no immediate in " +
                       std::to_string(timeout.count()) + " ms");
  if (immediates_.empty()) throw_error();
  uint32_t v = immediates_.front();
  immediates_.pop_front();
  return v;
}

std::string ConnectionBase::error() const {
  std::lock_guard l(mu_);
  return error_;
}

void ConnectionBase::check_local(const Region& local, uint64_t off, uint64_t size) {
  if (off > local.length() || size > local.length() - off)
    throw InvalidInput("rdma: local range [" + hex(local.addr() + off) + ", " +
                       hex(local.addr() + off + size) + ") is outside region key " +
                       hex(local.key()) + " [" + hex(local.addr()) + ", " +
                       hex(local.addr() + local.length()) + ")");
}

void ConnectionBase::throw_error() const {
  if (error_remote_) throw RemoteAccessError(error_);
  throw ConnectionError(error_);
}

void ConnectionBase::fail(const std::string& why, bool remote_access) {
  if (!error_.empty()) return;
  error_ = why;
  error_remote_ = remote_access;
  failed();
  cv_.notify_all();
}

}  // namespace hcq::rdma
