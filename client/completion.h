#pragma once

// Shell completion for `baton`, generated from the command table (command_table.h).

#include <string>

namespace baton::cli {

// A completion script for `shell` ("bash" or "zsh"; anything else gives ""): it completes
// commands, each command's flags, the values of -o/--output, --color, --for and --state,
// `completion`'s shells, and job ids (from `baton jobs -o name`, with the line's
// --coordinator/--context) where a JOB goes.
std::string CompletionScript(const std::string& shell);

}  // namespace baton::cli
