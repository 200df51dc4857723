#include "worker/trainer/checkpoint/pickle_scan.h"

#include <cstddef>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/trainer/checkpoint/little_endian.h"

namespace baton::trainer {
namespace {

// How an opcode's argument is laid out (Python's Lib/pickletools.py).
enum class Arg {
  kNone,
  kFixed,      // `size` bytes
  kMemoIndex,  // `size` bytes, little-endian: a memo index
  kCounted,    // a `size`-byte little-endian length, then that many bytes
  kLine,       // up to and including '\n'
  kMemoLine,   // a decimal memo index, then '\n'
  kTwoLines,   // two '\n'-terminated lines (module, name)
};

struct Opcode {
  Arg arg = Arg::kNone;
  int size = 0;
  bool known = false;
};

Opcode Op(Arg arg, int size = 0) { return Opcode{arg, size, true}; }

// The opcode table, indexed by the opcode byte.
struct Table {
  Opcode ops[256];
  Table() {
    for (unsigned char c : absl::string_view("(.0123NRab}]delost)uQ")) ops[c] = Op(Arg::kNone);
    for (unsigned char c :
         {0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98}) {
      ops[c] = Op(Arg::kNone);
    }
    ops['J'] = Op(Arg::kFixed, 4);
    ops['K'] = Op(Arg::kFixed, 1);
    ops['M'] = Op(Arg::kFixed, 2);
    ops['G'] = Op(Arg::kFixed, 8);
    ops[0x80] = Op(Arg::kFixed, 1);     // PROTO
    ops[0x82] = Op(Arg::kFixed, 1);     // EXT1
    ops[0x83] = Op(Arg::kFixed, 2);     // EXT2
    ops[0x84] = Op(Arg::kFixed, 4);     // EXT4
    ops[0x95] = Op(Arg::kFixed, 8);     // FRAME (its length only groups the opcodes after it)
    ops['q'] = Op(Arg::kMemoIndex, 1);  // BINPUT
    ops['r'] = Op(Arg::kMemoIndex, 4);  // LONG_BINPUT
    ops['h'] = Op(Arg::kMemoIndex, 1);  // BINGET
    ops['j'] = Op(Arg::kMemoIndex, 4);  // LONG_BINGET
    ops['U'] = Op(Arg::kCounted, 1);    // SHORT_BINSTRING
    ops['T'] = Op(Arg::kCounted, 4);    // BINSTRING
    ops[0x8c] = Op(Arg::kCounted, 1);   // SHORT_BINUNICODE
    ops['X'] = Op(Arg::kCounted, 4);    // BINUNICODE
    ops[0x8d] = Op(Arg::kCounted, 8);   // BINUNICODE8
    ops['C'] = Op(Arg::kCounted, 1);    // SHORT_BINBYTES
    ops['B'] = Op(Arg::kCounted, 4);    // BINBYTES
    ops[0x8e] = Op(Arg::kCounted, 8);   // BINBYTES8
    ops[0x96] = Op(Arg::kCounted, 8);   // BYTEARRAY8
    ops[0x8a] = Op(Arg::kCounted, 1);   // LONG1
    ops[0x8b] = Op(Arg::kCounted, 4);   // LONG4
    for (unsigned char c : absl::string_view("ISLVFP")) ops[c] = Op(Arg::kLine);
    ops['g'] = Op(Arg::kMemoLine);  // GET
    ops['p'] = Op(Arg::kMemoLine);  // PUT
    ops['c'] = Op(Arg::kTwoLines);  // GLOBAL
    ops['i'] = Op(Arg::kTwoLines);  // INST
  }
};

const Table& Opcodes() {
  static const Table* const table = new Table();
  return *table;
}
constexpr unsigned char kStop = '.';

}  // namespace

absl::Status CheckPickleBounds(absl::string_view pickle) {
  size_t at = 0;
  while (at < pickle.size()) {
    const size_t start = at;
    const unsigned char code = static_cast<unsigned char>(pickle[at++]);
    const Opcode& op = Opcodes().ops[code];
    const size_t left = pickle.size() - at;
    const auto bad = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat("malformed checkpoint: pickle opcode 0x",
                                              absl::Hex(code), " at byte ", start, ": ", what));
    };
    if (!op.known) return bad("not a pickle opcode");
    if (code == kStop) {
      if (at != pickle.size()) return bad("bytes after STOP");
      return absl::OkStatus();
    }
    switch (op.arg) {
      case Arg::kNone:
        break;
      case Arg::kFixed:
      case Arg::kMemoIndex:
        if (static_cast<size_t>(op.size) > left) return bad("its argument runs past the end");
        if (op.arg == Arg::kMemoIndex &&
            LoadLittleEndian(pickle.substr(at, op.size)) >= pickle.size()) {
          return bad("memo index beyond any this pickle could fill");
        }
        at += op.size;
        break;
      case Arg::kCounted: {
        if (static_cast<size_t>(op.size) > left) return bad("its length runs past the end");
        const uint64_t length = LoadLittleEndian(pickle.substr(at, op.size));
        at += op.size;
        if (length > pickle.size() - at) {
          return bad(absl::StrCat("claims ", length, " bytes, ", pickle.size() - at, " are left"));
        }
        at += length;
        break;
      }
      case Arg::kLine:
      case Arg::kMemoLine:
      case Arg::kTwoLines: {
        const int lines = op.arg == Arg::kTwoLines ? 2 : 1;
        for (int i = 0; i < lines; ++i) {
          const size_t end = pickle.find('\n', at);
          if (end == absl::string_view::npos) return bad("its line has no end");
          uint64_t index = 0;
          if (op.arg == Arg::kMemoLine &&
              (!absl::SimpleAtoi(pickle.substr(at, end - at), &index) || index >= pickle.size())) {
            return bad("memo index not a number below the pickle's size");
          }
          at = end + 1;
        }
        break;
      }
    }
  }
  return absl::DataLossError("malformed checkpoint: pickle ends without STOP");
}

}  // namespace baton::trainer
