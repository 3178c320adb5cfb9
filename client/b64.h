/*
 * Decoding the base64 that spd sends for output that is not UTF-8 (a run's
 * "data_b64"): RFC 4648's standard alphabet, padded, nothing else allowed.
 *
 * spctl decodes it itself rather than through libsodium so that it can be
 * linked against musl (Makefile, SPCTL_LIBC): a glibc process's start costs
 * about 0.45 ms of CPUID exits on a virtual machine, once per command an
 * agent runs (bench/README.md).  tests/unit/test_termsafe.c checks it
 * against libsodium's decoder, byte for byte, on random and broken input.
 */
#ifndef SPD_CLIENT_B64_H
#define SPD_CLIENT_B64_H

#include <stddef.h>

/*
 * The bytes that the n characters at s encode, in a new buffer of at
 * least one byte (*ret_len of them used; free() it), or NULL when s is
 * not canonical padded base64 (a length not a multiple of four, a
 * character outside the alphabet, padding inside, non-zero unused bits)
 * or memory ran out.
 */
unsigned char *b64_decode(const char *s, size_t n, size_t *ret_len);

#endif
