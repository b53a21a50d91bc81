#include "os/emulated_usb.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>
#include <thread>

namespace hcq::os {
namespace {

constexpr int kPending = 1;  // the status of a transfer not yet completed
constexpr const char* kDevices = "/sys/bus/usb/devices/";
// USB 2.0 9.3: bmRequestType's type and recipient fields.
constexpr uint8_t kTypeMask = 0x60, kTypeVendor = 0x40, kRecipientMask = 0x1f;
constexpr uint8_t kRecipientInterface = 1, kRecipientEndpoint = 2;

std::string fmt(const char* f, unsigned v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

int bus_of(const std::string& port) { return std::atoi(port.c_str()); }  // "2-1" -> 2

}  // namespace

// One plugged device: its usbfs node and its host-controller side (a thread per endpoint).
// Follows drivers/usb/core/devio.c; the comments name its functions.
class EmulatedUsbDevice final : public EmulatedNode,
                                public std::enable_shared_from_this<EmulatedUsbDevice> {
 public:
  EmulatedUsbDevice(std::weak_ptr<EmulatedKernel> k, std::string port, int devnum,
                    std::shared_ptr<UsbFunction> fn)
      : kernel_(std::move(k)), port_(std::move(port)), bus_(bus_of(port_)), devnum_(devnum),
        fn_(std::move(fn)), desc_(fn_->descriptor()) {
    for (auto& i : desc_.interfaces) ifaces_[i.number] = {i, 0, i.driver, -1};
  }
  ~EmulatedUsbDevice() override {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& [key, q] : queues_)
      if (q.worker.joinable()) q.worker.join();
  }

