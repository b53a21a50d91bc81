#include "core/replay_host.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/deadline.hpp"
#include "core/error.hpp"

namespace hcq::replay::detail {

HostSteps::HostSteps(Memory& memory, std::chrono::milliseconds timeout)
    : memory_(memory), timeout_(timeout), thread_([this] { loop(); }) {}

HostSteps::~HostSteps() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

namespace {
constexpr uint64_t kCopyPiece = 16ull << 20;  // a host-step copy moves at most this at a time

const char* step_name(capture::HostStepKind k) {
  switch (k) {
    case capture::HostStepKind::Mirror: return "mirror";
    case capture::HostStepKind::Wait: return "wait";
    case capture::HostStepKind::Copy: return "copy";
    case capture::HostStepKind::Write64: return "write";
    case capture::HostStepKind::File: return "file read";
    case capture::HostStepKind::Remote: return "remote transfer";
  }
  return "step";
}

// "host step 2 (copy) of submission 14's batch run": how errors name a step.
std::string step_label(const capture::HostStepsRecord& run, size_t i) {
  return "host step " + std::to_string(i) + " (" + step_name(run.steps[i].kind) +
         ") of submission " + std::to_string(run.sequence) + "'s batch run";
}
}  // namespace

std::string HostSteps::refusal(const capture::HostStepsRecord& run) {
  for (size_t i = 0; i < run.steps.size(); i++) {
    const auto& s = run.steps[i];
    const char* what = s.kind == capture::HostStepKind::File     ? "reads a file"
                       : s.kind == capture::HostStepKind::Remote ? "moves memory to a remote peer"
                                                                 : nullptr;
    if (what)
      return "replay: submission " + std::to_string(run.sequence) + "'s batch run " + what +
             " on the host, which a capture cannot replay";
    // The ranges a step reaches: a copy's `value` bytes, else the 8-byte signal words.
    const uint64_t n = s.kind == capture::HostStepKind::Copy ? s.value : 8;
    const bool reads_src =
        s.kind == capture::HostStepKind::Copy || s.kind == capture::HostStepKind::Mirror;
    for (const auto& [at, which] : {std::pair{s.dst, "destination"}, std::pair{s.src, "source"}}) {
      if (std::string(which) == "source" && !reads_src) continue;
      if (!capture::in_address_space(at, n))
        return "replay: " + step_label(run, i) + ": its " + which + " [" + hex(at) + ", +" +
               std::to_string(n) + ") runs past the end of the 64-bit address space";
    }
  }
  return "";
}

void HostSteps::add(capture::HostStepsRecord run) {
  const std::string no = refusal(run);
  if (!no.empty()) throw InvalidInput(no);
  {
    std::lock_guard lk(mu_);
    runs_.push_back(std::move(run));
  }
  cv_.notify_all();
}

bool HostSteps::done() const {
  std::lock_guard lk(mu_);
  return runs_.empty();
}

std::optional<uint64_t> HostSteps::pending() const {
  std::lock_guard lk(mu_);
  if (runs_.empty()) return std::nullopt;
  return runs_.front().sequence;
}

std::string HostSteps::failure() const {
  std::lock_guard lk(mu_);
  return failure_;
}

std::string HostSteps::describe() const {
  std::optional<Waiting> w;
  {
    std::lock_guard lk(mu_);
    if (!failure_.empty()) return failure_;
    w = waiting_;
  }
  if (!w) return "";
  uint64_t v = 0;
  memory_.read(w->wait.device, w->wait.dst, &v, 8);
  return "replay: host step " + std::to_string(w->step) + " of submission " +
         std::to_string(w->sequence) + "'s batch run waits for the signal at " +
         hex(w->wait.dst) + " to reach " + std::to_string(w->wait.value) + "; it holds " +
         std::to_string(v);
}

void HostSteps::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || (!runs_.empty() && failure_.empty()); });
    if (stop_) return;
    const capture::HostStepsRecord run = runs_.front();  // stays queued until taken
    lk.unlock();
    std::string failed;
    try {
      take(run);
    } catch (const Error& e) {
      failed = e.what();
    }
    lk.lock();
    if (!failed.empty()) {
      failure_ = failed;  // the run stays pending: the replay's waits see it unfinished
    } else if (!stop_) {
      runs_.pop_front();
    }
  }
}

