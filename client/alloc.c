/*
 * spctl's allocator (client/alloc.h).
 *
 * Why spctl has its own: an agent starts one spctl per command, hundreds
 * per task, so spctl's start and exit are on every command's path (issue
 * 16).  musl's malloc gives memory back as soon as a group of blocks is
 * free: a `spctl run` made four munmap calls, and on a virtual machine each
 * one's TLB flush is an exit to the hypervisor and, once the process has
 * run on both CPUs, an interprocessor interrupt.  They cost about 0.3 ms of
 * a 1.5 ms client (bench/README.md, eleventh pass).  This allocator takes
 * memory and keeps it: a static arena first (untouched pages cost
 * nothing), then chunks mapped from the kernel, never unmapped; freed
 * blocks go on a list per size class and are reused.
 *
 * Blocks: a 16-byte header, then the caller's bytes, 16-byte aligned.
 * Classes hold 16 << k bytes, k = 0 .. ALLOC_CLASSES - 1 (up to
 * ALLOC_CLASS_MAX).  A larger request is mapped on its own and unmapped
 * when freed.  The header's tag says whether a block is in use: freeing a
 * block twice, or a pointer that is not one of ours, aborts instead of
 * corrupting the lists (what musl's malloc also refuses).
 *
 * Not thread-safe: spctl has one thread (and the builds that could have
 * more, glibc's and the sanitizers', keep their libc's malloc).  Not
 * async-signal-safe, as no malloc is.
 */
#include "client/alloc.h"

#include <errno.h>
#ifdef SPCTL_OWN_MALLOC
#include <malloc.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALLOC_MIN 16
#define ALLOC_CLASSES 13 /* 16 << 12 == ALLOC_CLASS_MAX */
#define CLASS_BIG 0xffffu
#define TAG_USED 0x53706c55u /* "UlpS" */
#define TAG_FREE 0x53706c46u /* "FlpS" */
/* The static arena: enough for any one-shot command's allocations (a
 * `spctl run` takes about 20 KiB); bss, so untouched pages cost nothing. */
#define ARENA_STATIC (256 * 1024)
/* Each further chunk taken from the kernel. */
#define ARENA_CHUNK (1024 * 1024)

struct hdr {
	uint32_t tag;
	uint32_t cls;
	/* CLASS_BIG: the mapping's length; otherwise the class's bytes. */
	size_t cap;
};

_Static_assert(sizeof(struct hdr) == 16, "a header keeps 16-byte alignment");
_Static_assert((ALLOC_MIN << (ALLOC_CLASSES - 1)) == ALLOC_CLASS_MAX,
	       "the classes end at ALLOC_CLASS_MAX");

struct free_block {
	struct free_block *next;
};

static _Alignas(16) unsigned char arena_static[ARENA_STATIC];
static unsigned char *bump = arena_static;
static unsigned char *bump_end = arena_static + ARENA_STATIC;
static struct free_block *free_list[ALLOC_CLASSES];

static __attribute__((noreturn)) void corrupt(const char *what)
{
	static const char pre[] = "spctl: memory error: ";
	ssize_t r;

	r = write(2, pre, sizeof(pre) - 1);
	r = write(2, what, strlen(what));
	r = write(2, "\n", 1);
	(void)r;
	abort();
}

static unsigned class_of(size_t n)
{
	unsigned k = 0;

	while ((size_t)ALLOC_MIN << k < n)
		k++;
	return k;
}

/* The bytes a block holds for its caller. */
static size_t usable(const struct hdr *h)
{
	return h->cls == CLASS_BIG ? h->cap - sizeof(struct hdr) : h->cap;
}

/* The length of a mapping of its own for n bytes, or 0 (too large). */
static size_t big_len(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (n > SIZE_MAX - sizeof(struct hdr) - page)
		return 0;
	return (n + sizeof(struct hdr) + page - 1) & ~(page - 1);
}

static struct hdr *hdr_of(void *p)
{
	struct hdr *h = (struct hdr *)p - 1;

	if (((uintptr_t)p & 15) != 0 || h->tag != TAG_USED ||
	    (h->cls >= ALLOC_CLASSES && h->cls != CLASS_BIG))
		corrupt(h->tag == TAG_FREE ? "a block freed twice"
					   : "not a block of malloc's");
	return h;
}

