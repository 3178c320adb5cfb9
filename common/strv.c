/*
 * The string list of common/strv.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strv.h"

int strv_push(struct strv *l, const char *s)
{
	char **nv = realloc(l->v, (l->n + 2) * sizeof(*nv));
	char *c;

	if (!nv)
		return -ENOMEM;
	l->v = nv;
	if (!(c = strdup(s))) {
		l->v[l->n] = NULL;
		return -ENOMEM;
	}
	l->v[l->n++] = c;
	l->v[l->n] = NULL;
	return 0;
}

char **strv_copy(char *const *v)
{
	size_t n = 0;
	char **c;

	while (v && v[n])
		n++;
	c = calloc(n + 1, sizeof(*c));
	for (size_t i = 0; c && i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			strv_free_array(c);
			return NULL;
		}
	return c;
}

void strv_free_array(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void strv_free(struct strv *l)
{
	if (!l)
		return;
	strv_free_array(l->v);
	l->v = NULL;
	l->n = 0;
}
