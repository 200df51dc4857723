#pragma once

// A scan of a pickle (Python's pickle protocols 0 to 5) before LibTorch's unpickler reads
// it. That unpickler sizes what it allocates by the stream's own numbers before checking
// them against what is left: a 5-byte BINUNICODE header that claims 2 GiB allocates 2 GiB,
// a LONG_BINPUT to memo slot 4e9 grows the memo table by 4e9 entries. A checkpoint's
// pickle is written by the job's own ranks, so such a file would make the next
// generation's trainer allocate gigabytes from a few bytes (found by
// checkpoint_contents_fuzz). The scan reads opcodes only, allocates nothing, and builds no
// objects.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

// OK iff `pickle` is a sequence of known opcodes, each argument inside `pickle` (a length
// never exceeds the bytes left), every memo index (PUT, BINPUT, LONG_BINPUT, GET, ...)
// below pickle.size(), ending with STOP. DATA_LOSS naming the opcode and its offset
// otherwise. It does not check that the pickle makes sense (the unpickler does).
absl::Status CheckPickleBounds(absl::string_view pickle);

}  // namespace baton::trainer
