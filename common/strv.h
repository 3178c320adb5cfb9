/*
 * A growable NULL-terminated list of strings, each owned.  The one list
 * type spd uses for argv, environments and path lists; common/ code: it
 * returns errors, never logs.
 */
#ifndef SPD_COMMON_STRV_H
#define SPD_COMMON_STRV_H

#include <stddef.h>

struct strv {
	char **v; /* NULL-terminated once anything was pushed, else NULL */
	size_t n;
};

/* Append a copy of s.  Returns 0 or -ENOMEM (the list is unchanged). */
int strv_push(struct strv *l, const char *s);
/* A copy of a NULL-terminated array of strings (NULL: an empty one), or
 * NULL when out of memory.  Free with strv_free_array. */
char **strv_copy(char *const *v);
/* Free every string and the array; the list is empty again.  NULL and an
 * empty list are fine. */
void strv_free(struct strv *l);
/* Free a NULL-terminated array of owned strings (what a strv's v was, once
 * taken from it); NULL allowed. */
void strv_free_array(char **v);

#endif
