// A client's connection to tesserad: the --server/--tls flags, the channel and stubs, and the
// one place where a failed RPC becomes an absl::Status that names the gRPC code (and, when the
// server could not be reached at all, the address that was tried).
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tessera/v1/tessera.grpc.pb.h"
#include "tools/cli_args.h"

namespace tessera::cli {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

struct ConnectionOptions {
  std::string address = kDefaultServer;  // --server HOST:PORT
  bool tls = false;                      // --tls (implied by any --tls-* flag)
  std::string ca_file;                   // --tls-ca: PEM roots; empty = the system's
  std::string cert_file;                 // --tls-cert: client certificate (mTLS)
  std::string key_file;                  // --tls-key: its private key (mTLS)
  std::string server_name;               // --tls-server-name: name to verify instead of HOST
  std::string api_key;                   // --api-key, else $TESSERA_API_KEY; empty = send none
};

// --server --tls-ca --tls-cert --tls-key --tls-server-name --api-key
const std::set<std::string>& connection_value_flags();
// --tls
const std::set<std::string>& connection_bool_flags();
const char* connection_flags_usage();

// `getenv` reads the environment (std::getenv by default): TESSERA_API_KEY when --api-key is not
// given.
absl::StatusOr<ConnectionOptions> read_connection_flags(
    const Args& args, const std::function<const char*(const char*)>& getenv = std::getenv);

class ServerConnection {
 public:
  // Creates the channel (connecting lazily, on the first call); fails only on bad TLS files.
  static absl::StatusOr<std::unique_ptr<ServerConnection>> open(const ConnectionOptions& options);

  const std::string& address() const { return address_; }
  v1::Generation::Stub& generation() { return *generation_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Adds "authorization: Bearer <api key>" to the call when a key was given. Every call this
  // CLI makes goes through here (tesserad wants the key on Generation and Admin when it has one).
  void authorize(grpc::ClientContext& context) const;

  // OK stays OK. Otherwise the code is kept and the message reads "CODE: server message"; when
  // the channel never reached the server (UNAVAILABLE or DEADLINE_EXCEEDED while not connected)
  // it reads "cannot connect to tesserad at ADDRESS: CODE: ...".
  absl::Status check(const grpc::Status& status) const;

 private:
  ServerConnection() = default;

  std::string address_;
  std::string api_key_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> generation_;
};

// Gives the call a deadline `seconds` from now.
void set_deadline_after(grpc::ClientContext& context, double seconds);

// "INVALID_ARGUMENT", "UNAVAILABLE", ... (gRPC and absl share the numbering).
std::string status_code_name(grpc::StatusCode code);

}  // namespace tessera::cli
