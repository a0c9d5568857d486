#include "server/host_details.h"

namespace tessera::server {

tessera::v1::ModelInfo without_host_details(tessera::v1::ModelInfo info) {
  for (tessera::v1::DevicePlacement& p : *info.mutable_placement()) {
    p.clear_name();
    p.clear_allowed_bytes();
  }
  return info;
}

}  // namespace tessera::server
