// The AM SMU mailbox: the driver (am::RegisterIo, am::Smu) against the emulated SMU
// (emu::AmSmu) through an emulated register window, at the register addresses the emulated
// RX 7900 XTX's IP discovery table gives. Expected addresses are worked out here: MP1's
// segment 0 sits at dword 0x16000 in that table, and Linux mp_13_0_0_offset.h puts
// regMP1_SMN_C2PMSG_53/54/66/75/82/90 at 0x275/0x276/0x282/0x28b/0x292/0x29a in it.
#include "amd/am/smu.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "amd/am/discovery.hpp"
#include "amd/am/register_io.hpp"
#include "amd/am_block_harness.hpp"
#include "amd/emu/am_discovery_writer.hpp"
#include "amd/emu/am_smu.hpp"
#include "common/child_process.hpp"
#include "common/error_of.hpp"
#include "core/error.hpp"
#include "os/mmio.hpp"

namespace hcq::amd::am {
namespace {

using namespace std::chrono_literals;
using testing_support::error_of;

// Byte offsets in the register BAR: 4 * (0x16000 + regMP1_SMN_C2PMSG_N).
constexpr uint64_t kC2pMsg53 = 0x589d4, kC2pMsg54 = 0x589d8, kC2pMsg66 = 0x58a08,
                   kC2pMsg75 = 0x58a2c, kC2pMsg82 = 0x58a48, kC2pMsg90 = 0x58a68;

struct Access {
  char kind;  // 'R' or 'W'
  uint64_t offset;
  uint32_t value;
  bool operator==(const Access&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Access& a) {
  return os << a.kind << " " << hex(a.offset) << " " << hex(a.value);
}

// Passes each access to the model and records it, in the order the model saw them.
class Recorder final : public os::MmioHandler {
 public:
  explicit Recorder(os::MmioHandler& model) : model_(model) {}
  uint32_t read32(uint64_t offset) override {
    std::lock_guard lock(mutex_);
    const uint32_t v = model_.read32(offset);
    log_.push_back({'R', offset, v});
    return v;
  }
  void write32(uint64_t offset, uint32_t value) override {
    std::lock_guard lock(mutex_);
    model_.write32(offset, value);
    log_.push_back({'W', offset, value});
  }
  std::vector<Access> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(log_, {});
  }

 private:
  os::MmioHandler& model_;
  std::mutex mutex_;
  std::vector<Access> log_;
};

class AmSmuTest : public ::testing::Test {
 protected:
  IpSegmentBases bases = test::gfx1100_bases();
  emu::AmSmu model{bases};
  Recorder recorder{model};
  // BAR5 of a Navi 31 is 1 MiB.
  os::EmulatedMmio bar{"BAR5 of 0000:03:00.0", 0x100000, recorder};
  RegisterIo io{bar, bases};
  Smu smu{io, 20ms};

