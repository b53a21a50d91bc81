// The verbs transport: rdma/transport.hpp over libibverbs (rdma-core) with reliable-connected
// queue pairs, set up over TCP as rdma-core's ibv_rc_pingpong does (each side sends its LID,
// queue pair number, PSN and GID; both move INIT -> RTR -> RTS). docs/rdma.md has the
// protocol. Checked in QEMU guests with Soft-RoCE (rdma_rxe), scripts/qemu_rdma_test.sh.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "core/deadline.hpp"
#include "core/ipc.hpp"
#include "rdma/connection_base.hpp"
#include "rdma/verbs.hpp"

namespace hcq::rdma {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kQueueDepth = 256;  // send and receive work requests per queue pair
constexpr int kReceives = 64;     // receives kept posted for immediates
constexpr uint32_t kSetupMagic = 0x31414d44;  // "DMA1"
constexpr uint32_t kMaxAdvertised = 16;

std::string absent_reason(const std::string& why) {
  return "this kernel has no RDMA support (" + why + ")";
}
[[noreturn]] void no_rdma(const std::string& why) {
  throw OsError("rdma: " + absent_reason(why), ENOSYS);
}
constexpr const char* kNoSysfs = "/sys/class/infiniband is absent";

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

bool gid_zero(const ibv_gid& g) {
  static const ibv_gid zero{};
  return std::memcmp(g.raw, zero.raw, 16) == 0;
}

const char* gid_type_text(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
  }
  return "unknown";
}

const char* state_text(ibv_port_state s) {
  return ibv_port_state_str(s);
}

// The device list, or the one-line reason there is none.
struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  DeviceList() {
    if (::access("/sys/class/infiniband", F_OK) != 0)
      no_rdma(kNoSysfs);
    errno = 0;
    list = ibv_get_device_list(&n);
    if (!list) {
      if (errno == ENOSYS) no_rdma("ibv_get_device_list");
      throw OsError("rdma: ibv_get_device_list", errno);
    }
  }
  ~DeviceList() {
    if (list) ibv_free_device_list(list);
  }
};

struct Context {
  ibv_context* ctx = nullptr;
  explicit Context(ibv_device* d) {
    ctx = ibv_open_device(d);
    if (!ctx) throw OsError(std::string("rdma: ibv_open_device ") + ibv_get_device_name(d), errno);
  }
  ~Context() {
    if (ctx) ibv_close_device(ctx);
  }
};

std::vector<GidInfo> gids_of(ibv_context* ctx, uint8_t port, int table_len) {
  std::vector<GidInfo> out;
  for (int i = 0; i < table_len; i++) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, port, uint32_t(i), &e, 0) != 0) continue;  // empty entry
    if (gid_zero(e.gid)) continue;
    out.push_back({i, gid_text(e.gid), gid_type_text(e.gid_type)});
  }
  return out;
}

// RoCE v2 on an IPv4-mapped address first (what routes between machines), then any RoCE v2,
// then the first entry (InfiniBand's index 0).
int pick_gid(const std::vector<GidInfo>& gids) {
  for (auto& g : gids)
    if (g.type == "RoCE v2" && g.gid.rfind("::ffff:", 0) == 0) return g.index;
  for (auto& g : gids)
    if (g.type == "RoCE v2") return g.index;
  return gids.empty() ? -1 : gids.front().index;
}

// What the two sides send each other over TCP before the queue pairs connect.
struct SetupRecord {
  uint32_t magic;
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu;  // enum ibv_mtu
  uint8_t reserved;
  uint8_t gid[16];
};
// What follows on the same socket: region advertisements.
struct AdvertRecord {
  uint64_t addr, length;
  uint32_t key, reserved;
};

