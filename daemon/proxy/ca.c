/*
 * spd's CA for the proxy's terminated hosts (tls.c): made at first use in
 * the state dir (key 0600; no run sees the state dir), a leaf certificate
 * per host issued on demand and kept, the bundle of the system's CAs and
 * spd's that a proxy run trusts, and the contexts spd verifies servers
 * with (the system's trust store; [network] test-ca for .test names).
 */
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <http_parser.h>
#include <jansson.h>
#include <libgen.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "common/paths.h"
#include "common/strv.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/proxy/proxy.h"
#include "daemon/proxy/proxy_priv.h"
#include "daemon/spd.h"

/* Leaf certificates kept (one SSL_CTX per host name). */
#define LEAVES_MAX 128
/* A leaf is valid this long, and issued again a day before it ends. */
#define LEAF_DAYS 7
#define CA_DAYS 3650
/* Plaintext moved at once from one side to the other. */
#define TLS_PLAIN_CHUNK (16 * 1024)

struct leaf {
	struct leaf *next;
	char host[PROXY_HOST_MAX + 1];
	SSL_CTX *ctx;
	time_t renew;
};

struct proxy_tls {
	EVP_PKEY *ca_key, *leaf_key;
	X509 *ca;
	struct leaf *leaves;
	unsigned nleaves;
	SSL_CTX *up_sys, *up_test; /* the system's roots; plus test-ca */
	char *bundle;
};

/* ---- spd's CA ------------------------------------------------------ */

static int errf(char *errbuf, size_t errlen, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int errf(char *errbuf, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	unsigned long e = ERR_peek_last_error();

	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
	n = strlen(errbuf);
	if (e && n + 4 < errlen) {
		snprintf(errbuf + n, errlen - n, " (");
		ERR_error_string_n(e, errbuf + n + 2, errlen - n - 3);
		n = strlen(errbuf);
		if (n + 1 < errlen)
			snprintf(errbuf + n, errlen - n, ")");
	}
	ERR_clear_error();
	return r;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return -1;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

static int set_serial(X509 *cert)
{
	unsigned char b[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -1;
	b[0] &= 0x7f;
	bn = BN_bin2bn(b, sizeof(b), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
	BN_free(bn);
	return ok ? 0 : -1;
}

static X509 *ca_make(EVP_PKEY *key)
{
	X509 *cert = X509_new();
	X509_NAME *name;
	char cn[128], host[64] = "";

	gethostname(host, sizeof(host) - 1);
	snprintf(cn, sizeof(cn), "spd proxy CA (%s, uid %u)", host,
		 (unsigned)geteuid());
	if (!cert || !X509_set_version(cert, 2) || set_serial(cert) < 0 ||
	    !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(cert), (long)CA_DAYS * 86400) ||
	    !X509_set_pubkey(cert, key))
		goto fail;
	name = X509_get_subject_name(cert);
	if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
					(const unsigned char *)"spd", -1, -1,
					0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
					(const unsigned char *)cn, -1, -1, 0) ||
	    !X509_set_issuer_name(cert, name) ||
	    add_ext(cert, cert, NID_basic_constraints,
		    "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign") <
		0 ||
	    add_ext(cert, cert, NID_subject_key_identifier, "hash") < 0 ||
	    !X509_sign(cert, key, EVP_sha256()))
		goto fail;
	return cert;
fail:
	X509_free(cert);
	return NULL;
}

/* Write data to path through a temporary file and rename (mode);
 * proxy_priv.h. */
int proxy_write_file(const char *path, const char *data, size_t len,
		     mode_t mode)
{
	char *tmp = NULL;
	int fd, r = 0;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		return -ENOMEM;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  mode);
	if (fd < 0) {
		r = -errno;
		free(tmp);
		return r;
	}
	for (size_t off = 0; off < len && r == 0;) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0)
			r = -errno;
		else
			off += (size_t)n;
	}
	if (r == 0 && (fchmod(fd, mode) < 0 || fsync(fd) < 0))
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	free(tmp);
	return r;
}

static char *pem_of(int (*w)(BIO *, void *), void *obj, size_t *ret_len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p, *out = NULL;
	long n;

	if (b && w(b, obj) == 1 && (n = BIO_get_mem_data(b, &p)) > 0 &&
	    (out = malloc((size_t)n + 1))) {
		memcpy(out, p, (size_t)n);
		out[n] = '\0';
		*ret_len = (size_t)n;
	}
	BIO_free(b);
	return out;
}

