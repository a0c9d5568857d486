#include "server/server_credentials.h"

#include <grpcpp/security/server_credentials.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "server/pem_check.h"

namespace tessera::server {

namespace {

absl::StatusOr<std::string> read_pem(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(key, ": cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(key, ": read error in \"", path, "\""));
  std::string pem = text.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": \"", path, "\" is not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

}  // namespace

std::string security_name(const DaemonConfig& config) {
  if (config.tls_cert.empty()) return "plaintext";
  return config.tls_client_ca.empty() ? "TLS" : "mTLS";
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> make_server_credentials(const DaemonConfig& config) {
  if (config.tls_cert.empty() && config.tls_key.empty()) {
    if (!config.tls_client_ca.empty()) {
      return absl::InvalidArgumentError("tls_client_ca: needs tls_cert and tls_key (mTLS is TLS plus client certificates)");
    }
    return grpc::InsecureServerCredentials();
  }
  if (config.tls_cert.empty() || config.tls_key.empty()) {
    return absl::InvalidArgumentError("tls_cert and tls_key: set both (TLS) or neither (plaintext)");
  }
  absl::StatusOr<std::string> cert = read_pem("tls_cert", config.tls_cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = read_pem("tls_key", config.tls_key);
  if (!key.ok()) return key.status();
  if (absl::Status s = check_certificates("tls_cert", config.tls_cert, *cert); !s.ok()) return s;
  if (absl::Status s = check_key_pair(config.tls_cert, *cert, config.tls_key, *key); !s.ok()) return s;
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  if (!config.tls_client_ca.empty()) {
    absl::StatusOr<std::string> ca = read_pem("tls_client_ca", config.tls_client_ca);
    if (!ca.ok()) return ca.status();
    if (absl::Status s = check_certificates("tls_client_ca", config.tls_client_ca, *ca); !s.ok()) return s;
    options.pem_root_certs = *std::move(ca);
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else {
    options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace tessera::server