  std::string node_path() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "/dev/bus/usb/%03d/%03d", bus_, devnum_);
    return buf;
  }
  std::string sys_dir() const { return std::string(kDevices) + port_; }
  std::string iface_dir(uint8_t n) const {
    return sys_dir() + ":" + std::to_string(desc_.configuration) + "." + std::to_string(n);
  }

  void publish(EmulatedKernel& k) {
    const std::string d = sys_dir();
    k.add_file(d + "/busnum", std::to_string(bus_) + "\n");
    k.add_file(d + "/devnum", std::to_string(devnum_) + "\n");
    k.add_file(d + "/idVendor", fmt("%04x\n", desc_.vendor));
    k.add_file(d + "/idProduct", fmt("%04x\n", desc_.product));
    if (!desc_.manufacturer.empty()) k.add_file(d + "/manufacturer", desc_.manufacturer + "\n");
    if (!desc_.product_name.empty()) k.add_file(d + "/product", desc_.product_name + "\n");
    if (!desc_.serial.empty()) k.add_file(d + "/serial", desc_.serial + "\n");
    k.add_file(d + "/speed", desc_.speed + "\n");
    k.add_file(d + "/bConfigurationValue", fmt("%u\n", desc_.configuration));
    k.add_file(d + "/bNumInterfaces", fmt("%2u\n", unsigned(desc_.interfaces.size())));
    std::string uevent = "DEVTYPE=usb_device\nDRIVER=usb\nBUSNUM=";
    uevent += fmt("%03u\nDEVNUM=", unsigned(bus_));
    uevent += fmt("%03u\n", unsigned(devnum_));
    k.add_file(d + "/uevent", uevent);
    std::weak_ptr<EmulatedUsbDevice> self = weak_from_this();
    for (auto& i : desc_.interfaces) {
      const std::string id = iface_dir(i.number);
      const uint8_t n = i.number;
      k.add_file(id + "/bInterfaceNumber", fmt("%02x\n", i.number));
      k.add_file(id + "/bInterfaceClass", fmt("%02x\n", i.cls));
      k.add_file(id + "/bInterfaceSubClass", fmt("%02x\n", i.subclass));
      k.add_file(id + "/bInterfaceProtocol", fmt("%02x\n", i.protocol));
      k.add_generated_file(id + "/bAlternateSetting", [self, n] {
        auto d = self.lock();
        return d ? fmt("%2u\n", d->alt(n)) : std::string();
      });
      k.add_generated_file(id + "/bNumEndpoints", [self, n] {
        auto d = self.lock();
        return d ? fmt("%02x\n", d->endpoint_count(n)) : std::string();
      });
      k.add_generated_file(id + "/uevent", [self, n, i] {
        auto d = self.lock();
        std::string drv = d ? d->driver(n) : std::string();
        std::string ev = "DEVTYPE=usb_interface\n";
        if (!drv.empty()) ev += "DRIVER=" + drv + "\n";
        ev += fmt("INTERFACE=%u/", i.cls);
        ev += fmt("%u/", i.subclass);
        ev += fmt("%u\n", i.protocol);
        return ev;
      });
    }
    k.add_node(node_path(), shared_from_this());
  }

  // The device leaves the bus (usb_disconnect, then devio.c usbdev_remove).
  void unplug() {
    {
      std::lock_guard lk(mu_);
      drop_off();
    }
    if (auto k = kernel_.lock()) {
      k->remove(node_path());
      k->remove(sys_dir());
      for (auto& i : desc_.interfaces) k->remove(iface_dir(i.number));
    }
  }

  std::string driver(uint8_t n) {
    std::lock_guard lk(mu_);
    auto it = ifaces_.find(n);
    return it == ifaces_.end() ? std::string() : it->second.driver;
  }
  unsigned alt(uint8_t n) {
    std::lock_guard lk(mu_);
    auto it = ifaces_.find(n);
    return it == ifaces_.end() ? 0 : it->second.alt;
  }
  unsigned endpoint_count(uint8_t n) {
    std::lock_guard lk(mu_);
    auto it = ifaces_.find(n);
    return it == ifaces_.end() ? 0 : unsigned(current_alt(it->second).endpoints.size());
  }
  int clear_halts() {
    std::lock_guard lk(mu_);
    return clear_halts_;
  }
  int resets() {
    std::lock_guard lk(mu_);
    return resets_;
  }

  void on_open(int fd) override {
    std::lock_guard lk(mu_);
    fds_[fd] = {};
  }
  // usbdev_release: releases the fd's interfaces and kills its URBs.
  void on_close(int fd) override {
    std::lock_guard lk(mu_);
    for (auto& [n, f] : ifaces_)
      if (f.owner == fd) f.owner = -1, f.driver.clear();
    kill_urbs(fd, -1);
    fds_.erase(fd);
  }

  int poll(int fd, short) override {
    // usbdev_poll: POLLOUT while a completed URB waits to be reaped; HUP and ERR once the
    // device is gone.
    std::lock_guard lk(mu_);
    int r = 0;
    auto it = fds_.find(fd);
    if (it != fds_.end() && !it->second.completed.empty()) r |= POLLOUT | POLLWRNORM;
    if (!connected_) r |= POLLHUP | POLLERR;
    return r;
  }

  int ioctl(int fd, unsigned long req, void* arg) override {
    std::unique_lock lk(mu_);
    // Reaping works after a disconnect (usbdev_do_ioctl; USBDEVFS_CAP_REAP_AFTER_DISCONNECT).
    if (req == USBDEVFS_REAPURB || req == USBDEVFS_REAPURBNDELAY)
      return reap(fd, static_cast<void**>(arg), req == USBDEVFS_REAPURB, lk);
    if (!connected_) return -ENODEV;
    switch (req) {
      case USBDEVFS_CONTROL: return control(fd, *static_cast<usbdevfs_ctrltransfer*>(arg), lk);
      case USBDEVFS_BULK: return bulk(fd, *static_cast<usbdevfs_bulktransfer*>(arg), lk);
      case USBDEVFS_SUBMITURB: return submit(fd, static_cast<usbdevfs_urb*>(arg));
      case USBDEVFS_DISCARDURB: return discard(fd, static_cast<usbdevfs_urb*>(arg));
      case USBDEVFS_CLAIMINTERFACE: return claim(fd, *static_cast<unsigned*>(arg));
      case USBDEVFS_RELEASEINTERFACE: return release(fd, *static_cast<unsigned*>(arg));
      case USBDEVFS_SETINTERFACE: return set_interface(fd, *static_cast<usbdevfs_setinterface*>(arg), lk);
      case USBDEVFS_CLEAR_HALT: return clear_halt(fd, *static_cast<unsigned*>(arg), lk);
      case USBDEVFS_RESET: return reset(lk);
      case USBDEVFS_GETDRIVER: return get_driver(*static_cast<usbdevfs_getdriver*>(arg));
      case USBDEVFS_IOCTL: return driver_ioctl(*static_cast<usbdevfs_ioctl*>(arg));
      case USBDEVFS_ALLOC_STREAMS: return alloc_streams(fd, static_cast<usbdevfs_streams*>(arg));
      case USBDEVFS_GET_CAPABILITIES:
        *static_cast<uint32_t*>(arg) = USBDEVFS_CAP_ZERO_PACKET | USBDEVFS_CAP_BULK_CONTINUATION |
                                       USBDEVFS_CAP_NO_PACKET_SIZE_LIM |
                                       USBDEVFS_CAP_REAP_AFTER_DISCONNECT;
        return 0;
      default: return -ENOTTY;
    }
  }

 private:
  struct Transfer {
    int fd = -1;
    uint8_t ep = 0;  // endpoint address; a control transfer's is 0x00 or 0x80
    bool control = false;
    UsbSetup setup{};
    unsigned stream = 0;
    std::vector<uint8_t> data;     // the kernel's copy of the buffer
    usbdevfs_urb* user = nullptr;  // an URB's caller-side struct; null: a synchronous transfer
    int ifnum = -1;
    int status = kPending;
    size_t actual = 0;
    bool started = false, killed = false;
    bool in() const { return ep & 0x80; }
  };
  struct Iface {
    UsbInterfaceDesc desc;
    uint8_t alt = 0;
    std::string driver;
    int owner = -1;  // the fd that claimed it (driver "usbfs")
  };
  struct FdState {
    std::deque<std::shared_ptr<Transfer>> completed;
  };
  struct Queue {
    std::deque<std::shared_ptr<Transfer>> q;
    std::thread worker;
  };

  static const UsbAltSettingDesc& current_alt(const Iface& f) {
    static const UsbAltSettingDesc none;
    for (auto& a : f.desc.alts)
      if (a.alt == f.alt) return a;
    return none;
  }
  // findintfep: the interface with `ep` in any alternate setting, or -ENOENT.
  int interface_of(unsigned ep) const {
    if (ep & ~0x8fu) return -EINVAL;
    for (auto& [n, f] : ifaces_)
      for (auto& a : f.desc.alts)
        for (auto& e : a.endpoints)
          if (e.address == ep) return n;
    return -ENOENT;
  }
  // The endpoint in its interface's current alternate setting (ep_to_host_endpoint).
  const UsbEndpointDesc* endpoint(uint8_t ep) const {
    for (auto& [n, f] : ifaces_)
      for (auto& e : current_alt(f).endpoints)
        if (e.address == ep) return &e;
    return nullptr;
  }
  // claimintf: usb_driver_claim_interface fails with EBUSY while a driver is bound.
  int claim(int fd, unsigned n) {
    if (n >= 32) return -EINVAL;
    auto it = ifaces_.find(uint8_t(n));
    if (it == ifaces_.end()) return -ENOENT;
    if (it->second.owner == fd) return 0;
    if (!it->second.driver.empty()) return -EBUSY;
    it->second.driver = "usbfs";
    it->second.owner = fd;
    return 0;
  }
  // checkintf: using an interface the fd has not claimed claims it.
  int checkintf(int fd, unsigned n) { return claim(fd, n); }
  // releaseintf, then destroy_async_on_interface.
  int release(int fd, unsigned n) {
    if (n >= 32) return -EINVAL;
    auto it = ifaces_.find(uint8_t(n));
    if (it == ifaces_.end()) return -ENOENT;
    if (it->second.owner != fd) return -EINVAL;
    it->second.owner = -1;
    it->second.driver.clear();
    kill_urbs(fd, int(n));
    return 0;
  }

  void complete(const std::shared_ptr<Transfer>& t, int status) {
    t->status = status;
    if (t->user) {
      auto it = fds_.find(t->fd);
      if (it != fds_.end()) it->second.completed.push_back(t);
    }
    cv_.notify_all();
  }
  // Removes `t` from its queue if it has not started; else marks it killed for its worker.
  void kill(const std::shared_ptr<Transfer>& t, int status) {
    if (t->started) {
      t->killed = true;
      cv_.notify_all();
      return;
    }
    auto& q = queues_[t->control ? 0 : t->ep].q;
    q.erase(std::find(q.begin(), q.end(), t));
    complete(t, status);
  }
  // The fd's pending URBs (on interface ifnum; -1: all) end with ENOENT (usb_kill_urb).
  void kill_urbs(int fd, int ifnum) {
    std::vector<std::shared_ptr<Transfer>> hit;
    for (auto& [key, q] : queues_)
      for (auto& t : q.q)
        if (t->user && t->fd == fd && (ifnum < 0 || t->ifnum == ifnum)) hit.push_back(t);
    for (auto& t : hit) kill(t, -ENOENT);
  }
  // Every transfer ends with ESHUTDOWN (usb_hcd_flush_endpoint), the device answers no more.
  void drop_off() {
    if (!connected_) return;
    connected_ = false;
    for (auto& [key, q] : queues_) {
      for (auto& t : q.q) complete(t, -ESHUTDOWN);
      q.q.clear();
    }
    cv_.notify_all();
  }

  void enqueue(const std::shared_ptr<Transfer>& t) {
    const uint8_t key = t->control ? 0 : t->ep;
    Queue& q = queues_[key];
    q.q.push_back(t);
    if (!q.worker.joinable()) q.worker = std::thread([this, key] { work(key); });
    cv_.notify_all();
  }

  // The host controller for one endpoint: the head transfer goes to the device until it is
  // answered; transfers behind it wait (in order per endpoint).
  void work(uint8_t key) {
    std::unique_lock lk(mu_);
    auto& q = queues_[key].q;
    for (;;) {
      cv_.wait(lk, [&] { return stopping_ || !q.empty(); });
      if (stopping_) return;
      auto t = q.front();
      if (t->killed) {
        q.pop_front();
        complete(t, -ENOENT);
        continue;
      }
      if (!t->control && halted_.count(t->ep)) {  // a halted endpoint STALLs every packet
        q.pop_front();
        complete(t, -EPIPE);
        continue;
      }
      t->started = true;
      lk.unlock();
      UsbReply r = call(*t);
      lk.lock();
      if (t->status != kPending) continue;  // the device dropped off meanwhile
      switch (r.kind) {
        case UsbReply::Kind::Nak:
          cv_.wait_for(lk, std::chrono::milliseconds(1),
                       [&] { return stopping_ || t->killed || t->status != kPending; });
          break;
        case UsbReply::Kind::Stall:
          if (!t->control) halted_.insert(t->ep);
          q.pop_front();
          complete(t, -EPIPE);
          break;
        case UsbReply::Kind::Disconnect:
          lk.unlock();
          unplug();
          lk.lock();
          break;
        case UsbReply::Kind::Done:
          if (r.delay.count() > 0 &&
              cv_.wait_for(lk, r.delay, [&] { return stopping_ || t->killed || t->status != kPending; }))
            break;  // killed (handled at the top), dropped off or stopping
          q.pop_front();
          t->actual = std::min(r.length, t->data.size());
          // USBDEVFS_URB_SHORT_NOT_OK: a short IN URB fails (URB_SHORT_NOT_OK, EREMOTEIO).
          complete(t, t->user && (t->user->flags & USBDEVFS_URB_SHORT_NOT_OK) && t->in() &&
                              t->actual < t->data.size()
                          ? -EREMOTEIO
                          : 0);
          break;
      }
    }
  }
  UsbReply call(Transfer& t) {
    std::span<uint8_t> d(t.data);
    if (t.control) return fn_->control(t.setup, d);
    return t.in() ? fn_->bulk_in(t.ep, t.stream, d) : fn_->bulk_out(t.ep, t.stream, d);
  }

  // usbfs_start_wait_urb: waits the timeout (0: forever), then kills the transfer; one that
  // completed before it was killed counts as completed.
  int wait_sync(const std::shared_ptr<Transfer>& t, unsigned timeout_ms, void* user_data,
                std::unique_lock<std::mutex>& lk) {
    enqueue(t);
    auto done = [&] { return t->status != kPending; };
    if (timeout_ms == 0)
      cv_.wait(lk, done);
    else if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), done)) {
      kill(t, -ENOENT);
      cv_.wait(lk, done);  // bounded by the model's answer to the transfer in progress
      if (t->status == -ENOENT) return -ETIMEDOUT;
    }
    if (t->status < 0) return t->status;
    if (t->in() && t->actual) std::memcpy(user_data, t->data.data(), t->actual);
    return int(t->actual);
  }

  // proc_control / check_ctrlrecip.
  int control(int fd, const usbdevfs_ctrltransfer& c, std::unique_lock<std::mutex>& lk) {
    if ((c.bRequestType & kTypeMask) != kTypeVendor) {
      if ((c.bRequestType & kRecipientMask) == kRecipientInterface) {
        if (int r = checkintf(fd, c.wIndex & 0xff)) return r;
      } else if ((c.bRequestType & kRecipientMask) == kRecipientEndpoint) {
        int n = interface_of(c.wIndex & 0xff);
        if (n < 0) return n;
        if (int r = checkintf(fd, unsigned(n))) return r;
      }
    }
    if (c.wLength > 4096) return -EINVAL;  // PAGE_SIZE
    auto t = std::make_shared<Transfer>();
    t->fd = fd;
    t->control = true;
    t->ep = c.bRequestType & 0x80;
    t->setup = {c.bRequestType, c.bRequest, c.wValue, c.wIndex};
    t->data.resize(c.wLength);
    if (!t->in() && c.wLength) std::memcpy(t->data.data(), c.data, c.wLength);
    return wait_sync(t, c.timeout, c.data, lk);
  }

  // proc_bulk.
  int bulk(int fd, const usbdevfs_bulktransfer& b, std::unique_lock<std::mutex>& lk) {
    int n = interface_of(b.ep);
    if (n < 0) return n;
    if (int r = checkintf(fd, unsigned(n))) return r;
    if (!endpoint(uint8_t(b.ep))) return -EINVAL;
    auto t = std::make_shared<Transfer>();
    t->fd = fd;
    t->ep = uint8_t(b.ep);
    t->ifnum = n;
    t->data.resize(b.len);
    if (!t->in() && b.len) std::memcpy(t->data.data(), b.data, b.len);
    return wait_sync(t, b.timeout, b.data, lk);
  }

  // proc_do_submiturb, for bulk and interrupt URBs (control and isochronous URBs are not
  // emulated: EINVAL).
  int submit(int fd, usbdevfs_urb* u) {
    constexpr unsigned kFlags = USBDEVFS_URB_SHORT_NOT_OK | USBDEVFS_URB_BULK_CONTINUATION |
                                USBDEVFS_URB_NO_FSBR | USBDEVFS_URB_ZERO_PACKET |
                                USBDEVFS_URB_NO_INTERRUPT;
    if (u->flags & ~kFlags) return -EINVAL;
    if (u->buffer_length < 0 || (u->buffer_length > 0 && !u->buffer)) return -EINVAL;
    if (u->type != USBDEVFS_URB_TYPE_BULK && u->type != USBDEVFS_URB_TYPE_INTERRUPT) return -EINVAL;
    int n = interface_of(u->endpoint);
    if (n < 0) return n;
    if (int r = checkintf(fd, unsigned(n))) return r;
    if (!endpoint(u->endpoint)) return -ENOENT;
    if (u->stream_id && u->stream_id > streams_[u->endpoint]) return -EINVAL;
    auto t = std::make_shared<Transfer>();
    t->fd = fd;
    t->ep = u->endpoint;
    t->ifnum = n;
    t->stream = u->stream_id;
    t->user = u;
    t->data.resize(size_t(u->buffer_length));
    if (!t->in() && u->buffer_length) std::memcpy(t->data.data(), u->buffer, t->data.size());
    enqueue(t);
    return 0;
  }

  // proc_unlinkurb: the URB completes with ENOENT and is reaped as usual.
  int discard(int fd, usbdevfs_urb* u) {
    for (auto& [key, q] : queues_)
      for (auto& t : q.q)
        if (t->user == u && t->fd == fd) {
          kill(std::shared_ptr<Transfer>(t), -ENOENT);
          return 0;
        }
    return -EINVAL;
  }

  // proc_reapurb(nonblock) / processcompl: the data reaches the caller's buffer only now.
  int reap(int fd, void** out, bool block, std::unique_lock<std::mutex>& lk) {
    auto it = fds_.find(fd);
    if (it == fds_.end()) return -EBADF;
    auto& done = it->second.completed;
    if (block) cv_.wait(lk, [&] { return !done.empty() || !connected_; });
    if (done.empty()) return connected_ ? -EAGAIN : -ENODEV;
    auto t = done.front();
    done.pop_front();
    usbdevfs_urb* u = t->user;
    if (t->in() && t->actual) std::memcpy(u->buffer, t->data.data(), t->actual);
    u->status = t->status;
    u->actual_length = int(t->actual);
    u->error_count = 0;
    *out = u;
    return 0;
  }

  // proc_setintf: the interface's URBs are killed, then usb_set_interface.
  int set_interface(int fd, const usbdevfs_setinterface& s, std::unique_lock<std::mutex>& lk) {
    if (int r = checkintf(fd, s.interface)) return r;
    Iface& f = ifaces_[uint8_t(s.interface)];
    auto a = std::find_if(f.desc.alts.begin(), f.desc.alts.end(),
                          [&](const UsbAltSettingDesc& x) { return x.alt == s.altsetting; });
    if (a == f.desc.alts.end()) return -EINVAL;
    kill_urbs(fd, int(s.interface));
    f.alt = uint8_t(s.altsetting);
    for (auto& e : a->endpoints) halted_.erase(e.address), streams_.erase(e.address);
    lk.unlock();
    fn_->set_alt_setting(uint8_t(s.interface), uint8_t(s.altsetting));
    lk.lock();
    return 0;
  }

  // proc_clearhalt: usb_clear_halt sends CLEAR_FEATURE(ENDPOINT_HALT) and resets the toggle.
  int clear_halt(int fd, unsigned ep, std::unique_lock<std::mutex>& lk) {
    int n = interface_of(ep);
    if (n < 0) return n;
    if (int r = checkintf(fd, unsigned(n))) return r;
    halted_.erase(uint8_t(ep));
    clear_halts_++;
    lk.unlock();
    fn_->clear_halt(uint8_t(ep));
    lk.lock();
    return 0;
  }

  // usb_reset_device: usbfs has no pre_reset/post_reset, so its interfaces are unbound
  // (their URBs killed, alternate setting 0) and, after the reset, offered to the kernel
  // drivers again (usb_unbind_and_rebind_marked_interfaces).
  int reset(std::unique_lock<std::mutex>& lk) {
    resets_++;
    for (auto& [n, f] : ifaces_) {
      if (f.owner < 0) continue;
      kill_urbs(f.owner, n);
      f.owner = -1;
      f.alt = 0;
      f.driver = f.desc.driver;
    }
    halted_.clear();
    streams_.clear();
    lk.unlock();
    fn_->reset();
    lk.lock();
    return 0;
  }

  int get_driver(usbdevfs_getdriver& g) {
    auto it = ifaces_.find(uint8_t(g.interface));
    if (it == ifaces_.end() || it->second.driver.empty()) return -ENODATA;
    std::snprintf(g.driver, sizeof g.driver, "%s", it->second.driver.c_str());
    return 0;
  }

  // proc_ioctl: USBDEVFS_DISCONNECT / USBDEVFS_CONNECT of the interface's kernel driver.
  int driver_ioctl(const usbdevfs_ioctl& c) {
    auto it = c.ifno < 0 ? ifaces_.end() : ifaces_.find(uint8_t(c.ifno));
    if (it == ifaces_.end()) return -EINVAL;
    Iface& f = it->second;
    switch (c.ioctl_code) {
      case USBDEVFS_DISCONNECT:
        if (f.driver.empty()) return -ENODATA;
        if (f.owner >= 0) kill_urbs(f.owner, c.ifno), f.owner = -1;  // usbfs driver_disconnect
        f.driver.clear();
        return 0;
      case USBDEVFS_CONNECT:
        if (!f.driver.empty()) return -EBUSY;
        f.driver = f.desc.driver;  // device_attach: 1 when a driver bound, else 0
        return f.driver.empty() ? 0 : 1;
      default: return -ENOTTY;
    }
  }

  // proc_alloc_streams: every endpoint claimed, bulk and able to stream; the host grants at
  // most what the endpoints support.
  int alloc_streams(int fd, usbdevfs_streams* s) {
    if (s->num_streams == 0 || s->num_eps == 0) return -EINVAL;
    unsigned granted = s->num_streams;
    for (unsigned i = 0; i < s->num_eps; i++) {
      int n = interface_of(s->eps[i]);
      if (n < 0) return n;
      if (int r = checkintf(fd, unsigned(n))) return r;
      const UsbEndpointDesc* e = endpoint(s->eps[i]);
      if (!e || e->attributes != 2 || e->max_streams == 0) return -EINVAL;
      granted = std::min<unsigned>(granted, e->max_streams);
    }
    for (unsigned i = 0; i < s->num_eps; i++) streams_[s->eps[i]] = granted;
    return int(granted);
  }

  std::weak_ptr<EmulatedKernel> kernel_;
  const std::string port_;
  const int bus_, devnum_;
  std::shared_ptr<UsbFunction> fn_;
  const UsbDeviceDesc desc_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = true, stopping_ = false;
  std::map<uint8_t, Iface> ifaces_;
  std::set<uint8_t> halted_;
  std::map<uint8_t, unsigned> streams_;
  std::map<int, FdState> fds_;
  std::map<uint8_t, Queue> queues_;  // by endpoint address; control transfers at 0
  int clear_halts_ = 0, resets_ = 0;
};

