#include "tools/tcp_connect.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "absl/strings/str_cat.h"

namespace tessera::cli {

absl::Status connect_host_port(const std::string& address, boost::beast::tcp_stream& stream) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\" is not HOST:PORT"));
  }
  boost::asio::ip::tcp::resolver resolver(stream.get_executor());
  boost::beast::error_code ec;
  const auto endpoints = resolver.resolve(address.substr(0, colon), address.substr(colon + 1), ec);
  if (!ec) stream.connect(endpoints, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot connect to ", address, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace tessera::cli
