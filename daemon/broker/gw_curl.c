/*
 * libcurl loaded at the broker's first provider call
 * (daemon/broker/gw_curl.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "daemon/broker/gw_curl.h"
#include "common/util.h"

/* The oldest libcurl the broker's options need: CURLOPT_PROTOCOLS_STR,
 * which keeps a provider call to http and https, came in 7.85.0.  An
 * older library would ignore it (an unknown option is only an error
 * code, which setopt's callers do not read). */
#define GW_CURL_MIN_VERSION 0x075500

struct gw_curl_fns gw_curlf;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded;

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
	       "dlsym's pointers must hold a function's address");

#define FN(m, name)                                                            \
	{                                                                      \
		offsetof(struct gw_curl_fns, m), name                          \
	}
static const struct {
	size_t off;
	const char *name;
} fns[] = {
    FN(global_init, "curl_global_init"),
    FN(multi_init, "curl_multi_init"),
    FN(multi_setopt, "curl_multi_setopt"),
    FN(multi_cleanup, "curl_multi_cleanup"),
    FN(multi_add_handle, "curl_multi_add_handle"),
    FN(multi_remove_handle, "curl_multi_remove_handle"),
    FN(multi_info_read, "curl_multi_info_read"),
    FN(multi_socket_action, "curl_multi_socket_action"),
    FN(multi_assign, "curl_multi_assign"),
    FN(easy_init, "curl_easy_init"),
    FN(easy_cleanup, "curl_easy_cleanup"),
    FN(easy_setopt, "curl_easy_setopt"),
    FN(easy_getinfo, "curl_easy_getinfo"),
    FN(easy_strerror, "curl_easy_strerror"),
    FN(slist_append, "curl_slist_append"),
    FN(slist_free_all, "curl_slist_free_all"),
};
#undef FN

static int load_locked(char *err, size_t errlen)
{
	struct gw_curl_fns t;
	curl_version_info_data *(*version)(CURLversion);
	const curl_version_info_data *v;
	void *h, *sym;
	const char *e;

	h = dlopen(GW_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		e = dlerror();
		snprintf(err, errlen, "%s", e ? e : GW_CURL_SONAME);
		return -ELIBACC;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++) {
		sym = dlsym(h, fns[i].name);
		if (!sym) {
			snprintf(err, errlen, "%s has no %s", GW_CURL_SONAME,
				 fns[i].name);
			goto fail;
		}
		memcpy((char *)&t + fns[i].off, &sym, sizeof(sym));
	}
	sym = dlsym(h, "curl_version_info");
	if (!sym) {
		snprintf(err, errlen, "%s has no curl_version_info",
			 GW_CURL_SONAME);
		goto fail;
	}
	memcpy(&version, &sym, sizeof(sym));
	v = version(CURLVERSION_NOW);
	if (!v || v->version_num < GW_CURL_MIN_VERSION) {
		snprintf(err, errlen,
			 "%s is libcurl %s; the broker needs 7.85.0 "
			 "or later",
			 GW_CURL_SONAME, v && v->version ? v->version : "(?)");
		goto fail;
	}
	if (t.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "curl_global_init failed");
		goto fail;
	}
	/* The handle stays open for the process's life: libcurl's and its
	 * TLS library's global state live in it. */
	gw_curlf = t;
	return 0;
fail:
	dlclose(h);
	return -ELIBACC;
}

int gw_curl_load(char *err, size_t errlen)
{
	char buf[256];
	int r = 0;

	if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&load_lock);
	if (!loaded) {
		r = load_locked(buf, sizeof(buf));
		if (r == 0)
			__atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&load_lock);
	if (r < 0 && err && errlen)
		snprintf(err, errlen, "%s", buf);
	return r;
}
