#include "os/usb.hpp"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace hcq::os {
namespace {

constexpr const char* kDevices = "/sys/bus/usb/devices";
// The node /dev/bus/usb/BBB/DDD has three digits for the bus (drivers/usb/core/usb.c
// usb_devnode); USB addresses are 1 to 127 (USB 2.0 9.4.6; hub.c choose_devnum).
constexpr unsigned long kMaxBus = 999, kMaxDevnum = 127;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? std::string() : s.substr(i);
}

std::string attr(Kernel& k, const std::string& dir, const char* name) {
  auto v = k.read_file(dir + "/" + name);
  return v ? trimmed(*v) : std::string();
}

// sysfs writes these attributes in decimal or in hex without 0x (drivers/usb/core/sysfs.c:
// busnum "%d", idVendor "%04x", bInterfaceClass "%02x", bAlternateSetting "%2d"). Anything
// but digits of `base` (a sign, a prefix, a NUL inside) or a value above `max` reads as 0,
// which leaves a device without bus or device number out.
unsigned long number(const std::string& s, int base, unsigned long max) {
  unsigned long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  return ec == std::errc() && end == s.data() + s.size() && v <= max ? v : 0;
}

// A uevent file's DRIVER= line: the bound driver's name (drivers/base/core.c dev_uevent).
std::string uevent_driver(Kernel& k, const std::string& dir) {
  auto ev = k.read_file(dir + "/uevent");
  if (!ev) return {};
  for (size_t at = 0; at < ev->size();) {
    size_t end = std::min(ev->find('\n', at), ev->size());
    if (ev->compare(at, 7, "DRIVER=") == 0) return ev->substr(at + 7, end - at - 7);
    at = end + 1;
  }
  return {};
}

std::string ep_hex(unsigned ep) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", ep & 0xff);
  return buf;
}

std::string direction(uint8_t ep) { return (ep & 0x80) ? "IN" : "OUT"; }

void check_timeout(const std::string& name, const std::string& what, int timeout_ms) {
  // usbfs waits forever on a timeout of 0 (devio.c usbfs_start_wait_urb); hcq never does.
  if (timeout_ms <= 0)
    throw InvalidInput(name + ": " + what + ": a timeout of " + std::to_string(timeout_ms) +
                       " ms (every wait needs a positive one)");
}

}  // namespace

std::string UsbDeviceInfo::node() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "/dev/bus/usb/%03d/%03d", bus, devnum);
  return buf;
}

std::string UsbDeviceInfo::name() const {
  char ids[16];
  std::snprintf(ids, sizeof ids, "%04x:%04x", vendor, product);
  std::string s = "usb ";
  s += port;
  s += " (";
  s += ids;
  s += ")";
  return s;
}

std::vector<UsbDeviceInfo> list_usb_devices(Kernel& k) {
  std::vector<UsbDeviceInfo> out;
  const auto names = k.list_dir(kDevices);
  for (const auto& name : names) {
    if (name.find(':') != std::string::npos) continue;  // an interface: "2-1:1.0"
    const std::string dir = std::string(kDevices) + "/" + name;
    UsbDeviceInfo d;
    d.port = name;
    d.bus = int(number(attr(k, dir, "busnum"), 10, kMaxBus));
    d.devnum = int(number(attr(k, dir, "devnum"), 10, kMaxDevnum));
    if (!d.bus || !d.devnum) continue;  // not a device
    d.vendor = uint16_t(number(attr(k, dir, "idVendor"), 16, 0xffff));
    d.product = uint16_t(number(attr(k, dir, "idProduct"), 16, 0xffff));
    d.manufacturer = attr(k, dir, "manufacturer");
    d.product_name = attr(k, dir, "product");
    d.serial = attr(k, dir, "serial");
    d.speed = attr(k, dir, "speed");
    d.configuration = int(number(attr(k, dir, "bConfigurationValue"), 10, 0xff));
    // The active configuration's interfaces are "<port>:<config>.<interface>".
    const std::string prefix = name + ":";
    for (const auto& i : names) {
      if (i.compare(0, prefix.size(), prefix) != 0) continue;
      const std::string idir = std::string(kDevices) + "/" + i;
      UsbInterface f;
      f.number = uint8_t(number(attr(k, idir, "bInterfaceNumber"), 16, 0xff));
      f.alt_setting = uint8_t(number(attr(k, idir, "bAlternateSetting"), 10, 0xff));
      f.cls = uint8_t(number(attr(k, idir, "bInterfaceClass"), 16, 0xff));
      f.subclass = uint8_t(number(attr(k, idir, "bInterfaceSubClass"), 16, 0xff));
      f.protocol = uint8_t(number(attr(k, idir, "bInterfaceProtocol"), 16, 0xff));
      f.endpoints = uint8_t(number(attr(k, idir, "bNumEndpoints"), 16, 0xff));
      f.driver = uevent_driver(k, idir);
      d.interfaces.push_back(f);
    }
    std::sort(d.interfaces.begin(), d.interfaces.end(),
              [](const UsbInterface& a, const UsbInterface& b) { return a.number < b.number; });
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const UsbDeviceInfo& a, const UsbDeviceInfo& b) {
    return a.bus != b.bus ? a.bus < b.bus : a.devnum < b.devnum;
  });
  return out;
}

