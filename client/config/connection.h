#pragma once

// Where the `baton` CLI connects and as whom: flags, environment and the config file with
// named contexts, resolved into one Connection.
//
// Config file (YAML; BATON_CONFIG, else $XDG_CONFIG_HOME/baton/config.yaml, else
// ~/.config/baton/config.yaml; tools/certs.sh writes one):
//
//   current_context: alice
//   contexts:
//     alice:
//       coordinator: baton.example.com:7070
//       ca: /etc/baton/ca.crt          # the CA the coordinator's certificate chains to
//       token_file: ~/.baton/alice.token
//     local:
//       coordinator: 127.0.0.1:7070
//       insecure: true                 # plaintext: loopback addresses only
//     ha:                              # a coordinator run as replicas: list them all
//       coordinator: c1.example.com:7070,c2.example.com:7070,c3.example.com:7070
//       ca: /etc/baton/ca.crt
//
// Precedence, per field: flag > environment > the selected context > default. The context
// is --context, else BATON_CONTEXT, else current_context (none: no file needed).
//
// The coordinator, wherever it comes from, is one address or a comma-separated list of its
// replicas' (ParseCoordinatorAddresses, common/net/coordinator_addresses.h). With several,
// OpenChannel dials the one whose grpc.health.v1 reports baton.v1.JobService SERVING: the
// leader.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::cli {

struct ContextConfig {
  std::string coordinator;
  std::string ca;
  std::string token_file;
  bool insecure = false;
};

struct CliConfig {
  std::string current_context;
  std::map<std::string, ContextConfig> contexts;
};

// Parses a config file's text. INVALID_ARGUMENT naming the context and field that is wrong
// (unknown keys are errors, so a typo never silently means "no TLS").
absl::StatusOr<CliConfig> ParseCliConfig(const std::string& yaml, const std::string& origin);

// What the user gave on the command line and in the environment ("" / false: not given).
struct ConnectionInputs {
  std::string coordinator_flag, context_flag, ca_flag, token_file_flag;
  bool insecure_flag = false;
  std::string coordinator_env, context_env, config_env, token_env, insecure_env;
  std::string xdg_config_home, home;
};

// The resolved connection.
struct Connection {
  std::string coordinator;                // as given: one address or a comma-separated list
  std::vector<std::string> coordinators;  // its addresses, in order (at least one)
  bool insecure = false;
  std::string ca;     // PEM file path; set unless insecure
  std::string token;  // the bearer token itself; may be empty (insecure, no token)
  std::string context;  // the context used, "" if none
};

// Resolves `in` (reading the config file and the token file). Errors say which flag,
// variable or file to fix: FAILED_PRECONDITION for a missing CA/file, INVALID_ARGUMENT
// for an unknown context, a malformed address list or plaintext to a non-loopback address.
absl::StatusOr<Connection> ResolveConnection(const ConnectionInputs& in,
                                             const std::string& default_coordinator);

// A channel to the coordinator and the address it dials.
struct CoordinatorChannel {
  std::shared_ptr<grpc::Channel> channel;
  std::string address;  // one of Connection::coordinators
};

// Deadline of each leader probe when the connection lists several addresses.
inline constexpr absl::Duration kLeaderProbeTimeout = absl::Seconds(3);

// A channel to the coordinator: TLS checked against `conn.ca` (or plaintext), every call
// carrying "authorization: Bearer <token>" when there is a token. `args` are extra channel
// arguments (message sizes). With one address, a channel to it and nothing sent yet. With
// several, the leader's (LeaderFinder, each probe bounded by `probe_timeout`), or
// UNAVAILABLE listing what each address answered when none leads.
absl::StatusOr<CoordinatorChannel> OpenChannel(const Connection& conn,
                                               const grpc::ChannelArguments& args,
                                               absl::Duration probe_timeout = kLeaderProbeTimeout);

}  // namespace baton::cli