// Whole records on a socket with a deadline; errors are one line naming the address.
void send_all(int fd, const void* p, size_t n, const std::string& who) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      throw ConnectionError("rdma: " + who + ": send: " + std::strerror(errno));
    }
    c += k;
    n -= size_t(k);
  }
}
void recv_all(int fd, void* p, size_t n, Clock::time_point until, const std::string& who) {
  char* c = static_cast<char*>(p);
  while (n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    pollfd pf{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pf, 1, int(left.count())) == 0)
      throw ConnectionError("rdma: " + who + ": the peer sent no setup in time");
    ssize_t k = ::recv(fd, c, n, 0);
    if (k == 0) throw ConnectionError("rdma: " + who + ": the peer closed during setup");
    if (k < 0) {
      if (errno == EINTR) continue;
      throw ConnectionError("rdma: " + who + ": recv: " + std::strerror(errno));
    }
    c += k;
    n -= size_t(k);
  }
}

// "HOST:PORT" (connect) or ":PORT" (listen): the host and the port, or an exact error.
std::pair<std::string, std::string> split_address(const std::string& a) {
  size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon + 1 == a.size() ||
      a.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    throw InvalidInput("rdma: address '" + a + "' is not HOST:PORT or :PORT");
  std::string host = a.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, a.substr(colon + 1)};
}

int tcp_listen_accept(const std::string& address, std::chrono::milliseconds timeout) {
  auto [host, port] = split_address(address);
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw OsError("rdma: socket", errno);
  int one = 1, zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 peers too
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(uint16_t(std::stoul(port)));
  sa.sin6_addr = in6addr_any;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 1) != 0) {
    int e = errno;
    ::close(fd);
    throw OsError("rdma: listen on port " + port, e);
  }
  pollfd pf{fd, POLLIN, 0};
  int r = ::poll(&pf, 1, int(timeout.count()));
  int c = r > 0 ? ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  ::close(fd);
  if (c < 0)
    throw ConnectionError("rdma: no peer connected to port " + port + " in " +
                          std::to_string(timeout.count()) + " ms");
  return c;
}

int tcp_connect(const std::string& address, std::chrono::milliseconds timeout) {
  auto [host, port] = split_address(address);
  auto until = deadline_after(timeout);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (int e = ::getaddrinfo(host.empty() ? "localhost" : host.c_str(), port.c_str(), &hints, &res))
    throw ConnectionError("rdma: " + address + ": " + ::gai_strerror(e));
  std::string last = "no address";
  while (true) {  // the listener may not be up yet: retry until the deadline
    for (addrinfo* a = res; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        ::freeaddrinfo(res);
        return fd;
      }
      last = std::strerror(errno);
      ::close(fd);
    }
    if (Clock::now() >= until) break;
    std::this_thread::sleep_for(50ms);
  }
  ::freeaddrinfo(res);
  throw ConnectionError("rdma: cannot connect to " + address + " in " +
                        std::to_string(timeout.count()) + " ms: " + last);
}