UsbDevice::UsbDevice(std::shared_ptr<Kernel> k, const UsbDeviceInfo& info)
    : k_(std::move(k)), info_(info), name_(info.name()) {
  const std::string node = info_.node();
  fd_ = k_->open(node, O_RDWR);
  if (fd_ == -EACCES) {
    char ids[96];
    std::snprintf(ids, sizeof ids, "ATTR{idVendor}==\"%04x\", ATTR{idProduct}==\"%04x\"",
                  info_.vendor, info_.product);
    std::string what = name_ + ": open " + node;
    what += ": permission denied (run as root, or give the node to your user with a udev rule: "
            "SUBSYSTEM==\"usb\", ";
    what += ids;
    what += ", MODE=\"0666\")";
    throw OsError(what, EACCES);
  }
  if (fd_ < 0) {
    std::string what = name_ + ": open " + node;
    if (fd_ == -ENOENT || fd_ == -ENODEV) what += ": the device is disconnected";
    throw OsError(what, -fd_);
  }
}

UsbDevice::~UsbDevice() {
  try {
    std::vector<UrbId> pending;
    {
      std::lock_guard lk(mu_);
      for (auto& [id, u] : urbs_)
        if (!u->done) pending.push_back(id);
    }
    for (UrbId id : pending) discard(id, 1000);
    if (!disconnected_)
      while (!claims_.empty()) release_interface(claims_.begin()->first);
  } catch (const Error&) {
    // Closing below still releases everything the kernel holds for this fd.
  }
  k_->close(fd_);
}

void UsbDevice::fail(const std::string& what, int err, uint8_t ep, int timeout_ms) const {
  std::string w = name_ + ": " + what;
  switch (err) {
    case ENODEV:
    case ESHUTDOWN:  // an URB killed by the disconnect (usb_hcd_flush_endpoint)
      w += ": the device is disconnected";
      throw OsError(w, err);
    case EPIPE:
      if (ep & 0x7f) {
        w += ": endpoint " + ep_hex(ep);
        w += " stalled (clear_halt(" + ep_hex(ep);
        w += ") clears it)";
      } else {
        w += ": the device refused the request (stall on endpoint 0x00)";
      }
      throw OsError(w, err);
    case ETIMEDOUT:
      w += ": timed out after " + std::to_string(timeout_ms);
      w += " ms";
      throw TimeoutError(w);
    default: throw OsError(w, err);
  }
}

void UsbDevice::check_length(const std::string& what, size_t asked, size_t got,
                             UsbLength need) const {
  if (need == UsbLength::Exact && got != asked) {
    std::string w = name_ + ": " + what;
    w += ": short transfer: asked " + std::to_string(asked);
    w += " bytes, got " + std::to_string(got);
    throw Error(w);
  }
}

std::string UsbDevice::driver_of(uint8_t ifnum) {
  usbdevfs_getdriver gd{};
  gd.interface = ifnum;
  int r = k_->ioctl(fd_, USBDEVFS_GETDRIVER, &gd);
  if (r == -ENODATA) return {};  // no driver bound (devio.c proc_getdriver)
  if (r < 0) fail("driver of interface " + std::to_string(ifnum), -r, 0, 0);
  gd.driver[USBDEVFS_MAXDRIVERNAME] = 0;
  return gd.driver;
}

