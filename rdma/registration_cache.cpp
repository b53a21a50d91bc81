// RegistrationCache (rdma/transport.hpp).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/ipc.hpp"
#include "rdma/transport.hpp"

namespace hcq::rdma {

struct RegistrationCache::Entry {
  dev_t dev;
  ino_t ino;
  uint64_t offset, size;
  std::shared_ptr<const Region> region;
  os::OwnedFd fd;  // the export: keeps the memory object, and so the key, unique
  uint64_t used;
};

void check_buffer_range(const Buffer& buf, uint64_t offset, uint64_t size) {
  if (!buf) throw InvalidInput("rdma: an empty buffer cannot be registered");
  if (size == 0 || offset > buf.size() || size > buf.size() - offset)
    throw InvalidInput("rdma: range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                       ") is not inside the buffer of " + std::to_string(buf.size()) + " bytes");
}

RegistrationCache::~RegistrationCache() = default;

std::shared_ptr<const Region> RegistrationCache::get(
    const Buffer& buf, uint64_t offset, uint64_t size,
    const std::function<std::unique_ptr<Region>()>& make) {
  check_buffer_range(buf, offset, size);
  IpcHandle h;
  try {
    h = buf.export_ipc();
  } catch (const InvalidInput&) {  // memory that cannot be shared (map_host's): uncached
    std::shared_ptr<const Region> r = make();
    std::lock_guard lk(mu_);
    stats_.registrations++;
    return r;
  }
  struct stat st {};
  if (::fstat(h.fd.get(), &st) != 0)
    throw OsError("rdma: fstat of the buffer's export", errno);
  std::lock_guard lk(mu_);
  for (auto& e : entries_)
    if (e->dev == st.st_dev && e->ino == st.st_ino && e->offset == offset && e->size == size) {
      e->used = ++clock_;
      stats_.hits++;
      return e->region;
    }
  auto e = std::make_shared<Entry>(
      Entry{st.st_dev, st.st_ino, offset, size, make(), std::move(h.fd), ++clock_});
  stats_.registrations++;
  if (entries_.size() >= capacity_ && !entries_.empty()) {
    auto lru = std::min_element(entries_.begin(), entries_.end(),
                                [](auto& a, auto& b) { return a->used < b->used; });
    entries_.erase(lru);  // a caller still holding its region keeps it registered
  }
  entries_.push_back(std::move(e));
  return entries_.back()->region;
}

RegistrationCache::Stats RegistrationCache::stats() const {
  std::lock_guard lk(mu_);
  Stats s = stats_;
  s.entries = entries_.size();
  return s;
}

void RegistrationCache::clear() {
  std::lock_guard lk(mu_);
  entries_.clear();
}

}  // namespace hcq::rdma
