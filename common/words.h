/*
 * Splitting a configuration line into words, as a shell would split a
 * simple command and no further: blanks separate words; '…' quotes
 * literally; "…" quotes with \" \\ \$ \` escapes; a backslash escapes the
 * next character.  Anything a shell would do more with — unquoted
 * | & ; < > ( ) ` $, or $ and ` inside double quotes — is refused rather
 * than taken literally: a line that looks like a pipeline or an expansion
 * must not quietly mean something else (spd.conf's policy lists, a
 * project's checks).
 */
#ifndef SPD_COMMON_WORDS_H
#define SPD_COMMON_WORDS_H

#include <stddef.h>

/* A line longer than this is refused (-E2BIG). */
#define WORDS_LINE_MAX 4096

/*
 * Split s into at most max words.  On success stores a NULL-terminated
 * array of malloc'd words in *ret (free with words_free) and returns the
 * count (0 for a blank line).  Returns -EINVAL for an unterminated quote,
 * a trailing backslash or a shell metacharacter, -E2BIG past max words or
 * WORDS_LINE_MAX bytes, -ENOMEM.
 */
int words_split(const char *s, size_t max, char ***ret);
/* Free what words_split returned; NULL allowed. */
void words_free(char **words);

#endif