EmulatedUsb::EmulatedUsb(std::shared_ptr<EmulatedKernel> kernel) : kernel_(std::move(kernel)) {}
EmulatedUsb::~EmulatedUsb() = default;

void EmulatedUsb::plug(const std::string& port, int devnum, std::shared_ptr<UsbFunction> fn) {
  auto d = std::make_shared<EmulatedUsbDevice>(kernel_, port, devnum, std::move(fn));
  const int bus = bus_of(port);
  const std::string hub = std::string(kDevices) + "usb" + std::to_string(bus);
  if (!kernel_->read_file(hub + "/busnum")) {
    // The bus's root hub (drivers/usb/core/hcd.c: vendor 1d6b, product 0003 for USB 3).
    kernel_->add_file(hub + "/busnum", std::to_string(bus) + "\n");
    kernel_->add_file(hub + "/devnum", "1\n");
    kernel_->add_file(hub + "/idVendor", "1d6b\n");
    kernel_->add_file(hub + "/idProduct", "0003\n");
    kernel_->add_file(hub + "/product", "xHCI Host Controller\n");
    kernel_->add_file(hub + "/speed", "5000\n");
    kernel_->add_file(hub + "/bConfigurationValue", "1\n");
    const std::string hi = std::string(kDevices) + std::to_string(bus) + "-0:1.0";
    kernel_->add_file(hi + "/bInterfaceNumber", "00\n");
    kernel_->add_file(hi + "/bInterfaceClass", "09\n");
    kernel_->add_file(hi + "/uevent", "DEVTYPE=usb_interface\nDRIVER=hub\nINTERFACE=9/0/3\n");
  }
  d->publish(*kernel_);
  std::lock_guard lk(mu_);
  devices_[port] = std::move(d);
}

std::shared_ptr<EmulatedUsbDevice> EmulatedUsb::device(const std::string& port) const {
  std::lock_guard lk(mu_);
  auto it = devices_.find(port);
  if (it == devices_.end()) throw std::out_of_range("no emulated USB device at " + port);
  return it->second;
}

void EmulatedUsb::unplug(const std::string& port) { device(port)->unplug(); }
std::string EmulatedUsb::driver(const std::string& port, uint8_t ifnum) const {
  return device(port)->driver(ifnum);
}
int EmulatedUsb::clear_halts(const std::string& port) const { return device(port)->clear_halts(); }
int EmulatedUsb::resets(const std::string& port) const { return device(port)->resets(); }

}  // namespace hcq::os