void UsbDevice::claim_interface(uint8_t ifnum) {
  if (claims_.count(ifnum)) return;
  const std::string iface = "interface " + std::to_string(ifnum);
  Claim c;
  const std::string driver = driver_of(ifnum);
  // usbfs on it means another program claimed it; detaching would take it from that program
  // (libusb os/linux_usbfs.c op_detach_kernel_driver refuses "usbfs" too).
  if (!driver.empty() && driver != "usbfs") {
    usbdevfs_ioctl cmd{};
    cmd.ifno = ifnum;
    cmd.ioctl_code = USBDEVFS_DISCONNECT;
    if (int r = k_->ioctl(fd_, USBDEVFS_IOCTL, &cmd); r < 0 && r != -ENODATA)
      fail("detach of " + iface + " from " + driver, -r, 0, 0);
    c.detached = driver;
  }
  unsigned n = ifnum;
  if (int r = k_->ioctl(fd_, USBDEVFS_CLAIMINTERFACE, &n); r < 0) {
    if (!c.detached.empty()) {  // give it back
      usbdevfs_ioctl cmd{};
      cmd.ifno = ifnum;
      cmd.ioctl_code = USBDEVFS_CONNECT;
      k_->ioctl(fd_, USBDEVFS_IOCTL, &cmd);
    }
    if (r == -EBUSY) {
      std::string holder = driver_of(ifnum);
      std::string w = name_ + ": claim of " + iface;
      w += ": held by " + (holder.empty() ? std::string("another driver") : holder);
      if (holder == "usbfs") w += " (another program has the device open)";
      throw OsError(w, EBUSY);
    }
    fail("claim of " + iface, -r, 0, 0);
  }
  claims_[ifnum] = c;
}

void UsbDevice::release_interface(uint8_t ifnum) {
  auto it = claims_.find(ifnum);
  if (it == claims_.end()) return;
  const Claim c = it->second;
  claims_.erase(it);
  const std::string iface = "interface " + std::to_string(ifnum);
  unsigned n = ifnum;
  if (int r = k_->ioctl(fd_, USBDEVFS_RELEASEINTERFACE, &n); r < 0)
    fail("release of " + iface, -r, 0, 0);
  if (!c.detached.empty()) {
    usbdevfs_ioctl cmd{};
    cmd.ifno = ifnum;
    cmd.ioctl_code = USBDEVFS_CONNECT;
    // EBUSY: a driver bound meanwhile; the interface has one either way.
    if (int r = k_->ioctl(fd_, USBDEVFS_IOCTL, &cmd); r < 0 && r != -EBUSY)
      fail("reattach of " + iface + " to " + c.detached, -r, 0, 0);
  }
}

void UsbDevice::set_alt_setting(uint8_t ifnum, uint8_t alt) {
  usbdevfs_setinterface s{ifnum, alt};
  if (int r = k_->ioctl(fd_, USBDEVFS_SETINTERFACE, &s); r < 0)
    fail("alternate setting " + std::to_string(alt) + " of interface " + std::to_string(ifnum),
         -r, 0, 0);
}

unsigned UsbDevice::alloc_streams(unsigned streams, const std::vector<uint8_t>& endpoints) {
  // struct usbdevfs_streams ends in a flexible array of endpoint addresses.
  std::vector<unsigned char> buf(sizeof(usbdevfs_streams) + endpoints.size());
  usbdevfs_streams head{};
  head.num_streams = streams;
  head.num_eps = unsigned(endpoints.size());
  std::memcpy(buf.data(), &head, sizeof head);
  std::copy(endpoints.begin(), endpoints.end(), buf.begin() + sizeof head);
  int r = k_->ioctl(fd_, USBDEVFS_ALLOC_STREAMS, buf.data());
  if (r < 0) fail("allocation of " + std::to_string(streams) + " bulk streams", -r, 0, 0);
  return unsigned(r);
}

