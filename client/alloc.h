/*
 * spctl's allocator (client/alloc.c).  The musl build of spctl takes
 * malloc and its family from here (the Makefile defines SPCTL_OWN_MALLOC
 * for it): memory it has once taken is kept and reused, never given back
 * to the kernel, so that a command's few allocations cost no munmap and
 * no TLB shootdown.  The glibc and sanitizer builds keep their libc's
 * malloc; these functions are compiled there too, for the unit test.
 */
#ifndef SPD_CLIENT_ALLOC_H
#define SPD_CLIENT_ALLOC_H

#include <stddef.h>

/* The largest request served from the size classes; larger ones are
 * mapped on their own and unmapped when freed. */
#define ALLOC_CLASS_MAX 65536

void *alloc_malloc(size_t n);
void alloc_free(void *p);
void *alloc_calloc(size_t nmemb, size_t size);
void *alloc_realloc(void *p, size_t n);
/* Alignments up to 16 only (what malloc gives); larger: EINVAL. */
int alloc_memalign(void **ret, size_t align, size_t n);
/* The bytes p can hold: its class's, at least what was asked. */
size_t alloc_usable_size(void *p);

#endif