  // `threads` threads send `rounds` pairs of messages each, thread t through smu_of(t): each
  // gets its own answer, and the model sees whole messages one after another: clear,
  // argument, message, one poll (the model answers at once), the read-back.
  void send_from_threads(int threads, int rounds, const std::function<Smu&(int)>& smu_of) {
    std::vector<std::thread> running;
    std::vector<int> wrong(threads, 0);
    for (int t = 0; t < threads; ++t)
      running.emplace_back([&, t] {
        Smu& s = smu_of(t);
        for (int i = 0; i < rounds; ++i) {
          const uint32_t mine = uint32_t(t) << 16 | uint32_t(i);
          if (s.send(smu_v13_0_0::kSetDriverDramAddrLow, mine, true) != mine) ++wrong[t];
          if (s.version() != emu::AmSmu::kVersion) ++wrong[t];
        }
      });
    for (std::thread& th : running) th.join();
    EXPECT_EQ(wrong, std::vector<int>(threads, 0));
    const std::vector<Access> log = recorder.take();
    ASSERT_EQ(log.size(), size_t(threads * rounds * 2 * 5));
    for (size_t i = 0; i < log.size(); i += 5) {
      SCOPED_TRACE(i);
      EXPECT_EQ(log[i], (Access{'W', kC2pMsg90, 0}));
      EXPECT_EQ(log[i + 1].offset, kC2pMsg82);
      EXPECT_EQ(log[i + 2].offset, kC2pMsg66);
      EXPECT_EQ(log[i + 3], (Access{'R', kC2pMsg90, 1}));
      const uint32_t expected = log[i + 2].value == smu_v13_0_0::kGetSmuVersion
                                    ? emu::AmSmu::kVersion
                                    : log[i + 1].value;
      EXPECT_EQ(log[i + 4], (Access{'R', kC2pMsg82, expected}));
    }
  }
};

TEST_F(AmSmuTest, TheRegistersSitWhereTheDiscoveryTableAndMp13HeaderPutThem) {
  EXPECT_EQ(io.byte_offset(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_90)), kC2pMsg90);
  EXPECT_TRUE(model.handles(kC2pMsg66));
  EXPECT_TRUE(model.handles(kC2pMsg53));
  EXPECT_FALSE(model.handles(kC2pMsg66 + 4));
}

TEST_F(AmSmuTest, OneMessageClearsTheResponseWritesArgumentThenMessageAndPolls) {
  EXPECT_EQ(smu.send(smu_v13_0_0::kSetDriverDramAddrLow, 0x12345000), 0u);
  EXPECT_EQ(recorder.take(), (std::vector<Access>{{'W', kC2pMsg90, 0},
                                                  {'W', kC2pMsg82, 0x12345000},
                                                  {'W', kC2pMsg66, 0xf},
                                                  {'R', kC2pMsg90, 1}}));
}

TEST_F(AmSmuTest, VersionIsReadBackFromTheArgumentRegister) {
  EXPECT_EQ(smu.version(), 0x004e4a00u);
  EXPECT_EQ(recorder.take(), (std::vector<Access>{{'W', kC2pMsg90, 0},
                                                  {'W', kC2pMsg82, 0},
                                                  {'W', kC2pMsg66, 0x2},
                                                  {'R', kC2pMsg90, 1},
                                                  {'R', kC2pMsg82, 0x004e4a00}}));
}

TEST_F(AmSmuTest, DriverTableAddressAndFeaturesReachTheModel) {
  smu.set_driver_dram_address(0x0000'8000'1234'5000);
  EXPECT_EQ(model.driver_dram_address(), 0x0000'8000'1234'5000u);
  EXPECT_FALSE(model.features_enabled());
  smu.enable_all_features();
  EXPECT_TRUE(model.features_enabled());
  EXPECT_EQ(model.messages_run(), 3u);
}

TEST_F(AmSmuTest, EachErrorResponseIsAnExactError) {
  const std::pair<uint32_t, const char*> cases[] = {
      {0xff, "response 0xff SMU_RESP_CMD_FAIL (the message ran and failed)"},
      {0xfe, "response 0xfe SMU_RESP_CMD_UNKNOWN (the SMU does not know the message)"},
      {0xfd, "response 0xfd SMU_RESP_CMD_BAD_PREREQ (valid message, bad prerequisites)"},
      {0xfc, "response 0xfc SMU_RESP_BUSY_OTHER (busy with other messages, retry)"},
      {0xfb, "response 0xfb SMU_RESP_DEBUG_END"},
      {0x7, "response 0x7 an undefined response"},
  };
  for (const auto& [response, text] : cases) {
    model.force_response(response);
    EXPECT_EQ(error_of<Error>([&] { smu.send(smu_v13_0_0::kSetDriverDramAddrHigh, 0x80); }),
              std::string("SMU message SetDriverDramAddrHigh (0xe) with argument 0x80: ") + text);
  }
  EXPECT_EQ(model.messages_run(), 0u);
  EXPECT_EQ(model.driver_dram_address(), 0u);
}

TEST_F(AmSmuTest, AnUnknownMessageGetsTheModelsUnknownCommandResponse) {
  EXPECT_EQ(error_of<Error>([&] { smu.send(0x55, 0x7); }),
            "SMU message 0x55 with argument 0x7: response 0xfe SMU_RESP_CMD_UNKNOWN (the SMU "
            "does not know the message)");
  // The mailbox still works afterwards.
  EXPECT_EQ(smu.version(), emu::AmSmu::kVersion);
}

TEST_F(AmSmuTest, NoResponseTimesOutNamingTheRegisterAndTheLastValue) {
  model.force_response(0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of<TimeoutError>([&] { smu.version(); }),
            "SMU message GetSmuVersion (0x2) with argument 0x0: no response: MP1_SMN_C2PMSG_90: "
            "waited 20 ms for a value other than 0x0 (mask 0xffffffff), last read 0x0");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  model.force_response(std::nullopt);
  EXPECT_EQ(smu.version(), emu::AmSmu::kVersion);
}

TEST_F(AmSmuTest, RegisterWaitSucceedsOrNamesRegisterValueMaskAndLastRead) {
  const RegDesc& resp = find_register("MP1_SMN_C2PMSG_90");
  io.write(resp, 0x1);
  EXPECT_EQ(io.wait(resp, 0xffffffff, 0x1, 1ms), 0x1u);
  io.write(mp_13_0_0::MP1_SMN_C2PMSG_90, 0x0);
  EXPECT_EQ(error_of<TimeoutError>([&] { io.wait(resp, 0xffffffff, 0x1, 5ms); }),
            "MP1_SMN_C2PMSG_90: waited 5 ms for 0x1 (mask 0xffffffff), last read 0x0");
  io.write(resp, 0x3);
  EXPECT_EQ(error_of<TimeoutError>([&] { io.wait(resp, 0x2, 0x0, 1500us); }),
            "MP1_SMN_C2PMSG_90: waited 1500 us for 0x0 (mask 0x2), last read 0x3");
}

TEST_F(AmSmuTest, Mode1ResetGoesThroughTheDebugMailboxAndResetsTheModel) {
  smu.set_driver_dram_address(0x1'0000'0000);
  smu.enable_all_features();
  recorder.take();
  smu.mode1_reset();
  EXPECT_EQ(recorder.take(), (std::vector<Access>{{'W', kC2pMsg54, 0},
                                                  {'W', kC2pMsg53, 0},
                                                  {'W', kC2pMsg75, 0x2},
                                                  {'R', kC2pMsg54, 1}}));
  EXPECT_EQ(model.mode1_resets(), 1u);
  EXPECT_FALSE(model.features_enabled());
  EXPECT_EQ(model.driver_dram_address(), 0u);
  EXPECT_EQ(io.read(mp_13_0_0::MP1_SMN_C2PMSG_90), 0u);
}

TEST_F(AmSmuTest, ModelRefusesUnknownDebugMessagesAndForeignOffsets) {
  model.write32(kC2pMsg75, 0x3);  // DEBUGSMC_MSG_DebugDumpExit: not modelled
  EXPECT_EQ(model.read32(kC2pMsg54), 0xfeu);
  EXPECT_EQ(model.mode1_resets(), 0u);
  EXPECT_EQ(error_of([&] { model.read32(0x1000); }), "AM SMU model: no register at byte 0x1000");
  EXPECT_EQ(error_of([&] { model.write32(0x1000, 1); }),
            "AM SMU model: no register at byte 0x1000");
}

TEST_F(AmSmuTest, ModelRunsAMessageWrittenWithoutClearingTheResponse) {
  // A driver that skips the clear: the model still runs the message on the message write and
  // overwrites the stale response (0xfe from the unknown message before).
  model.write32(kC2pMsg66, 0x55);
  EXPECT_EQ(model.read32(kC2pMsg90), 0xfeu);
  model.write32(kC2pMsg82, 0xabc);
  model.write32(kC2pMsg66, smu_v13_0_0::kSetDriverDramAddrLow);
  EXPECT_EQ(model.read32(kC2pMsg90), 0x1u);
  EXPECT_EQ(model.driver_dram_address(), 0xabcu);
}

TEST_F(AmSmuTest, ConcurrentMessagesEachGetTheirOwnAnswerOneAtATime) {
  send_from_threads(8, 500, [&](int) -> Smu& { return smu; });
}

// Two Smu objects, as a workload's and a monitor's would be, with a mutex each but one
// SharedMailbox of the device in memory a forked child would share too.
class SharedAmSmuTest : public AmSmuTest {
 protected:
  void SetUp() override {
    void* p = ::mmap(nullptr, sizeof(os::SharedMailbox), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    mailbox = new (p) os::SharedMailbox();
    workload.emplace(io, 20ms, mailbox);
    monitor.emplace(io, 20ms, mailbox);
  }
  void TearDown() override { ::munmap(mailbox, sizeof(os::SharedMailbox)); }
  os::SharedMailbox* mailbox = nullptr;
  std::optional<Smu> workload, monitor;
};

TEST_F(SharedAmSmuTest, TwoSmusOnOneSharedMailboxNeverInterleave) {
  send_from_threads(4, 200, [&](int t) -> Smu& { return t % 2 ? *monitor : *workload; });
  EXPECT_EQ(mailbox->interruptions, 0u);
  EXPECT_EQ(workload->resyncs() + monitor->resyncs(), 0u);
}

// A forked holder takes the mailbox and is killed inside its message: the SMU is still busy
// with it (the model holds its answer back until the test lets it go, as a slow SMU would).
// The dead holder's register writes are made here, in the process whose model they reach.
TEST_F(SharedAmSmuTest, AHolderKilledInsideAMessageIsRecoveredAndTheMailboxResynced) {
  model.force_response(0);
  io.write(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_90), 0);
  io.write(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_82), 0x77);
  io.write(RegisterIo::describe(mp_13_0_0::MP1_SMN_C2PMSG_66), smu_v13_0_0::kEnableAllSmuFeatures);
  const int st = testing_support::wait_for(testing_support::spawn([&] {
    os::MailboxSection section(*mailbox);
    section.begin();
    ::kill(::getpid(), SIGKILL);
    return 1;
  }));
  ASSERT_TRUE(WIFSIGNALED(st)) << st;
  model.force_response(std::nullopt);
  recorder.take();

  // The SMU never finishes the dead holder's message: the next one is refused, exactly, and
  // the mailbox stays marked.
  EXPECT_EQ(error_of<TimeoutError>([&] { monitor->version(); }),
            "SMU message GetSmuVersion (0x2) with argument 0x0: the mailbox was left mid-message "
            "(its holder died or gave up) and the SMU never answered it: MP1_SMN_C2PMSG_90: "
            "waited 20 ms for a value other than 0x0 (mask 0xffffffff), last read 0x0");
  EXPECT_EQ(mailbox->interruptions, 1u);
  EXPECT_EQ(mailbox->busy, 1u);
  for (const Access& a : recorder.take()) EXPECT_EQ(a.kind, 'R') << a;  // nothing written

  // It answers a little later: the next message waits for that answer, then goes.
  std::thread smu_answers([&] {
    std::this_thread::sleep_for(5ms);
    model.write32(kC2pMsg90, smu_v13_0_0::kRespOk);
  });
  EXPECT_EQ(monitor->version(), emu::AmSmu::kVersion);
  smu_answers.join();
  EXPECT_EQ(monitor->resyncs(), 1u);
  EXPECT_EQ(mailbox->interruptions, 2u);
  EXPECT_EQ(mailbox->busy, 0u);
  std::vector<Access> log = recorder.take();
  ASSERT_GE(log.size(), 6u);
  // Polls reading 0 while the SMU is busy, then its answer, then the new message.
  const auto answered = std::find(log.begin(), log.end(), Access{'R', kC2pMsg90, 1});
  ASSERT_NE(answered, log.end());
  for (auto it = log.begin(); it != answered; ++it) EXPECT_EQ(*it, (Access{'R', kC2pMsg90, 0}));
  EXPECT_EQ(std::vector<Access>(answered + 1, log.end()),
            (std::vector<Access>{{'W', kC2pMsg90, 0},
                                 {'W', kC2pMsg82, 0},
                                 {'W', kC2pMsg66, smu_v13_0_0::kGetSmuVersion},
                                 {'R', kC2pMsg90, 1},
                                 {'R', kC2pMsg82, emu::AmSmu::kVersion}}));
  // Back to normal: no wait before the next message.
  EXPECT_EQ(workload->version(), emu::AmSmu::kVersion);
  EXPECT_EQ(workload->resyncs(), 0u);
  EXPECT_EQ(recorder.take().size(), 5u);
}

}  // namespace
}  // namespace hcq::amd::am
