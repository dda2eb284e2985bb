// zlib's deflate and inflate. `deflateInit2` and `inflateInit2` are macros, which Swift cannot call: wrapped here.
#include <zlib.h>

static inline int czlib_deflate_init_raw(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}

static inline int czlib_inflate_init_raw(z_streamp stream) {
    return inflateInit2(stream, -15);
}