size_t UsbDevice::control(const UsbSetup& setup, void* data, uint16_t length, int timeout_ms,
                          UsbLength need) {
  std::string what = "control " + direction(setup.request_type);
  what += " request " + hex(setup.request);
  what += " (type " + hex(setup.request_type);
  what += ", value " + hex(setup.value);
  what += ", index " + hex(setup.index);
  what += ") of " + std::to_string(length);
  what += " bytes";
  check_timeout(name_, what, timeout_ms);
  usbdevfs_ctrltransfer c{};
  c.bRequestType = setup.request_type;
  c.bRequest = setup.request;
  c.wValue = setup.value;
  c.wIndex = setup.index;
  c.wLength = length;
  c.timeout = unsigned(timeout_ms);
  c.data = data;
  int r = k_->ioctl(fd_, USBDEVFS_CONTROL, &c);
  if (r < 0) {
    if (r == -ENODEV) disconnected_ = true;
    fail(what, -r, 0, timeout_ms);
  }
  // An OUT request moves all of its data stage or fails.
  if (setup.request_type & 0x80) check_length(what, length, size_t(r), need);
  return size_t(r);
}

size_t UsbDevice::bulk_out(uint8_t ep, const void* data, size_t length, int timeout_ms) {
  std::string what = "bulk OUT of " + std::to_string(length);
  what += " bytes on endpoint " + ep_hex(ep);
  check_timeout(name_, what, timeout_ms);
  usbdevfs_bulktransfer b{};
  b.ep = ep & 0x7f;
  b.len = unsigned(length);
  b.timeout = unsigned(timeout_ms);
  b.data = const_cast<void*>(data);  // usbfs only reads an OUT buffer
  int r = k_->ioctl(fd_, USBDEVFS_BULK, &b);
  if (r < 0) {
    if (r == -ENODEV) disconnected_ = true;
    fail(what, -r, ep & 0x7f, timeout_ms);
  }
  check_length(what, length, size_t(r), UsbLength::Exact);
  return size_t(r);
}

size_t UsbDevice::bulk_in(uint8_t ep, void* data, size_t length, int timeout_ms, UsbLength need) {
  std::string what = "bulk IN of " + std::to_string(length);
  what += " bytes on endpoint " + ep_hex(ep | 0x80);
  check_timeout(name_, what, timeout_ms);
  usbdevfs_bulktransfer b{};
  b.ep = ep | 0x80;
  b.len = unsigned(length);
  b.timeout = unsigned(timeout_ms);
  b.data = data;
  int r = k_->ioctl(fd_, USBDEVFS_BULK, &b);
  if (r < 0) {
    if (r == -ENODEV) disconnected_ = true;
    fail(what, -r, ep | 0x80, timeout_ms);
  }
  check_length(what, length, size_t(r), need);
  return size_t(r);
}

namespace {
std::string urb_what(const usbdevfs_urb& u) {
  std::string w = "bulk " + direction(u.endpoint);
  w += " URB of " + std::to_string(u.buffer_length);
  w += " bytes on endpoint " + ep_hex(u.endpoint);
  if (u.stream_id) w += " stream " + std::to_string(u.stream_id);
  return w;
}
}  // namespace

UsbDevice::UrbId UsbDevice::submit_bulk(uint8_t ep, void* buffer, size_t length,
                                        unsigned stream_id) {
  auto u = std::make_unique<Urb>();
  usbdevfs_urb& urb = *u->urb;
  urb.type = USBDEVFS_URB_TYPE_BULK;
  urb.endpoint = ep;
  urb.buffer = buffer;
  urb.buffer_length = int(length);
  urb.stream_id = stream_id;
  usbdevfs_urb* raw = u->urb.get();
  UrbId id;
  {
    std::lock_guard lk(mu_);
    id = next_id_++;
    urb.usercontext = reinterpret_cast<void*>(uintptr_t(id));
    urbs_[id] = std::move(u);  // before the submit: the reaper may see it complete at once
  }
  if (int r = k_->ioctl(fd_, USBDEVFS_SUBMITURB, raw); r < 0) {
    std::string what = "submit of " + urb_what(*raw);
    {
      std::lock_guard lk(mu_);
      urbs_.erase(id);
      if (r == -ENODEV) disconnected_ = true;
    }
    fail(what, -r, ep, 0);
  }
  return id;
}