static int w_key(BIO *b, void *k)
{
	return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

static int w_cert(BIO *b, void *c)
{
	return PEM_write_bio_X509(b, c);
}

/* Load dir/ca.key and dir/ca.pem, or make them when neither exists.  The
 * key must be the operator's, a regular file, mode 0600 or stricter. */
static int ca_load(struct proxy_tls *t, const char *dir, char *errbuf,
		   size_t errlen)
{
	char *kpath = paths_join(dir, "ca.key"),
	     *cpath = paths_join(dir, "ca.pem");
	struct stat st;
	int fd = -1, r = 0;
	FILE *f = NULL;

	if (!kpath || !cpath) {
		r = -ENOMEM;
		goto out;
	}
	fd = open(kpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		char *kp = NULL, *cp = NULL;
		size_t kl = 0, cl = 0;

		t->ca_key = EVP_EC_gen("P-256");
		t->ca = t->ca_key ? ca_make(t->ca_key) : NULL;
		if (t->ca) {
			kp = pem_of(w_key, t->ca_key, &kl);
			cp = pem_of(w_cert, t->ca, &cl);
		}
		if (!kp || !cp)
			r = errf(errbuf, errlen, -EIO,
				 "cannot make the proxy's CA");
		else if ((r = proxy_write_file(cpath, cp, cl, 0644)) < 0 ||
			 (r = proxy_write_file(kpath, kp, kl, 0600)) < 0)
			errf(errbuf, errlen, r, "cannot write %s: %s", dir,
			     strerror(-r));
		else
			log_info("proxy: made a CA in %s", dir);
		if (kp)
			OPENSSL_cleanse(kp, kl);
		free(kp);
		free(cp);
		goto out;
	}
	if (fd < 0) {
		r = errf(errbuf, errlen, -errno, "cannot open %s: %s", kpath,
			 strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077)) {
		r = errf(errbuf, errlen, -EPERM,
			 "%s must be a regular file of spd's user with mode "
			 "0600",
			 kpath);
		goto out;
	}
	f = fdopen(fd, "r");
	if (!f) {
		r = -errno;
		goto out;
	}
	fd = -1;
	t->ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	f = fopen(cpath, "re");
	t->ca = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	if (!t->ca_key || !t->ca ||
	    X509_check_private_key(t->ca, t->ca_key) != 1)
		r = errf(errbuf, errlen, -EINVAL,
			 "%s and %s are not a CA key and its certificate; "
			 "remove both to have spd make a new CA",
			 kpath, cpath);
out:
	if (fd >= 0)
		close(fd);
	free(kpath);
	free(cpath);
	return r;
}

/* The system's CA file (OpenSSL's default), then spd's CA: what a run
 * trusts, at path. */
static int bundle_write(struct proxy_tls *t, const char *path, char *errbuf,
			size_t errlen)
{
	const char *sys = getenv(X509_get_default_cert_file_env());
	char *ca = NULL, *all = NULL;
	size_t cl = 0, sl = 0;
	FILE *f;
	int r;

	if (!sys)
		sys = X509_get_default_cert_file();
	ca = pem_of(w_cert, t->ca, &cl);
	if (!ca)
		return errf(errbuf, errlen, -ENOMEM, "out of memory");
	f = fopen(sys, "re");
	if (f) {
		struct stat st;

		if (fstat(fileno(f), &st) == 0 && st.st_size > 0 &&
		    st.st_size < 64 * 1024 * 1024 &&
		    (all = malloc((size_t)st.st_size + cl + 2)))
			sl = fread(all, 1, (size_t)st.st_size, f);
		fclose(f);
	}
	if (!all && !(all = malloc(cl + 2))) {
		free(ca);
		return errf(errbuf, errlen, -ENOMEM, "out of memory");
	}
	if (sl && all[sl - 1] != '\n')
		all[sl++] = '\n';
	memcpy(all + sl, ca, cl);
	r = proxy_write_file(path, all, sl + cl, 0644);
	if (r < 0)
		errf(errbuf, errlen, r, "cannot write %s: %s", path,
		     strerror(-r));
	free(ca);
	free(all);
	return r;
}

static SSL_CTX *upstream_ctx(const char *extra_ca, char *errbuf, size_t errlen)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    SSL_CTX_set_default_verify_paths(ctx) != 1 ||
	    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
		SSL_CTX_free(ctx);
		errf(errbuf, errlen, -EIO, "cannot set up TLS to servers");
		return NULL;
	}
	if (extra_ca &&
	    SSL_CTX_load_verify_locations(ctx, extra_ca, NULL) != 1) {
		SSL_CTX_free(ctx);
		errf(errbuf, errlen, -EIO, "cannot read [network] test-ca %s",
		     extra_ca);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

/* Whether uid can reach and read path: every directory above it
 * searchable, the file readable, by its owner bits when uid owns it and
 * by the others' bits otherwise (a group is not counted on). */
static bool readable_by(const char *path, uid_t uid)
{
	char *copy = strdup(path), *slash;
	struct stat st;
	bool ok = copy != NULL;

	if (ok && (stat(path, &st) < 0 ||
		   !(st.st_mode & (st.st_uid == uid ? S_IRUSR : S_IROTH))))
		ok = false;
	while (ok && (slash = strrchr(copy, '/'))) {
		*slash = '\0';
		if (stat(copy[0] ? copy : "/", &st) < 0 ||
		    !(st.st_mode & (st.st_uid == uid ? S_IXUSR : S_IXOTH)))
			ok = false;
	}
	free(copy);
	return ok || uid == 0;
}

/* Where the bundle goes: [network] ca-bundle, or beside the state dir
 * (which no run sees) as STATE_DIR-proxy-ca.pem; refused when a hidden
 * path would cover it. */
static int bundle_path(struct spd *spd, char **ret, char *errbuf, size_t errlen)
{
	struct strv hidden = {0};
	char *p = NULL;
	size_t n = strlen(spd->paths.state_dir);
	int r;

	while (n > 1 && spd->paths.state_dir[n - 1] == '/')
		n--;
	if (spd->config.proxy_ca_bundle)
		p = strdup(spd->config.proxy_ca_bundle);
	else if (asprintf(&p, "%.*s-proxy-ca.pem", (int)n,
			  spd->paths.state_dir) < 0)
		p = NULL;
	if (!p)
		return -ENOMEM;
	r = config_run_hidden_push(spd, &hidden);
	for (size_t i = 0; r == 0 && i < hidden.n; i++)
		if (paths_under(p, hidden.v[i]))
			r = errf(errbuf, errlen, -EACCES,
				 "the CA bundle %s would be under %s, which no "
				 "run sees; name another place with [network] "
				 "ca-bundle",
				 p, hidden.v[i]);
	strv_free(&hidden);
	if (r < 0) {
		free(p);
		return r == -ENOMEM ? errf(errbuf, errlen, r, "out of memory")
				    : r;
	}
	*ret = p;
	return 0;
}

int proxy_tls_prepare(struct spd *spd, const char **ret, char *errbuf,
		      size_t errlen)
{
	struct proxy_tls *t = spd->proxy_tls;
	char *dir = NULL;
	int r;

	if (t) {
		*ret = t->bundle;
		return 0;
	}
	t = calloc(1, sizeof(*t));
	dir = paths_join(spd->paths.state_dir, "proxy-ca");
	if (!t || !dir) {
		r = errf(errbuf, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	r = paths_ensure_private_dir(dir);
	if (r < 0) {
		char why[512];

		errf(errbuf, errlen, r, "%s",
		     paths_private_dir_why(dir, r, why, sizeof(why)));
		goto fail;
	}
	r = ca_load(t, dir, errbuf, errlen);
	if (r < 0)
		goto fail;
	t->leaf_key = EVP_EC_gen("P-256");
	if (!t->leaf_key) {
		r = errf(errbuf, errlen, -EIO, "cannot make a key");
		goto fail;
	}
	r = -EIO;
	if (!(t->up_sys = upstream_ctx(NULL, errbuf, errlen)))
		goto fail;
	if (spd->config.proxy_test_ca &&
	    !(t->up_test =
		  upstream_ctx(spd->config.proxy_test_ca, errbuf, errlen)))
		goto fail;
	r = bundle_path(spd, &t->bundle, errbuf, errlen);
	if (r == 0)
		r = bundle_write(t, t->bundle, errbuf, errlen);
	if (r == 0 && !readable_by(t->bundle, spd->config.run_uid))
		r = errf(errbuf, errlen, -EACCES,
			 "the CA bundle %s cannot be read by the runs' user "
			 "(uid %u); name a place it can read with [network] "
			 "ca-bundle",
			 t->bundle, (unsigned)spd->config.run_uid);
	if (r < 0)
		goto fail;
	free(dir);
	spd->proxy_tls = t;
	*ret = t->bundle;
	return 0;
fail:
	free(dir);
	spd->proxy_tls = t;
	proxy_tls_free(spd);
	return r;
}

void proxy_tls_free(struct spd *spd)
{
	struct proxy_tls *t = spd->proxy_tls;

	if (!t)
		return;
	while (t->leaves) {
		struct leaf *l = t->leaves;

		t->leaves = l->next;
		SSL_CTX_free(l->ctx);
		free(l);
	}
	SSL_CTX_free(t->up_sys);
	SSL_CTX_free(t->up_test);
	EVP_PKEY_free(t->ca_key);
	EVP_PKEY_free(t->leaf_key);
	X509_free(t->ca);
	free(t->bundle);
	free(t);
	spd->proxy_tls = NULL;
}

/* The run's client offers ALPN: spd speaks HTTP/1.1 only. */
static int alpn_select(SSL *ssl, const unsigned char **out,
		       unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	for (unsigned i = 0; i < inlen; i += 1u + in[i])
		if (in[i] == 8 && i + 9 <= inlen &&
		    memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
	return SSL_TLSEXT_ERR_NOACK;
}

/* A host name a certificate may carry: letters, digits, '-' and '.'. */
bool proxy_cert_name_ok(const char *host)
{
	size_t n = strlen(host);

	if (!n || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((host[i] >= 'a' && host[i] <= 'z') ||
		      (host[i] >= 'A' && host[i] <= 'Z') ||
		      (host[i] >= '0' && host[i] <= '9') || host[i] == '-' ||
		      host[i] == '.'))
			return false;
	return true;
}

static X509 *leaf_make(struct proxy_tls *t, const char *host)
{
	X509 *cert = X509_new();
	X509_NAME *name;
	char san[PROXY_HOST_MAX + 8], cn[65];

	snprintf(san, sizeof(san), "DNS:%s", host);
	/* A common name is at most 64 characters; the SAN is what a
	 * client checks. */
	snprintf(cn, sizeof(cn), "%.64s", host);
	if (!cert || !X509_set_version(cert, 2) || set_serial(cert) < 0 ||
	    !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(cert),
			     (long)LEAF_DAYS * 86400) ||
	    !X509_set_pubkey(cert, t->leaf_key) ||
	    !X509_set_issuer_name(cert, X509_get_subject_name(t->ca)))
		goto fail;
	name = X509_get_subject_name(cert);
	if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
					(const unsigned char *)cn, -1, -1, 0) ||
	    add_ext(cert, t->ca, NID_basic_constraints, "critical,CA:FALSE") <
		0 ||
	    add_ext(cert, t->ca, NID_key_usage, "critical,digitalSignature") <
		0 ||
	    add_ext(cert, t->ca, NID_ext_key_usage, "serverAuth") < 0 ||
	    add_ext(cert, t->ca, NID_subject_alt_name, san) < 0 ||
	    add_ext(cert, t->ca, NID_subject_key_identifier, "hash") < 0 ||
	    add_ext(cert, t->ca, NID_authority_key_identifier, "keyid:always") <
		0 ||
	    !X509_sign(cert, t->ca_key, EVP_sha256()))
		goto fail;
	return cert;
fail:
	X509_free(cert);
	return NULL;
}

/* The server context presenting a certificate for host, issued now or
 * kept from before. */
SSL_CTX *proxy_leaf_ctx(struct proxy_tls *t, const char *host)
{
	struct leaf **pp, *l;
	time_t now = time(NULL);
	X509 *cert;
	SSL_CTX *ctx;

	for (pp = &t->leaves; (l = *pp); pp = &l->next)
		if (strcasecmp(l->host, host) == 0) {
			if (l->renew > now)
				return l->ctx;
			*pp = l->next;
			SSL_CTX_free(l->ctx);
			free(l);
			t->nleaves--;
			break;
		}
	cert = leaf_make(t, host);
	ctx = cert ? SSL_CTX_new(TLS_server_method()) : NULL;
	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    SSL_CTX_use_certificate(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, t->leaf_key) != 1) {
		X509_free(cert);
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	X509_free(cert);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	SSL_CTX_set_num_tickets(ctx, 0);
	l = calloc(1, sizeof(*l));
	if (!l) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	snprintf(l->host, sizeof(l->host), "%s", host);
	l->ctx = ctx;
	l->renew = now + (LEAF_DAYS - 1) * 86400;
	l->next = t->leaves;
	t->leaves = l;
	if (++t->nleaves > LEAVES_MAX) {
		/* The oldest goes; connections using it hold their own
		 * reference. */
		for (pp = &t->leaves; (*pp)->next; pp = &(*pp)->next)
			;
		SSL_CTX_free((*pp)->ctx);
		free(*pp);
		*pp = NULL;
		t->nleaves--;
	}
	return ctx;
}

SSL_CTX *proxy_upstream_ctx(struct proxy_tls *t, const char *host)
{
	size_t hl = strlen(host);

	return t->up_test && hl > 5 && strcasecmp(host + hl - 5, ".test") == 0
		   ? t->up_test
		   : t->up_sys;
}
