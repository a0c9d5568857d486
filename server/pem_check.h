// The TLS files checked with OpenSSL before gRPC sees them, so that a bad file fails at start
// with an error naming the key and the file ("tls_key: \"/etc/k.pem\" holds no PEM private key")
// instead of gRPC's bare "cannot serve on the address". gRPC would only log its reason to stderr
// and fail to bind.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessera::server {

// `pem` (read from `path` for config key `key`) holds at least one PEM certificate and nothing
// that fails to parse as one.
absl::Status check_certificates(std::string_view key, const std::string& path, const std::string& pem);

// `key_pem` holds a PEM private key, and it is the key of the first certificate in `cert_pem`.
absl::Status check_key_pair(const std::string& cert_path, const std::string& cert_pem,
                            const std::string& key_path, const std::string& key_pem);

}  // namespace tessera::server