void UsbDevice::reap_some(int timeout_ms) {
  pollfd p{fd_, POLLOUT, 0};
  int n = k_->poll(&p, 1, timeout_ms);
  // POLLOUT: a completed URB waits to be reaped (devio.c usbdev_poll). Reap one at a time
  // and poll again: REAPURBNDELAY answers EAGAIN when none is left, and RealKernel retries
  // EAGAIN, so it is only called when one is there.
  while (n > 0 && (p.revents & POLLOUT)) {
    usbdevfs_urb* got = nullptr;
    if (k_->ioctl(fd_, USBDEVFS_REAPURBNDELAY, &got) < 0 || !got) break;
    {
      std::lock_guard lk(mu_);
      auto it = urbs_.find(UrbId(reinterpret_cast<uintptr_t>(got->usercontext)));
      if (it != urbs_.end()) it->second->done = true;
    }
    cv_.notify_all();
    n = k_->poll(&p, 1, 0);
  }
  // Hung up with nothing left to reap: the device is gone, and every URB it had was
  // completed at the disconnect (devio.c usbdev_remove), so any still missing never will be.
  if (n > 0 && !(p.revents & POLLOUT) && (p.revents & (POLLHUP | POLLERR))) {
    std::lock_guard lk(mu_);
    disconnected_ = true;
    for (auto& [id, u] : urbs_)
      if (!u->done) u->done = true, u->urb->status = -ENODEV, u->urb->actual_length = 0;
    cv_.notify_all();
  }
}

bool UsbDevice::wait_done(std::unique_lock<std::mutex>& lk, Urb& u, int timeout_ms) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!u.done) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) return false;
    if (reaping_) {  // another thread reaps for everyone
      cv_.wait_until(lk, deadline);
      continue;
    }
    reaping_ = true;
    lk.unlock();
    reap_some(int(left.count()));
    lk.lock();
    reaping_ = false;
    cv_.notify_all();
  }
  return true;
}

size_t UsbDevice::wait(UrbId id, int timeout_ms, UsbLength need) {
  std::unique_lock lk(mu_);
  auto it = urbs_.find(id);
  if (it == urbs_.end())
    throw InvalidInput(name_ + ": URB " + std::to_string(id) + " is not in flight");
  Urb& u = *it->second;
  const std::string what = urb_what(*u.urb);
  const uint8_t ep = u.urb->endpoint;
  check_timeout(name_, what, timeout_ms);
  if (!wait_done(lk, u, timeout_ms)) {
    lk.unlock();
    k_->ioctl(fd_, USBDEVFS_DISCARDURB, u.urb.get());  // EINVAL: it completed meanwhile
    lk.lock();
    if (!wait_done(lk, u, 1000) || u.urb->status == -ENOENT || u.urb->status == -ECONNRESET) {
      if (u.done) urbs_.erase(id);
      lk.unlock();
      fail(what, ETIMEDOUT, ep, timeout_ms);
    }
  }
  const usbdevfs_urb done = *u.urb;
  urbs_.erase(id);
  lk.unlock();
  if (done.status < 0) fail(what, -done.status, ep, timeout_ms);
  check_length(what, size_t(done.buffer_length), size_t(done.actual_length), need);
  return size_t(done.actual_length);
}

bool UsbDevice::discard(UrbId id, int timeout_ms) {
  std::unique_lock lk(mu_);
  auto it = urbs_.find(id);
  if (it == urbs_.end()) return true;
  Urb& u = *it->second;
  if (!u.done) {
    lk.unlock();
    k_->ioctl(fd_, USBDEVFS_DISCARDURB, u.urb.get());  // EINVAL: already completed
    lk.lock();
    if (!wait_done(lk, u, timeout_ms)) return false;
  }
  urbs_.erase(id);
  return true;
}

size_t UsbDevice::in_flight() const {
  std::lock_guard lk(mu_);
  return size_t(std::count_if(urbs_.begin(), urbs_.end(),
                              [](const auto& e) { return !e.second->done; }));
}

void UsbDevice::clear_halt(uint8_t ep) {
  unsigned e = ep;
  if (int r = k_->ioctl(fd_, USBDEVFS_CLEAR_HALT, &e); r < 0)
    fail("clear halt of endpoint " + ep_hex(ep), -r, 0, 0);
}

void UsbDevice::reset() {
  if (int r = k_->ioctl(fd_, USBDEVFS_RESET, nullptr); r < 0) fail("reset", -r, 0, 0);
  // The reset unbound usbfs from our interfaces; a kernel driver may have taken them since.
  auto held = std::move(claims_);
  claims_.clear();
  for (auto& [ifnum, c] : held) {
    claim_interface(ifnum);
    // The driver to give it back to at release stays the one first detached.
    if (!c.detached.empty()) claims_[ifnum].detached = c.detached;
  }
}

}  // namespace hcq::os
