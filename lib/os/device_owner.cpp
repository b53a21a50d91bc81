#include "os/device_owner.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>

#include "core/error.hpp"

namespace hcq::os {

namespace {

std::mutex scope_mu;
std::string scope_override;  // guarded by scope_mu

// Copies `s` into a fixed field, cut to leave a terminating NUL.
template <size_t N>
void put(char (&field)[N], const std::string& s) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(field, s.data(), n);
  std::memset(field + n, 0, N - n);
}

template <size_t N>
std::string get(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

// The record's owner when it names a live process.
std::optional<DeviceHolder> live_owner(const DeviceRecord& r) {
  if (r.owner_pid <= 0 || r.owner_start_time == 0 ||
      SharedSegment::process_start_time(r.owner_pid) != r.owner_start_time)
    return std::nullopt;
  return DeviceHolder{r.owner_pid, r.owner_start_time, get(r.command), get(r.device),
                      r.since_unix_ms};
}

int64_t now_unix_ms() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return int64_t(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

}  // namespace

MailboxSection::MailboxSection(SharedMailbox& m, std::chrono::milliseconds timeout)
    : mailbox_(m) {
  holder_died_ = m.lock.lock(timeout);
  interrupted_ = holder_died_ || m.busy != 0;
  if (interrupted_) m.interruptions++;
}

std::string DeviceHolder::describe() const {
  char when[64] = "an unknown time";
  const time_t t = time_t(since_unix_ms / 1000);
  struct tm utc {};
  if (gmtime_r(&t, &utc)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return "pid " + std::to_string(pid) + " (" + command + "), since " + when;
}

std::string shared_name_prefix(const Kernel& kernel) {
  if (!kernel.emulated()) return "hcq.";
  std::string scope;
  {
    std::lock_guard lock(scope_mu);
    scope = scope_override;
  }
  if (scope.empty())
    if (const char* e = std::getenv("HCQ_EMULATED_SCOPE")) scope = e;
  if (scope.empty()) {
    // Its own machine: no other process, and no other live kernel of this one, shares it.
    char own[64];
    std::snprintf(own, sizeof own, "p%d-%llx", int(::getpid()),
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(&kernel)));
    scope = own;
  }
  return "hcq.emu." + scope + ".";
}

void set_emulated_scope(const std::string& scope) {
  std::lock_guard lock(scope_mu);
  scope_override = scope;
}

std::string device_segment_name(const Kernel& kernel, const std::string& key) {
  std::string k = key;
  for (char& c : k)
    if (c == ':') c = '_';
  return shared_name_prefix(kernel) + "dev." + k;
}

std::string own_command_line() {
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  std::string all;
  if (f) {
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && all.size() < DeviceRecord::kCommandBytes)
      all.append(buf, n);
    std::fclose(f);
  }
  while (!all.empty() && all.back() == '\0') all.pop_back();
  for (char& c : all)
    if (c == '\0') c = ' ';  // arguments are NUL-separated (proc(5))
  if (all.size() > DeviceRecord::kCommandBytes - 1) all.resize(DeviceRecord::kCommandBytes - 1);
  return all;
}

DeviceOwner::DeviceOwner(const Kernel& kernel, const std::string& key,
                         const std::string& device_name)
    : segment_(device_segment_name(kernel, key), DeviceRecord::kLayoutVersion,
               sizeof(DeviceRecord), [](std::byte* p) { new (p) DeviceRecord(); }),
      record_(reinterpret_cast<DeviceRecord*>(segment_.payload())) {
  DeviceRecord& r = *record_;
  // A claimer or a reader that died holding this lock left at worst a record naming a dead
  // process (a claimer writes its own pid), which live_owner() refuses: nothing to mend.
  r.owner_lock.lock();
  try {
    if (const std::optional<DeviceHolder> h = live_owner(r))
      throw InvalidInput(device_name + ": in use by " + h->describe());
    if (r.owner_pid != 0) {
      DeviceHolder gone{r.owner_pid, r.owner_start_time, get(r.command), get(r.device),
                        r.since_unix_ms};
      reclaimed_ = gone.describe() + ", gone";
    }
    r.owner_pid = 0;  // the fields below first, the pid last: a half claim names nobody
    r.owner_start_time = SharedSegment::process_start_time(::getpid());
    r.since_unix_ms = now_unix_ms();
    put(r.command, own_command_line());
    put(r.device, device_name);
    r.owner_pid = int32_t(::getpid());
  } catch (...) {
    r.owner_lock.unlock();
    throw;
  }
  r.owner_lock.unlock();
}

DeviceOwner::~DeviceOwner() {
  DeviceRecord& r = *record_;
  try {
    r.owner_lock.lock(std::chrono::milliseconds(2000));
  } catch (const Error&) {
    return;  // a holder that never lets go: the record names a process about to be gone
  }
  if (r.owner_pid == int32_t(::getpid())) {
    r.owner_pid = 0;
    r.owner_start_time = 0;
  }
  r.owner_lock.unlock();
}

SharedMailbox& DeviceOwner::mailbox(size_t i) {
  if (i >= DeviceRecord::kMailboxes)
    throw InvalidInput(segment_.name() + ": mailbox " + std::to_string(i) + " of " +
                       std::to_string(DeviceRecord::kMailboxes));
  return record_->mailboxes[i];
}

std::optional<DeviceHolder> device_holder(const Kernel& kernel, const std::string& key) {
  const std::string name = device_segment_name(kernel, key);
  struct stat st {};
  if (::stat(("/dev/shm/" + name).c_str(), &st) != 0) return std::nullopt;  // never claimed
  SharedSegment segment(name, DeviceRecord::kLayoutVersion, sizeof(DeviceRecord),
                        [](std::byte* p) { new (p) DeviceRecord(); });
  DeviceRecord& r = *reinterpret_cast<DeviceRecord*>(segment.payload());
  r.owner_lock.lock();
  std::optional<DeviceHolder> h = live_owner(r);
  r.owner_lock.unlock();
  return h;
}

}  // namespace hcq::os
