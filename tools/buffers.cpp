#include "buffers.hpp"

#include <tuple>

#include "core/error.hpp"

namespace hcq::tools {
namespace {

using Key = std::tuple<uint32_t, uint64_t, uint64_t, uint8_t, uint32_t>;

// Where the recording being read (the last record's) stands: the next record continues it
// when it is the piece that follows (same device, flags, kind and timeline, the next address)
// and the last piece was a whole piece (kMemoryPieceBytes).
struct Open {
  uint32_t device = 0, raw_flags = 0;
  MemoryKind kind = MemoryKind::Device;
  uint64_t timeline = 0, start = 0, size = 0, last_piece = 0;
  RecordedBuffer::Recording rec;
};

// "before submission 4", or "after the last submission" for a recording at the end.
std::string position(const BufferIndex& ix, const RecordedBuffer::Recording& r) {
  const auto s = ix.before(r);
  return s ? "before submission " + std::to_string(*s) : "after the last submission";
}

std::string range(const RecordedBuffer& b) {
  return hex(b.start) + ".." + hex(b.start + b.size) + " (device " + std::to_string(b.device) + ")";
}

}  // namespace

BufferIndex index_buffers(capture::Reader& r, const std::string& name, uint64_t piece_bytes) {
  BufferIndex ix;
  std::map<Key, RecordedBuffer> buffers;
  std::optional<Open> open;
  auto close = [&] {
    if (!open) return;
    const Open& o = *open;
    const uint32_t kept = o.raw_flags & kBufferFlags;
    RecordedBuffer& b = buffers[Key{o.device, o.start, o.size, uint8_t(o.kind), kept}];
    if (b.recordings.empty()) {
      b.device = o.device;
      b.start = o.start;
      b.size = o.size;
      b.kind = o.kind;
      b.flags = kept;
    }
    b.recordings.push_back(o.rec);
    open.reset();
  };
  while (auto rec = r.next()) {
    if (rec->type == capture::RecordType::Device) {
      ix.devices[rec->device.id] = rec->device;
    } else if (rec->type == capture::RecordType::Submission) {
      ix.submissions.push_back(rec->submission.sequence);
    }
    if (rec->type != capture::RecordType::Memory) {
      close();
      continue;
    }
    const capture::MemoryRecord& m = rec->memory;
    const uint64_t ordinal = ix.memory_records++;
    if (!ix.devices.count(m.device))
      throw InvalidInput("dump: " + name + ": memory record " + std::to_string(ordinal) +
                         " names device " + std::to_string(m.device) +
                         ", which no record declared");
    const uint64_t n = m.bytes.size();
    if (!capture::in_address_space(m.address, n))
      throw InvalidInput("dump: " + name + ": memory record " + std::to_string(ordinal) + " at " +
                         hex(m.address) + " holds " + std::to_string(n) +
                         " bytes, past the end of the 64-bit address space");
    if (open && open->last_piece == piece_bytes && n > 0 &&
        m.device == open->device && m.flags == open->raw_flags && m.kind == open->kind &&
        m.timeline == open->timeline && open->start + open->size == m.address) {
      open->size += n;  // cannot pass 2^64: m.address + n did not
      open->last_piece = n;
      open->rec.pieces++;
      continue;
    }
    close();
    open = Open{m.device, m.flags, m.kind, m.timeline, m.address, n, n,
                RecordedBuffer::Recording{ordinal, 1, ix.submissions.size()}};
  }
  close();
  ix.buffers.reserve(buffers.size());
  for (auto& [key, b] : buffers) ix.buffers.push_back(std::move(b));
  return ix;
}

std::vector<std::string> flag_names(uint32_t flags) {
  std::vector<std::string> names;
  if (flags & capture::kMemoryExecutable) names.push_back("executable");
  if (flags & capture::kMemorySignals) names.push_back("signals");
  if (flags & capture::kMemoryUser) names.push_back("user");
  if (flags & capture::kMemoryWritten) names.push_back("cpu-written");
  return names;
}

BufferChoice choose_buffer(const BufferIndex& ix, const std::string& name, uint64_t address,
                           std::optional<uint32_t> device, std::optional<uint64_t> at) {
  if (ix.memory_records == 0)
    throw InvalidInput("dump: " + name +
                       " holds no buffer contents (a full capture is HCQ_CAPTURE=path,full)");
  // Recordings made before submission `at` (or one before it): at most this many submission
  // records came before them.
  uint64_t limit = UINT64_MAX;
  if (at) {
    limit = 0;
    while (limit < ix.submissions.size() && ix.submissions[limit] != *at) limit++;
    if (limit == ix.submissions.size())
      throw InvalidInput("dump: " + name + " holds no submission " + std::to_string(*at) +
                         (ix.submissions.empty()
                              ? std::string(" (it holds none)")
                              : " (its submissions are " + std::to_string(ix.submissions.front()) +
                                    " to " + std::to_string(ix.submissions.back()) + ")"));
  }
  std::vector<size_t> holding;
  for (size_t i = 0; i < ix.buffers.size(); i++) {
    const RecordedBuffer& b = ix.buffers[i];
    if ((!device || b.device == *device) && address >= b.start && address - b.start < b.size)
      holding.push_back(i);
  }
  if (holding.empty())
    throw InvalidInput("dump: " + name + " recorded no buffer at " + hex(address) +
                       (device ? " on device " + std::to_string(*device) : std::string()) +
                       "; hcq dump --buffers lists them");
  std::string devices;
  for (size_t i : holding)
    if (ix.buffers[i].device != ix.buffers[holding.front()].device) {
      for (size_t k : holding) {
        const std::string d = std::to_string(ix.buffers[k].device);
        if (devices.find(" " + d + ",") == std::string::npos) devices += " " + d + ",";
      }
      devices.pop_back();
      throw InvalidInput("dump: " + name + " recorded buffers at " + hex(address) +
                         " on devices" + devices + "; choose one with --device");
    }
  std::optional<BufferChoice> best;
  uint64_t best_record = 0;
  for (size_t i : holding) {
    const auto& recs = ix.buffers[i].recordings;
    // In file order, so their submission counts never decrease: the last one within the limit.
    for (size_t k = recs.size(); k-- > 0;) {
      if (recs[k].submissions_before > limit) continue;
      if (!best || recs[k].first_record > best_record) {
        best = BufferChoice{i, k};
        best_record = recs[k].first_record;
      }
      break;
    }
  }
  if (best) return *best;
  // Every buffer there was first recorded after `at`: name the earliest.
  size_t first = holding.front();
  for (size_t i : holding)
    if (ix.buffers[i].recordings.front().first_record <
        ix.buffers[first].recordings.front().first_record)
      first = i;
  const RecordedBuffer& b = ix.buffers[first];
  throw InvalidInput("dump: the buffer " + range(b) + " was first recorded " +
                     position(ix, b.recordings.front()) + "; --at " + std::to_string(*at) +
                     " is earlier");
}

void for_each_piece(capture::Reader& r, const std::string& name, const RecordedBuffer& buffer,
                    const RecordedBuffer::Recording& rec,
                    const std::function<void(std::span<const uint8_t>)>& f) {
  uint64_t ordinal = 0, at = buffer.start, left = buffer.size;
  const uint64_t end = rec.first_record + rec.pieces;
  auto changed = [&] {
    return InvalidInput("dump: " + name + " changed while it was read: memory record " +
                        std::to_string(ordinal) + " is not the piece of " + range(buffer) +
                        " it was");
  };
  while (ordinal < end) {
    auto next = r.next();
    if (!next) throw changed();
    if (next->type != capture::RecordType::Memory) continue;
    if (ordinal >= rec.first_record) {
      const capture::MemoryRecord& m = next->memory;
      if (m.device != buffer.device || m.address != at || m.bytes.size() > left) throw changed();
      f(m.bytes);
      at += m.bytes.size();
      left -= m.bytes.size();
    }
    ordinal++;
  }
  if (left) throw changed();
}

}  // namespace hcq::tools
