#include "server/pem_check.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "base/str_cat.h"

namespace tessera::server {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio memory_bio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// OpenSSL's reason for the last error on this thread, and the queue emptied; "" when none.
std::string openssl_reason() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "";
  const char* reason = ERR_reason_error_string(code);
  return reason == nullptr ? "" : str_cat(" (", reason, ")");
}

Cert first_certificate(const std::string& pem) {
  Bio bio = memory_bio(pem);
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace

absl::Status check_certificates(std::string_view key, const std::string& path, const std::string& pem) {
  ERR_clear_error();
  Bio bio = memory_bio(pem);
  int count = 0;
  while (Cert cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) ++count;
  // The loop ends at the end of the data (PEM_R_NO_START_LINE) or at a block that is broken.
  const unsigned long last = ERR_peek_last_error();
  const bool at_end = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  if (count == 0) {
    return absl::InvalidArgumentError(str_cat(key, ": \"", path, "\" holds no PEM certificate",
                                                   openssl_reason()));
  }
  if (last != 0 && !at_end) {
    return absl::InvalidArgumentError(str_cat(
        key, ": \"", path, "\": certificate ", count + 1, " is not a valid PEM certificate",
        openssl_reason()));
  }
  ERR_clear_error();
  return absl::OkStatus();
}

absl::Status check_key_pair(const std::string& cert_path, const std::string& cert_pem,
                            const std::string& key_path, const std::string& key_pem) {
  ERR_clear_error();
  Bio bio = memory_bio(key_pem);
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(str_cat(
        "tls_key: \"", key_path, "\" holds no PEM private key (or it is encrypted)", openssl_reason()));
  }
  Cert cert = first_certificate(cert_pem);
  if (!cert) {
    return absl::InvalidArgumentError(str_cat("tls_cert: \"", cert_path,
                                                   "\" holds no PEM certificate", openssl_reason()));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(str_cat(
        "tls_key: \"", key_path, "\" is not the private key of the certificate in tls_cert \"",
        cert_path, "\" (the first certificate of the chain must be the server's)"));
  }
  ERR_clear_error();
  return absl::OkStatus();
}

}  // namespace tessera::server
