// The single definition of stb_image / stb_image_write in Baton (libstb-dev, header-only),
// used by image.cc: decoding JPEG and PNG only, encoding PNG and JPEG, no stdio. The
// decoder is the system's with the fixes of fix_stb_image.sh.
// Compiled on its own so that a sanitizer exception for stb's code (see BUILD) covers no
// Baton code.

#include <cstddef>
#include <cstdlib>

namespace {

// stb allocates what a file's header claims (a PNG IDAT chunk's length, the pixel buffer)
// before it has read that much: refuse anything above what an image of kMaxImagePixels
// (image.h; 256 MiB as RGBA, its compressed data less) can need, so that a few bytes
// cannot claim gigabytes. stb reports the refusal as "outofmem".
constexpr size_t kMaxStbAllocation = size_t{512} << 20;

void* StbMalloc(size_t n) { return n > kMaxStbAllocation ? nullptr : std::malloc(n); }
void* StbRealloc(void* p, size_t n) {
  return n > kMaxStbAllocation ? nullptr : std::realloc(p, n);
}

}  // namespace

#define STBI_MALLOC(sz) StbMalloc(sz)
#define STBI_REALLOC(p, newsz) StbRealloc(p, newsz)
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include "worker/trainer/data/formats/stb_image_fixed.h"
#include <stb/stb_image_write.h>