struct Shared {  // what the endpoint and its regions and connections hold
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  int gid_index = 0;
  ibv_gid gid{};
  ibv_port_attr port_attr{};
  std::string describe;
  ~Shared() {
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

constexpr uint64_t kDmaBufMagic = 0x444d4142;  // DMA_BUF_MAGIC, include/uapi/linux/magic.h
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

class VerbsRegion : public Region {
 public:
  VerbsRegion(std::shared_ptr<Shared> s, ibv_mr* mr, uint64_t addr, std::byte* host,
              std::string how)
      : s_(std::move(s)), mr_(mr) {
    addr_ = addr;
    length_ = mr->length;
    key_ = mr->rkey;
    lkey_ = mr->lkey;
    host_ = host;
    how_ = std::move(how);
  }
  ~VerbsRegion() override { ibv_dereg_mr(mr_); }
  uint32_t lkey() const { return lkey_; }
  void keep(std::shared_ptr<std::byte[]> staging) { staging_ = std::move(staging); }

 private:
  std::shared_ptr<Shared> s_;
  ibv_mr* mr_;
  std::shared_ptr<std::byte[]> staging_;  // host staging: freed after deregistration
  uint32_t lkey_ = 0;
};

class VerbsConnection : public ConnectionBase {
 public:
  VerbsConnection(std::shared_ptr<Shared> s, int fd, std::string name,
                  std::chrono::milliseconds timeout)
      : ConnectionBase(std::move(name)), s_(std::move(s)), fd_(fd) {
    try {
      setup(timeout);
    } catch (...) {
      teardown();
      throw;
    }
    progress_ = std::thread([this] { progress_loop(); });
  }
  ~VerbsConnection() override {
    stop_ = true;
    if (progress_.joinable()) progress_.join();
    teardown();
  }

  void write(const Region& local, uint64_t local_offset, const RemoteRegion& remote,
             uint64_t remote_offset, uint64_t size, Signal& done, uint64_t value,
             std::chrono::milliseconds timeout) override {
    post(IBV_WR_RDMA_WRITE, local, local_offset, remote, remote_offset, size, 0, done, value,
         timeout);
  }
  void write_with_immediate(const Region& local, uint64_t local_offset,
                            const RemoteRegion& remote, uint64_t remote_offset, uint64_t size,
                            uint32_t imm, Signal& done, uint64_t value,
                            std::chrono::milliseconds timeout) override {
    post(IBV_WR_RDMA_WRITE_WITH_IMM, local, local_offset, remote, remote_offset, size, imm, done,
         value, timeout);
  }
  void read(const Region& local, uint64_t local_offset, const RemoteRegion& remote,
            uint64_t remote_offset, uint64_t size, Signal& done, uint64_t value,
            std::chrono::milliseconds timeout) override {
    post(IBV_WR_RDMA_READ, local, local_offset, remote, remote_offset, size, 0, done, value,
         timeout);
  }

  void advertise(const RemoteRegion& r) override {
    std::lock_guard l(send_mu_);
    if (advertised_ == kMaxAdvertised)
      throw InvalidInput("rdma: at most " + std::to_string(kMaxAdvertised) +
                         " regions are advertised on one connection");
    AdvertRecord a{r.addr, r.length, r.key, 0};
    send_all(fd_, &a, sizeof a, name_);
    advertised_++;
  }

  RemoteRegion peer_region(uint32_t index, std::chrono::milliseconds timeout) override {
    std::unique_lock l(mu_);
    if (!cv_.wait_for(l, bounded_wait(timeout), [&] { return peer_regions_.size() > index || !error_.empty(); }))
      throw TimeoutError("rdma: connection '" + name_ + "': the peer advertised no region " +
                         std::to_string(index) + " in " + std::to_string(timeout.count()) +
                         " ms");
    if (peer_regions_.size() <= index) throw_error();
    return peer_regions_[index];
  }

private:
  struct Pending {
    uint64_t seq;
    Signal* done;
    uint64_t value;
    std::string what;  // "write of 4096 bytes at 0x..." for errors
  };

  void setup(std::chrono::milliseconds timeout) {
    auto until = deadline_after(timeout);
    channel_ = ibv_create_comp_channel(s_->ctx);
    if (!channel_) throw OsError("rdma: ibv_create_comp_channel", errno);
    // Non-blocking: the progress thread polls its fd with a timeout.
    ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    cq_ = ibv_create_cq(s_->ctx, 2 * kQueueDepth, nullptr, channel_, 0);
    if (!cq_) throw OsError("rdma: ibv_create_cq", errno);
    if (int e = ibv_req_notify_cq(cq_, 0)) throw OsError("rdma: ibv_req_notify_cq", e);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = kQueueDepth;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    qp_ = ibv_create_qp(s_->pd, &ia);
    if (!qp_) throw OsError("rdma: ibv_create_qp", errno);

    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = s_->port;
    a.qp_access_flags = kAccess;
    if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                           IBV_QP_ACCESS_FLAGS))
      throw OsError("rdma: queue pair to INIT", e);
    for (int i = 0; i < kReceives; i++) post_receive();

    SetupRecord mine{};
    mine.magic = kSetupMagic;
    mine.qpn = qp_->qp_num;
    mine.psn = std::random_device{}() & 0xffffff;
    mine.lid = s_->port_attr.lid;
    mine.mtu = uint8_t(s_->port_attr.active_mtu);
    std::memcpy(mine.gid, s_->gid.raw, 16);
    send_all(fd_, &mine, sizeof mine, name_);
    SetupRecord peer{};
    recv_all(fd_, &peer, sizeof peer, until, name_);
    if (peer.magic != kSetupMagic)
      throw ConnectionError("rdma: " + name_ + ": the peer is not an hcq rdma endpoint (magic " +
                            hex(peer.magic) + ")");

    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = ibv_mtu(std::min(peer.mtu, mine.mtu));
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = s_->port;
    a.ah_attr.dlid = peer.lid;
    // RoCE has no LIDs: the route is the GID (a global header on every packet).
    if (s_->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET || peer.lid == 0) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
      a.ah_attr.grh.sgid_index = uint8_t(s_->gid_index);
      a.ah_attr.grh.hop_limit = 64;
    }
    if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                           IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      throw OsError("rdma: queue pair to RTR", e);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;  // 4.096 us * 2^14: 67 ms per try
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = mine.psn;
    a.max_rd_atomic = 16;
    if (int e = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                           IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                           IBV_QP_MAX_QP_RD_ATOMIC))
      throw OsError("rdma: queue pair to RTS", e);
    // Both sides are in RTS before either posts: one byte each way.
    char sync = 1;
    send_all(fd_, &sync, 1, name_);
    recv_all(fd_, &sync, 1, until, name_);
  }

  void teardown() {
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    if (channel_) ibv_destroy_comp_channel(channel_);
    qp_ = nullptr;
    cq_ = nullptr;
    channel_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void post_receive() {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = 0;
    if (int e = ibv_post_recv(qp_, &wr, &bad)) throw OsError("rdma: ibv_post_recv", e);
  }

  void failed() override { pending_.clear(); }

  void post(ibv_wr_opcode op, const Region& local, uint64_t local_offset,
            const RemoteRegion& remote, uint64_t remote_offset, uint64_t size, uint32_t imm,
            Signal& done, uint64_t value, std::chrono::milliseconds timeout) {
    check_local(local, local_offset, size);
    auto until = deadline_after(timeout);
    // post_mu_ keeps work requests in sequence order on the queue pair (completions are
    // matched by order); mu_ is not held across ibv_post_send, which on rxe runs the
    // requester in this thread and may take a while, so the progress thread can still fail
    // the connection meanwhile.
    std::unique_lock pl(post_mu_, std::defer_lock);
    if (!pl.try_lock_until(until))
      throw TimeoutError("rdma: connection '" + name_ + "': no room to post for " +
                         std::to_string(timeout.count()) + " ms");
    uint64_t seq;
    {
      std::unique_lock l(mu_);
      while (true) {
        if (!error_.empty()) throw_error();
        if (pending_.size() < size_t(kQueueDepth)) break;
        if (Clock::now() >= until)
          throw TimeoutError("rdma: connection '" + name_ + "': no room to post for " +
                             std::to_string(timeout.count()) + " ms");
        cv_.wait_until(l, std::min(until, Clock::now() + kPollInterval));
      }
      seq = ++next_seq_;
      const char* verb = op == IBV_WR_RDMA_READ ? "read" : "write";
      pending_.push_back({seq, &done, value,
                          std::string(verb) + " of " + std::to_string(size) + " bytes at " +
                              hex(remote.addr + remote_offset)});
    }
    ibv_sge sge{};
    sge.addr = uint64_t(local.host() + local_offset);
    sge.length = uint32_t(size);
    sge.lkey = static_cast<const VerbsRegion&>(local).lkey();
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = seq;
    wr.sg_list = size ? &sge : nullptr;
    wr.num_sge = size ? 1 : 0;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = remote.addr + remote_offset;
    wr.wr.rdma.rkey = remote.key;
    if (int e = ibv_post_send(qp_, &wr, &bad)) {
      std::lock_guard l(mu_);
      std::erase_if(pending_, [&](const Pending& p) { return p.seq == seq; });
      throw OsError("rdma: connection '" + name_ + "': ibv_post_send", e);
    }
  }

  void completions() {
    ibv_wc wc[32];
    int n;
    while ((n = ibv_poll_cq(cq_, 32, wc)) > 0) {
      std::lock_guard l(mu_);
      for (int i = 0; i < n; i++) {
        const ibv_wc& w = wc[i];
        if (w.status != IBV_WC_SUCCESS) {
          if (w.status == IBV_WC_WR_FLUSH_ERR) continue;  // what follows the first error
          std::string what;
          for (auto& p : pending_)
            if (p.seq == w.wr_id) what = " (" + p.what + ")";
          bool remote = w.status == IBV_WC_REM_ACCESS_ERR;
          fail("rdma: " + std::string(remote ? "remote access error" : "work request failed") +
                   " on connection '" + name_ + "': " + ibv_wc_status_str(w.status) + what,
               remote);
          continue;
        }
        if (w.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          deliver_immediate(ntohl(w.imm_data));
          post_receive();
          continue;
        }
        // Send completions come in posting order (one send queue).
        while (!pending_.empty() && pending_.front().seq <= w.wr_id) {
          pending_.front().done->set(pending_.front().value);
          pending_.pop_front();
        }
      }
      cv_.notify_all();
    }
  }

  void progress_loop() {
    std::vector<char> inbox;
    while (!stop_.load()) {
      pollfd pf[2] = {{channel_->fd, POLLIN, 0}, {fd_, POLLIN, 0}};
      int r = ::poll(pf, 2, int(kPollInterval.count()));
      try {
        if (r > 0 && (pf[0].revents & POLLIN)) {
          ibv_cq* cq;
          void* ctx;
          if (ibv_get_cq_event(channel_, &cq, &ctx) == 0) {
            ibv_ack_cq_events(cq, 1);
            ibv_req_notify_cq(cq_, 0);
          }
        }
        completions();  // also after a timeout: a notification raced with the re-arm
        if (r > 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
          char buf[256];
          ssize_t k = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
          if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
            {
              std::lock_guard l(mu_);
              fail("rdma: the peer closed connection '" + name_ + "'", false);
            }
            // Nothing more will come from the socket; keep taking completions.
            ::shutdown(fd_, SHUT_RD);
            while (!stop_.load()) {
              completions();
              std::this_thread::sleep_for(kPollInterval);
            }
            return;
          }
          if (k > 0) inbox.insert(inbox.end(), buf, buf + k);
          while (inbox.size() >= sizeof(AdvertRecord)) {
            AdvertRecord a;
            std::memcpy(&a, inbox.data(), sizeof a);
            inbox.erase(inbox.begin(), inbox.begin() + sizeof a);
            std::lock_guard l(mu_);
            peer_regions_.push_back({a.addr, a.length, a.key});
            cv_.notify_all();
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard l(mu_);
        fail("rdma: connection '" + name_ + "': " + e.what(), false);
      }
    }
  }

  std::shared_ptr<Shared> s_;
  int fd_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;

  std::mutex send_mu_;  // the socket's writers
  std::timed_mutex post_mu_;  // the queue pair's posters, in sequence order
  uint32_t advertised_ = 0;
  uint64_t next_seq_ = 0;  // under mu_
  std::deque<Pending> pending_;
  std::vector<RemoteRegion> peer_regions_;
  std::atomic<bool> stop_{false};
  std::thread progress_;
};

class VerbsEndpoint : public VerbsEndpointBase {
 public:
  explicit VerbsEndpoint(const VerbsOptions& o) : s_(std::make_shared<Shared>()) {
    DeviceList dl;
    if (dl.n == 0)
      throw OsError("rdma: no RDMA devices (/sys/class/infiniband is empty)", ENODEV);
    ibv_device* dev = nullptr;
    for (int i = 0; i < dl.n; i++)
      if (o.device.empty() || o.device == ibv_get_device_name(dl.list[i])) {
        dev = dl.list[i];
        break;
      }
    if (!dev) throw InvalidInput("rdma: no RDMA device '" + o.device + "'");
    std::string name = ibv_get_device_name(dev);
    s_->ctx = ibv_open_device(dev);
    if (!s_->ctx) throw OsError("rdma: ibv_open_device " + name, errno);
    s_->port = o.port;
    if (int e = ibv_query_port(s_->ctx, o.port, &s_->port_attr))
      throw OsError("rdma: " + name + " port " + std::to_string(o.port), e);
    auto gids = gids_of(s_->ctx, o.port, s_->port_attr.gid_tbl_len);
    s_->gid_index = o.gid_index >= 0 ? o.gid_index : pick_gid(gids);
    auto g = std::find_if(gids.begin(), gids.end(),
                          [&](const GidInfo& x) { return x.index == s_->gid_index; });
    if (g == gids.end())
      throw InvalidInput("rdma: " + name + " port " + std::to_string(o.port) + " has no GID " +
                         std::to_string(s_->gid_index));
    if (int e = ibv_query_gid(s_->ctx, o.port, s_->gid_index, &s_->gid))
      throw OsError("rdma: ibv_query_gid", e);
    s_->pd = ibv_alloc_pd(s_->ctx);
    if (!s_->pd) throw OsError("rdma: ibv_alloc_pd", errno);
    s_->describe = name + " port " + std::to_string(o.port) + " gid " +
                   std::to_string(s_->gid_index) + " (" + g->type + ")";
  }

  std::unique_ptr<Region> register_host(void* ptr, uint64_t size) override {
    ibv_mr* mr = ibv_reg_mr(s_->pd, ptr, size, kAccess);
    if (!mr) throw OsError("rdma: ibv_reg_mr of " + std::to_string(size) + " bytes", errno);
    return std::make_unique<VerbsRegion>(s_, mr, reinterpret_cast<uint64_t>(ptr),
                                         static_cast<std::byte*>(ptr), "host memory");
  }

  std::unique_ptr<Region> register_buffer_range(const Buffer& buf, uint64_t offset,
                                                uint64_t size) override {
    check_buffer_range(buf, offset, size);
    Device* dev = buf.device();
    const uint64_t iova = buf.va() + offset;
    std::byte* host = buf.host() ? static_cast<std::byte*>(buf.host()) + offset : nullptr;
    if (dev->properties().emulated && host) {
      // An emulated GPU's memory is host memory: registered where the CPU maps it, addressed
      // by the buffer's device address.
      ibv_mr* mr = ibv_reg_mr_iova(s_->pd, host, size, iova, kAccess);
      if (!mr) throw OsError("rdma: ibv_reg_mr of " + dev->name() + " memory", errno);
      std::string how = "emulated device memory, registered directly (no dma-buf: " +
                        dev->name() + " is emulated)";
      std::cerr << "hcq rdma: " << how << "\n";
      return std::make_unique<VerbsRegion>(s_, mr, iova, host, how);
    }
    // A real GPU: its export is a dma-buf on KFD (AMDKFD_IOC_EXPORT_DMABUF), an RM object fd
    // on NVIDIA (NV0000_CTRL_CMD_OS_UNIX_EXPORT_OBJECT_TO_FD), which no NIC driver takes.
    std::string why;
    try {
      IpcHandle h = buf.export_ipc();
      return register_export(h.fd.get(), offset, size, iova, host, dev->name());
    } catch (const Staging& st) {
      why = st.why;
    } catch (const InvalidInput& e) {  // no export at all
      why = e.what();
    }
    return register_staging(iova, size, dev->name() + " buffer " + hex(buf.va()), why);
  }

  // Thrown by register_export where the memory must be staged instead.
  struct Staging {
    std::string why;
  };
  // `fd` registered as a dma-buf where it is one (its file system's magic, DMA_BUF_MAGIC in
  // linux/magic.h) and the NIC's driver takes it; else Staging with the reason.
  std::unique_ptr<Region> register_export(int fd, uint64_t offset, uint64_t size, uint64_t iova,
                                          std::byte* host, const std::string& who) {
    struct statfs sf {};
    if (::fstatfs(fd, &sf) != 0) throw OsError("rdma: fstatfs of " + who + "'s export", errno);
    if (uint64_t(sf.f_type) != kDmaBufMagic)
      throw Staging{who + "'s export is not a dma-buf (file system magic " +
                    hex(uint64_t(sf.f_type)) + ")"};
    try {
      return register_dmabuf(fd, offset, size, iova, host);
    } catch (const OsError& e) {
      if (e.err() != EOPNOTSUPP) throw;
      throw Staging{s_->describe + " has no dma-buf registration"};
    }
  }

  // Host memory registered with ibv_reg_mr at `iova`, which the caller copies through.
  std::unique_ptr<Region> register_staging(uint64_t iova, uint64_t size, const std::string& who,
                                           const std::string& why) {
    // Page-aligned, at the iova's offset in its page: a memory region's address and iova
    // share their offset in the page (rxe refuses others with EINVAL).
    const uint64_t in_page = iova & 4095;
    auto mem = std::shared_ptr<std::byte[]>(
        static_cast<std::byte*>(::operator new[](size + in_page, std::align_val_t(4096))),
        [](std::byte* p) { ::operator delete[](p, std::align_val_t(4096)); });
    std::byte* host = mem.get() + in_page;
    ibv_mr* mr = ibv_reg_mr_iova(s_->pd, host, size, iova, kAccess);
    if (!mr) throw OsError("rdma: ibv_reg_mr of " + std::to_string(size) + " bytes of staging", errno);
    std::string how = "host staging (" + why + ")";
    std::cerr << "hcq rdma: " << who << ": " << how << "\n";
    auto r = std::make_unique<VerbsRegion>(s_, mr, iova, host, how);
    r->keep(std::move(mem));
    return r;
  }

  std::unique_ptr<Region> stage_export(int fd, uint64_t offset, uint64_t size, uint64_t iova,
                                       const std::string& who) override {
    try {
      return register_export(fd, offset, size, iova, nullptr, who);
    } catch (const Staging& st) {
      return register_staging(iova, size, who, st.why);
    }
  }

  std::unique_ptr<Region> register_dmabuf(int fd, uint64_t offset, uint64_t size, uint64_t iova,
                                          std::byte* host) override {
    ibv_mr* mr = ibv_reg_dmabuf_mr(s_->pd, offset, size, iova, fd, kAccess);
    if (!mr) {
      if (errno == EOPNOTSUPP || errno == ENOTSUP)
        throw OsError("rdma: " + s_->describe + " has no dma-buf registration", EOPNOTSUPP);
      throw OsError("rdma: ibv_reg_dmabuf_mr", errno);
    }
    return std::make_unique<VerbsRegion>(s_, mr, iova, host, "dma-buf");
  }

  std::unique_ptr<Connection> listen(const std::string& address,
                                     std::chrono::milliseconds timeout) override {
    int fd = tcp_listen_accept(address, timeout);
    return std::make_unique<VerbsConnection>(s_, fd, address, timeout);
  }
  std::unique_ptr<Connection> connect(const std::string& address,
                                      std::chrono::milliseconds timeout) override {
    int fd = tcp_connect(address, timeout);
    return std::make_unique<VerbsConnection>(s_, fd, address, timeout);
  }
  std::string describe() const override { return s_->describe; }
  ~VerbsEndpoint() override { cache_.clear(); }

 private:
  std::shared_ptr<Shared> s_;
};

}  // namespace

