#include "common/security/tls.h"

#include <arpa/inet.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace baton {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", what, " ", path, " (a PEM file; tools/certs.sh makes one)"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (!absl::StrContains(ss.str(), "-----BEGIN ")) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", path, " is not a PEM file (no -----BEGIN line)"));
  }
  return ss.str();
}

// This end's key and certificate chain (--tls_key, --tls_cert).
absl::StatusOr<grpc::SslServerCredentialsOptions::PemKeyCertPair> ReadKeyPair(
    const TlsFiles& files) {
  auto key = ReadPem(files.key, "--tls_key");
  if (!key.ok()) return key.status();
  auto cert = ReadPem(files.cert, "--tls_cert");
  if (!cert.ok()) return cert.status();
  return grpc::SslServerCredentialsOptions::PemKeyCertPair{*std::move(key), *std::move(cert)};
}

absl::Status NeedsTls(const TransportSecurity& security) {
  if (security.insecure) {
    return absl::InvalidArgumentError("TLS credentials asked for with --insecure set");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurity& security) {
  if (absl::Status s = NeedsTls(security); !s.ok()) return s;
  const TlsFiles& files = security.tls;
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs --tls_cert and --tls_key (the server's certificate and key; "
        "tools/certs.sh makes them), or --insecure for plaintext on a loopback address");
  }
  grpc::SslServerCredentialsOptions options(
      files.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                       : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  auto pair = ReadKeyPair(files);
  if (!pair.ok()) return pair.status();
  options.pem_key_cert_pairs.push_back(*std::move(pair));
  if (!files.ca.empty()) {
    auto ca = ReadPem(files.ca, "--ca");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportSecurity& security) {
  if (absl::Status s = NeedsTls(security); !s.ok()) return s;
  const TlsFiles& files = security.tls;
  if (files.ca.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs --ca (the CA certificate the coordinator's certificate chains to), or "
        "--insecure for plaintext to a loopback address");
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together (this end's certificate and its key)");
  }
  grpc::SslCredentialsOptions options;
  auto ca = ReadPem(files.ca, "--ca");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *std::move(ca);
  if (!files.cert.empty()) {
    auto pair = ReadKeyPair(files);
    if (!pair.ok()) return pair.status();
    options.pem_private_key = std::move(pair->private_key);
    options.pem_cert_chain = std::move(pair->cert_chain);
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::string> CertificateCommonName(const std::string& path) {
  absl::StatusOr<std::string> pem = ReadPem(path, "--tls_cert");
  if (!pem.ok()) return pem.status();
  BIO* bio = ::BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size()));
  X509* cert = bio == nullptr ? nullptr : ::PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  char cn[256] = {};
  const int n = cert == nullptr ? -1
                                : ::X509_NAME_get_text_by_NID(::X509_get_subject_name(cert),
                                                              NID_commonName, cn, sizeof(cn));
  ::X509_free(cert);
  ::BIO_free(bio);
  if (n <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tls_cert ", path, ": no certificate with a subject CN in it"));
  }
  return std::string(cn, static_cast<size_t>(n));
}

std::string HostOfAddress(const std::string& address) {
  std::string s = address;
  if (absl::StartsWith(s, "dns:///")) s = s.substr(7);
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    return close == std::string::npos ? s : s.substr(1, close - 1);
  }
  const size_t colon = s.rfind(':');
  return colon == std::string::npos ? s : s.substr(0, colon);
}

absl::Status CheckLoopbackOnly(const std::string& address, const std::string& what) {
  if (absl::StartsWith(address, "unix:")) return absl::OkStatus();
  const std::string host = HostOfAddress(address);
  bool loopback = host == "localhost";
  in_addr v4;
  in6_addr v6;
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    loopback = (ntohl(v4.s_addr) >> 24) == 127;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    loopback = IN6_IS_ADDR_LOOPBACK(&v6);
  }
  if (loopback) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--insecure (plaintext) is only allowed on loopback addresses, and ", what, " is ",
      address, ": use TLS (tools/certs.sh makes a CA, certificates and tokens) or a "
      "127.0.0.1/[::1]/localhost address"));
}

}  // namespace baton
