#include "core/types.hpp"

namespace hcq {

const char* to_string(QueueKind k) { return k == QueueKind::Compute ? "compute" : "copy"; }
const char* to_string(MemoryKind k) { return k == MemoryKind::Device ? "device" : "host"; }

}  // namespace hcq