std::string no_rdma_reason() {
  return ::access("/sys/class/infiniband", F_OK) == 0 ? "" : absent_reason(kNoSysfs);
}

std::vector<DeviceInfo> list_verbs_devices() {
  DeviceList dl;
  std::vector<DeviceInfo> out;
  for (int i = 0; i < dl.n; i++) {
    DeviceInfo d;
    d.name = ibv_get_device_name(dl.list[i]);
    Context c(dl.list[i]);
    ibv_device_attr da{};
    if (int e = ibv_query_device(c.ctx, &da)) throw OsError("rdma: ibv_query_device " + d.name, e);
    for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
      ibv_port_attr pa{};
      if (int e = ibv_query_port(c.ctx, p, &pa))
        throw OsError("rdma: " + d.name + " port " + std::to_string(p), e);
      PortInfo pi;
      pi.port = p;
      pi.state = state_text(pa.state);
      pi.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
      pi.active_mtu = uint32_t(128) << int(pa.active_mtu);
      pi.gids = gids_of(c.ctx, p, pa.gid_tbl_len);
      d.ports.push_back(std::move(pi));
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::unique_ptr<VerbsEndpointBase> open_verbs(const VerbsOptions& o) {
  return std::make_unique<VerbsEndpoint>(o);
}

}  // namespace hcq::rdma
