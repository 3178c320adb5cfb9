/*
 * A growable byte buffer.  Owns its memory; buf_free() accepts a buffer
 * that was never used.  data is always NUL-terminated past len so that it
 * can be handed to string functions, but it may contain NUL bytes.
 */
#ifndef SPD_COMMON_BUF_H
#define SPD_COMMON_BUF_H

#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

#define BUF_INIT                                                               \
	{                                                                      \
		NULL, 0, 0                                                     \
	}

/* Make room for at least n more bytes.  Returns 0 or -ENOMEM. */
int buf_reserve(struct buf *b, size_t n);
/* Append n bytes.  Returns 0 or -ENOMEM; on failure b is unchanged. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Append a NUL-terminated string (without its NUL). */
int buf_puts(struct buf *b, const char *s);
/* Append printf-formatted text.  Returns 0, -ENOMEM or -EINVAL. */
int buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes (n <= len), keeping the rest. */
void buf_consume(struct buf *b, size_t n);
/* Forget the contents but keep the allocation. */
void buf_reset(struct buf *b);
/* Release the memory; b may be reused afterwards. */
void buf_free(struct buf *b);

#endif
