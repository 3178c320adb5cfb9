/*
 * libcurl, loaded at the broker's first call to a provider rather than
 * linked into spd (daemon/broker/gw_curl.c).  Linked, libcurl brought
 * about twenty libraries with it (gnutls, nettle, gmp, librtmp, libssh2,
 * nghttp2, ldap, p11-kit, ...), each mapped and relocated when spd
 * started under full RELRO: about 3 MiB of an idle spd's resident size
 * for a client most spds never use.
 */
#ifndef SPD_DAEMON_GW_CURL_H
#define SPD_DAEMON_GW_CURL_H

#include <curl/curl.h>
#include <stddef.h>

/* The library spd loads: the soname every libcurl 7.16 and later keeps. */
#define GW_CURL_SONAME "libcurl.so.4"

/*
 * The libcurl functions the broker calls, read from the loaded library.
 * Each member has the type of the function it is named after (curl_
 * dropped); every member is set once gw_curl_load() has returned 0, and
 * none may be called before.
 */
struct gw_curl_fns {
	CURLcode (*global_init)(long flags);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *m, CURLMoption opt, ...);
	CURLMcode (*multi_cleanup)(CURLM *m);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *e);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *e);
	CURLMsg *(*multi_info_read)(CURLM *m, int *msgs_in_queue);
	CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int ev,
					 int *running);
	CURLMcode (*multi_assign)(CURLM *m, curl_socket_t s, void *p);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *e);
	CURLcode (*easy_setopt)(CURL *e, CURLoption opt, ...);
	CURLcode (*easy_getinfo)(CURL *e, CURLINFO info, ...);
	const char *(*easy_strerror)(CURLcode c);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
};

extern struct gw_curl_fns gw_curlf;

/*
 * Loads GW_CURL_SONAME (RTLD_NOW: every symbol bound before any is
 * used, its RELRO then sealed), reads every function of gw_curlf from
 * it and runs curl_global_init, once per process.  All or nothing: a
 * missing library, a missing function or a failed global init leaves
 * gw_curlf unset and returns -ELIBACC with why in err (errlen bytes,
 * NUL-terminated; err may be NULL), and the provider call that asked
 * must not start; the next call tries again.  Returns 0 when loaded
 * (now or before).  Safe from any thread.
 */
int gw_curl_load(char *err, size_t errlen);

#endif
