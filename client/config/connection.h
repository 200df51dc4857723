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
//
// Precedence, per field: flag > environment > the selected context > default. The context
// is --context, else BATON_CONTEXT, else current_context (none: no file needed).

#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

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
  std::string coordinator;
  bool insecure = false;
  std::string ca;     // PEM file path; set unless insecure
  std::string token;  // the bearer token itself; may be empty (insecure, no token)
  std::string context;  // the context used, "" if none
};

// Resolves `in` (reading the config file and the token file). Errors say which flag,
// variable or file to fix: FAILED_PRECONDITION for a missing CA/file, INVALID_ARGUMENT
// for an unknown context or plaintext to a non-loopback address.
absl::StatusOr<Connection> ResolveConnection(const ConnectionInputs& in,
                                             const std::string& default_coordinator);

// A channel to `conn.coordinator`: TLS checked against `conn.ca` (or plaintext), every call
// carrying "authorization: Bearer <token>" when there is a token. `args` are extra channel
// arguments (message sizes).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const Connection& conn,
                                                          const grpc::ChannelArguments& args);

}  // namespace baton::cli
