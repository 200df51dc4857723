#pragma once

// FUZZ_CHECK(condition): an invariant of a fuzz target. When it does not hold, names it
// (file:line and the condition) on stderr and aborts, which libFuzzer and fuzz_main both
// report as a crash with the input saved.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                             \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__,      \
                   #condition);                                                           \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
