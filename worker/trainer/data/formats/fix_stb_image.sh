#!/usr/bin/env bash
# Writes the system's stb_image.h (Debian 12's libstb-dev holds v2.27) to OUT with two
# memory-safety fixes of upstream's v2.28, both found by image_fuzz:
#   - stbi__process_dht: a Huffman table whose 16 code counts add up to more than 256
#     overflowed stbi__build_huffman's arrays; it is now "bad DHT header".
#   - stbi__jpeg_huff_decode: a code of a malformed table gave a symbol index outside
#     [0, 256), read out of bounds (and failed an assertion); it is now a decode error.
#     So is a code that does not match its table, which v2.28 still asserts on (aborting
#     the trainer unless built with NDEBUG).
# A header that already has them (v2.28 or later) is copied unchanged; one in which an
# anchor line is not found exactly once fails the build (review the fixes for it).
# Usage: fix_stb_image.sh IN OUT
set -euo pipefail
in=$1
out=$2
if grep -q 'c < 0 || c >= 256' "$in"; then
  cp "$in" "$out"
  exit 0
fi
awk '
  $0 == "            L -= 17;" {
    print "            if (n > 256) return stbi__err(\"bad DHT header\",\"Corrupt JPEG\"); /* Baton: v2.28 */"
    dht++
  }
  $0 == "   STBI_ASSERT((((j->code_buffer) >> (32 - h->size[c])) & stbi__bmask[h->size[c]]) == h->code[c]);" {
    print "   if (c < 0 || c >= 256) return -1; /* Baton: v2.28 */"
    print "   if ((((j->code_buffer) >> (32 - h->size[c])) & stbi__bmask[h->size[c]]) != h->code[c]) return -1; /* Baton */"
    huff++
    next
  }
  { print }
  END {
    if (dht != 1 || huff != 1) {
      printf "fix_stb_image.sh: anchors found %d and %d times, expected once each\n", dht, huff > "/dev/stderr"
      exit 1
    }
  }
' "$in" >"$out"
