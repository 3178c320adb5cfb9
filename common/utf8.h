/*
 * UTF-8 validation.  Refusing invalid UTF-8 at the edge means no later
 * stage (JSON encoder, terminal, journal) has to guess what bytes mean.
 */
#ifndef SPD_COMMON_UTF8_H
#define SPD_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/*
 * True when the n bytes at s are well-formed UTF-8 (RFC 3629): no overlong
 * forms, no surrogates, nothing above U+10FFFF.  NUL bytes are valid UTF-8;
 * callers that must refuse them check separately.
 */
bool utf8_valid(const char *s, size_t n);

#endif
