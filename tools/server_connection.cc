#include "tools/server_connection.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace tessera::cli {

namespace {

absl::StatusOr<std::string> read_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("--", flag, "=", path, ": cannot open the file"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const std::set<std::string>& connection_value_flags() {
  static const std::set<std::string> flags = {"server", "tls-ca", "tls-cert", "tls-key",
                                              "tls-server-name", "api-key"};
  return flags;
}

const std::set<std::string>& connection_bool_flags() {
  static const std::set<std::string> flags = {"tls"};
  return flags;
}

const char* connection_flags_usage() {
  return "      --server HOST:PORT      tesserad's address (127.0.0.1:50051)\n"
         "      --tls                   connect with TLS (implied by the --tls-* flags)\n"
         "      --tls-ca FILE           PEM CA bundle to verify the server (system roots)\n"
         "      --tls-cert FILE         client certificate, for mTLS (with --tls-key)\n"
         "      --tls-key FILE          client private key, for mTLS\n"
         "      --tls-server-name NAME  name to verify in the server's certificate\n"
         "      --api-key KEY           tesserad's API key ($TESSERA_API_KEY), sent as\n"
         "                              \"authorization: Bearer KEY\"\n";
}

absl::StatusOr<ConnectionOptions> read_connection_flags(
    const Args& args, const std::function<const char*(const char*)>& getenv) {
  ConnectionOptions options;
  options.address = args.get("server", kDefaultServer);
  if (options.address.empty()) return absl::InvalidArgumentError("--server needs HOST:PORT");
  options.ca_file = args.get("tls-ca");
  options.cert_file = args.get("tls-cert");
  options.key_file = args.get("tls-key");
  options.server_name = args.get("tls-server-name");
  options.tls = args.has("tls") || !options.ca_file.empty() || !options.cert_file.empty() ||
                !options.key_file.empty() || !options.server_name.empty();
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (mTLS)");
  }
  if (args.has("api-key")) {
    options.api_key = args.get("api-key");
    if (options.api_key.empty()) return absl::InvalidArgumentError("--api-key needs a key");
  } else if (const char* env = getenv("TESSERA_API_KEY"); env != nullptr) {
    options.api_key = env;
  }
  return options;
}

absl::StatusOr<std::unique_ptr<ServerConnection>> ServerConnection::open(
    const ConnectionOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments channel_args;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      auto ca = read_file("tls-ca", options.ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!options.cert_file.empty()) {
      auto cert = read_file("tls-cert", options.cert_file);
      if (!cert.ok()) return cert.status();
      auto key = read_file("tls-key", options.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
    if (!options.server_name.empty()) channel_args.SetSslTargetNameOverride(options.server_name);
  }
  std::unique_ptr<ServerConnection> connection(new ServerConnection());
  connection->address_ = options.address;
  connection->api_key_ = options.api_key;
  connection->channel_ = grpc::CreateCustomChannel(options.address, credentials, channel_args);
  connection->generation_ = v1::Generation::NewStub(connection->channel_);
  return connection;
}

void ServerConnection::authorize(grpc::ClientContext& context) const {
  if (!api_key_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", api_key_));
}

absl::Status ServerConnection::check(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string message =
      absl::StrCat(status_code_name(status.error_code()), ": ", status.error_message());
  // A draining server also answers UNAVAILABLE, but over a connection that is up.
  const bool connection_failed = (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                                  status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
                                 channel_->GetState(false) != GRPC_CHANNEL_READY;
  if (connection_failed)
    message = absl::StrCat("cannot connect to tesserad at ", address_, ": ", message);
  return absl::Status(code, message);
}

void set_deadline_after(grpc::ClientContext& context, double seconds) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(seconds)));
}

std::string status_code_name(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace tessera::cli
