#pragma once

// What the process shim (posix_process_launcher.cc) does about the descendants of its
// training process. The shim is a child subreaper, so everything the training process
// leaves behind becomes the shim's child. Every function here is async-signal-safe (the
// shim is a fork of a multi-threaded worker that never execs): raw system calls only.

#include <sys/types.h>

namespace baton::worker::shim {

// SIGKILLs every child of the calling process (found by scanning /proc/*/stat, as
// /proc/<pid>/task/*/children needs CONFIG_PROC_CHILDREN).
void KillAllChildren();

// Kills and reaps every remaining descendant of the calling process (a subreaper, so each
// one that loses its parent becomes its child): kill all children, reap one, look again,
// until none is left.
void KillAndReapAllDescendants();

// Reaps exited children other than `child` (orphans reparented to the caller). Returns true
// once `child` itself has exited (left unreaped).
bool ReapOrphansUntil(pid_t child);

}  // namespace baton::worker::shim
