#pragma once

// The built-in mutator of the fuzz targets' short run in the normal test suite
// (tools/fuzz/fuzz.bzl): a few libFuzzer-style byte edits, driven by a seeded Prng so the
// same seed gives the same inputs on every machine. It finds shallow bugs near the seed
// corpus; the coverage-guided search is libFuzzer's, under --config=fuzz.
//
// Thread-compatible; no global state.

#include <cstddef>
#include <string>
#include <vector>

#include "worker/trainer/data/formats/random.h"

namespace baton::fuzz {

// Applies 1..4 random edits to `data` (bit flips, byte sets, "interesting" integers,
// insertions, erasures, duplicated ranges, a splice from one of `others`, truncation),
// drawing every choice from `rng`. The result is at most `max_size` bytes.
void Mutate(std::string& data, const std::vector<std::string>& others, size_t max_size,
            trainer::Prng& rng);

}  // namespace baton::fuzz
