#pragma once

// The release of this build of Baton (every binary: coordinator, worker, trainer, CLI).
// Bumped with each release; the wire protocols have their own versions
// (common/protocol_version.h for coordinator <-> worker; package baton.v1 for the API).

namespace baton {

inline constexpr char kVersion[] = "0.15.0";

}  // namespace baton
