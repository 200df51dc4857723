// The single definition of stb_image / stb_image_write in Baton (libstb-dev, header-only),
// used by image.cc: decoding JPEG and PNG only, encoding PNG and JPEG, no stdio. The
// decoder is the system's with the fixes of fix_stb_image.sh.
// Compiled on its own so that a sanitizer exception for stb's code (see BUILD) covers no
// Baton code.

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include "worker/trainer/data/formats/stb_image_fixed.h"
#include <stb/stb_image_write.h>
