// Transport security from the config: plaintext, TLS (tls_cert + tls_key) or mTLS (tls_client_ca
// too: clients must present a certificate that CA signed).
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/daemon_config.h"

namespace tessera::server {

// Errors name the key and the file ("tls_key: cannot read \"/etc/k.pem\": No such file ...",
// "... is not a PEM file", "... holds no PEM private key", "tls_key: \"k.pem\" is not the private
// key of the certificate in tls_cert \"c.pem\""): the files are checked (pem_check.h) before
// gRPC sees them.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> make_server_credentials(const DaemonConfig& config);

// "plaintext", "TLS" or "mTLS", for the startup log line.
std::string security_name(const DaemonConfig& config);

}  // namespace tessera::server
