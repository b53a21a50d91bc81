#include "emu/kernels.hpp"

#include <map>
#include <mutex>

namespace hcq::emu {
namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, KernelFn> fns;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_kernel(const std::string& name, KernelFn fn) {
  auto& r = registry();
  std::lock_guard lk(r.mu);
  r.fns[name] = std::move(fn);
}

const KernelFn* find_kernel(const std::string& name) {
  auto& r = registry();
  std::lock_guard lk(r.mu);
  auto it = r.fns.find(name);
  // std::map nodes are stable, so the pointer stays valid while the entry exists.
  return it == r.fns.end() ? nullptr : &it->second;
}

void Preemption::begin(uint64_t owner) {
  std::lock_guard lk(mu_);
  running_ = true;
  owner_ = owner;
  flag_.store(all_, std::memory_order_relaxed);
}

void Preemption::end() {
  std::lock_guard lk(mu_);
  running_ = false;
  flag_.store(all_, std::memory_order_relaxed);
}

void Preemption::abandon(uint64_t owner) {
  std::lock_guard lk(mu_);
  if (running_ && owner_ == owner) flag_.store(true, std::memory_order_relaxed);
}

void Preemption::abandon_all() {
  std::lock_guard lk(mu_);
  all_ = true;
  flag_.store(true, std::memory_order_relaxed);
}

}  // namespace hcq::emu