/* A new block of class k from the arena, or NULL (ENOMEM). */
static struct hdr *carve(unsigned k)
{
	size_t need = sizeof(struct hdr) + ((size_t)ALLOC_MIN << k);
	struct hdr *h;

	if ((size_t)(bump_end - bump) < need) {
		void *m = mmap(NULL, ARENA_CHUNK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return NULL;
		/* The old arena's tail is left unused: at most a class's
		 * size, once per chunk. */
		bump = m;
		bump_end = bump + ARENA_CHUNK;
	}
	h = (struct hdr *)bump;
	bump += need;
	return h;
}

static void *big_alloc(size_t n)
{
	size_t len = big_len(n);
	struct hdr *h = len ? mmap(NULL, len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
			    : MAP_FAILED;

	if (h == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	h->tag = TAG_USED;
	h->cls = CLASS_BIG;
	h->cap = len;
	return h + 1;
}

void *alloc_malloc(size_t n)
{
	struct free_block *f;
	struct hdr *h;
	unsigned k;

	if (n > ALLOC_CLASS_MAX)
		return big_alloc(n);
	k = class_of(n);
	f = free_list[k];
	if (f) {
		h = (struct hdr *)f - 1;
		if (h->tag != TAG_FREE || h->cls != k)
			corrupt("a free block overwritten");
		free_list[k] = f->next;
	} else if (!(h = carve(k))) {
		errno = ENOMEM;
		return NULL;
	}
	h->tag = TAG_USED;
	h->cls = k;
	h->cap = (size_t)ALLOC_MIN << k;
	return h + 1;
}

void alloc_free(void *p)
{
	struct free_block *f = p;
	struct hdr *h;

	if (!p)
		return;
	h = hdr_of(p);
	if (h->cls == CLASS_BIG) {
		munmap(h, h->cap);
		return;
	}
	h->tag = TAG_FREE;
	f->next = free_list[h->cls];
	free_list[h->cls] = f;
}

void *alloc_calloc(size_t nmemb, size_t size)
{
	void *p;

	if (size && nmemb > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	p = alloc_malloc(nmemb * size);
	if (p)
		memset(p, 0, nmemb * size);
	return p;
}

void *alloc_realloc(void *p, size_t n)
{
	struct hdr *h;
	size_t have;
	void *q;

	if (!p)
		return alloc_malloc(n);
	h = hdr_of(p);
	have = usable(h);
	if (n <= have)
		return p;
	if (h->cls == CLASS_BIG) {
		size_t len = big_len(n);

		q = len ? mremap(h, h->cap, len, MREMAP_MAYMOVE) : MAP_FAILED;
		if (q == MAP_FAILED) {
			errno = ENOMEM;
			return NULL;
		}
		h = q;
		h->cap = len;
		return h + 1;
	}
	q = alloc_malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	alloc_free(p);
	return q;
}

int alloc_memalign(void **ret, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	if (align > 16)
		return EINVAL;
	p = alloc_malloc(n);
	if (!p)
		return ENOMEM;
	*ret = p;
	return 0;
}

size_t alloc_usable_size(void *p)
{
	if (!p)
		return 0;
	return usable(hdr_of(p));
}

#ifdef SPCTL_OWN_MALLOC
/* musl lets a program replace its malloc (the names below, all of them);
 * its own internal allocations, which are never freed, keep its simple
 * one. */
void *malloc(size_t n)
{
	return alloc_malloc(n);
}

void free(void *p)
{
	alloc_free(p);
}

void *calloc(size_t nmemb, size_t size)
{
	return alloc_calloc(nmemb, size);
}

void *realloc(void *p, size_t n)
{
	return alloc_realloc(p, n);
}

int posix_memalign(void **ret, size_t align, size_t n)
{
	return alloc_memalign(ret, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	void *p = NULL;
	int r = alloc_memalign(&p, align, n);

	if (r) {
		errno = r;
		return NULL;
	}
	return p;
}

void *memalign(size_t align, size_t n)
{
	return aligned_alloc(align, n);
}

size_t malloc_usable_size(void *p)
{
	return alloc_usable_size(p);
}
#endif
