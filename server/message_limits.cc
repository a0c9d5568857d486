#include "server/message_limits.h"

#include <algorithm>
#include <climits>

namespace tessera::server {

int max_receive_message_bytes(int64_t max_message_bytes) {
  return static_cast<int>(std::min<int64_t>(max_message_bytes, INT32_MAX));
}

int max_send_message_bytes(int64_t max_message_bytes) {
  // max_message_bytes is at most 1 GiB (daemon_config), so the product cannot overflow.
  return static_cast<int>(std::min<int64_t>(max_message_bytes * kSendFactor, INT32_MAX));
}

}  // namespace tessera::server
