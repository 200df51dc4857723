#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton {

// The PEM files of one end of a TLS connection. Paths; empty means "not given".
struct TlsFiles {
  std::string ca;    // CA certificate(s) the peer must chain to.
  std::string cert;  // This end's certificate chain.
  std::string key;   // This end's private key.
};

// How a daemon or the CLI talks on the network: TLS (the default) or, only when asked for
// with --insecure, plaintext.
struct TransportSecurity {
  bool insecure = false;
  TlsFiles tls;
};

// Server credentials for the coordinator: `files.cert`/`files.key` are required. With
// `files.ca`, clients may present a certificate, which must then chain to it (workers do;
// users authenticate with tokens instead and present none). Errors name the file and flag.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurity& security);

// Channel credentials for a worker or the CLI: the server must chain to `files.ca`
// (required); `files.cert`/`files.key` (both or neither) are this end's client certificate.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportSecurity& security);

// OK if `address` (HOST:PORT, "[v6]:PORT" or "unix:...") can only be reached from this
// machine: a loopback IP, "localhost", or a unix socket. Plaintext is refused elsewhere:
// FAILED_PRECONDITION naming the address and the flag (`what`, e.g. "--listen").
absl::Status CheckLoopbackOnly(const std::string& address, const std::string& what);

// The subject CN of the first certificate in the PEM file at `path` (a worker's name).
absl::StatusOr<std::string> CertificateCommonName(const std::string& path);

// The host part of HOST:PORT or [HOST]:PORT (a "dns:///" scheme dropped); an address
// without a port is returned whole, one with an unclosed '[' unchanged.
std::string HostOfAddress(const std::string& address);

}  // namespace baton