// One run's steps, as run_host (lib/batch/executable.cpp) took them: mirrors relayed while
// the host waits and after each step, until each has relayed its end value.
void HostSteps::take(const capture::HostStepsRecord& run) {
  using capture::HostStepKind;
  using clock = std::chrono::steady_clock;
  struct Mirror {
    const capture::HostStep* step;
    uint64_t copied = 0;
  };
  std::vector<Mirror> mirrors;
  auto load = [&](uint32_t device, uint64_t va) {
    uint64_t v = 0;
    memory_.read(device, va, &v, 8);
    return v;
  };
  auto pump = [&] {  // true once every mirror has relayed its end
    bool all = true;
    for (Mirror& m : mirrors) {
      const uint64_t v = load(m.step->src_device, m.step->src);
      if (v != m.copied) memory_.write(m.step->device, m.step->dst, &v, 8);
      m.copied = v;
      all &= v >= m.step->value;
    }
    return all;
  };
  auto stopping = [&] {
    std::lock_guard lk(mu_);
    return stop_;
  };
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < run.steps.size(); i++) {
    const capture::HostStep& s = run.steps[i];
    // A range in no restored buffer names the step (the target names the range).
    try {
      switch (s.kind) {
        case HostStepKind::Mirror:
          mirrors.push_back({&s});
          break;
        case HostStepKind::Wait: {
          const auto deadline = deadline_after(timeout_);
          {
            std::lock_guard lk(mu_);
            waiting_ = Waiting{i, run.sequence, s};
          }
          for (uint64_t v; (v = load(s.device, s.dst)) < s.value;) {
            if (stopping()) throw Error("replay: stopped");
            if (clock::now() >= deadline)
              throw TimeoutError("replay: host step " + std::to_string(i) + " of submission " +
                                 std::to_string(run.sequence) + "'s batch run waited " +
                                 std::to_string(timeout_.count()) + " ms for the signal at " +
                                 hex(s.dst) + " to reach " + std::to_string(s.value) +
                                 "; it holds " + std::to_string(v));
            pump();
            std::this_thread::sleep_for(std::chrono::microseconds(20));
          }
          std::lock_guard lk(mu_);
          waiting_.reset();
          break;
        }
        case HostStepKind::Copy:
          // In pieces: the size is the capture's word, and a hostile one must not be an
          // allocation of its own (2^62 bytes ended in std::bad_alloc).
          for (uint64_t done = 0; done < s.value;) {
            const uint64_t piece = std::min<uint64_t>(s.value - done, kCopyPiece);
            bytes.resize(piece);
            memory_.read(s.src_device, s.src + done, bytes.data(), piece);
            memory_.write(s.device, s.dst + done, bytes.data(), piece);
            done += piece;
          }
          break;
        case HostStepKind::Write64:
          memory_.write(s.device, s.dst, &s.value, 8);
          break;
        case HostStepKind::File:
        case HostStepKind::Remote:
          throw InvalidInput(refusal(run));  // add() refused it already
      }
    } catch (const InvalidInput& e) {
      throw InvalidInput("replay: " + step_label(run, i) + ": " + e.what());
    }
    pump();
  }
  // Relay until every mirror has passed its end; no progress for `timeout` is a hang.
  auto last_progress = clock::now();
  std::vector<uint64_t> before;
  while (!pump()) {
    std::vector<uint64_t> now;
    for (const Mirror& m : mirrors) now.push_back(m.copied);
    if (now != before) last_progress = clock::now();
    before = std::move(now);
    if (stopping()) throw Error("replay: stopped");
    if (clock::now() - last_progress >= timeout_)
      throw TimeoutError("replay: submission " + std::to_string(run.sequence) +
                         "'s batch run: a relayed signal made no progress for " +
                         std::to_string(timeout_.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace hcq::replay::detail
