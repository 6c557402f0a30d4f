/* SHA-256 (FIPS 180-4), small and dependency-free: model digests and file comparisons. */
#ifndef AS_DIGEST_H
#define AS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "model/errors.h"

typedef struct {
    uint32_t h[8];
    uint64_t len;       /* bytes hashed so far */
    uint8_t buf[64];
    size_t n;           /* bytes waiting in buf */
} AsSha256;

void as_sha256_init(AsSha256 *s);
void as_sha256_update(AsSha256 *s, const void *data, size_t n);
void as_sha256_final(AsSha256 *s, uint8_t out[32]);
/* 64 lower-case hex digits and a NUL. */
void as_sha256_hex(const uint8_t d[32], char hex[65]);
/* The SHA-256 of a whole file, in hex. */
int as_sha256_file(const char *path, char hex[65], AsError *err);

#endif
