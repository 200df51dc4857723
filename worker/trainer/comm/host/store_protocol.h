#pragma once

// Small protocols over a job's c10d store, shared by the collective backends' setup:
// string values, and every member of a group agreeing on one outcome.
//
// The store calls throw c10::Error (LibTorch's) when the store fails or a get times out;
// callers catch it at their boundary (setup functions return UNAVAILABLE).

#include <string>
#include <vector>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"

namespace baton::trainer {

// Blocks until `key` is set (or the store's timeout throws), then returns its value.
std::string StoreGetString(c10d::Store& store, const std::string& key);

void StoreSetString(c10d::Store& store, const std::string& key, const std::string& value);

// Every member i in [0, size) of a group calls this with its own status; each publishes
// "<phase>/<i>" and reads everyone's. Returns OK if every member was OK, else the error of
// the lowest failed member (its code; message "<what> (rank <ranks[i]>): <its message>", or
// its message alone if `what` is empty), the same on every member. `ranks` names the members in messages (member i is rank
// ranks[i]); empty: member i is rank i. Throws as the store does.
absl::Status AgreeOn(c10d::Store& store, const std::string& phase, int member, int size,
                     const absl::Status& mine, const std::string& what,
                     const std::vector<int>& ranks = {});

}  // namespace baton::trainer
