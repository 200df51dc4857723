#!/usr/bin/env bash
# Writes the system's stb_image.h (Debian 12's libstb-dev holds v2.27) to OUT with two
# memory-safety fixes of upstream's v2.28, both found by image_fuzz:
#   - stbi__process_dht: a Huffman table whose 16 code counts add up to more than 256
#     overflowed stbi__build_huffman's arrays; it is now "bad DHT header".
#   - stbi__jpeg_huff_decode: a code of a malformed table gave a symbol index outside
#     [0, 256), read out of bounds (and failed an assertion); it is now a decode error.
#     So is a code that does not match its table (or whose symbol has no length: the
#     check would shift by 32), which v2.28 still asserts on (aborting the trainer unless
#     built with NDEBUG).
#   - The bit reader (stbi__extend_receive, stbi__jpeg_get_bits, stbi__jpeg_get_bit and the
#     two fast-AC paths) let code_bits go negative on a stream that ran out of bits, so the
#     next refill shifted by 32 or more (undefined; found by image_fuzz). As in v2.28 it
#     now returns zeros there, and a fast-AC code longer than the bits left is an error.
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
    print "   if (h->size[c] == 0 || (((j->code_buffer) >> (32 - h->size[c])) & stbi__bmask[h->size[c]]) != h->code[c]) return -1; /* Baton */"
    huff++
    next
  }
  $0 == "   if (j->code_bits < n) stbi__grow_buffer_unsafe(j);" {
    print
    print "   if (j->code_bits < n) return 0; /* Baton: v2.28, out of bits */"
    bits++
    next
  }
  $0 == "   if (j->code_bits < 1) stbi__grow_buffer_unsafe(j);" {
    print
    print "   if (j->code_bits < 1) return 0; /* Baton: v2.28, out of bits */"
    bits++
    next
  }
  $0 ~ /^ *s = r & 15; \/\/ combined length$/ {
    print
    print "         if (s > j->code_bits) return stbi__err(\"bad huffman code\",\"Corrupt JPEG\"); /* Baton: v2.28 */"
    fastac++
    next
  }
  { print }
  END {
    if (dht != 1 || huff != 1 || bits != 3 || fastac != 2) {
      printf "fix_stb_image.sh: anchors found %d, %d, %d and %d times, expected 1, 1, 3 and 2\n", dht, huff, bits, fastac > "/dev/stderr"
      exit 1
    }
  }
' "$in" >"$out"
