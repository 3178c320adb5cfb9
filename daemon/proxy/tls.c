/*
 * The hosts the proxy terminates (proxy.h: a credential or a request
 * rule names them).  spd is the server the run's client talks TLS to,
 * with a certificate for the host issued by spd's own CA (made at first
 * use in the state dir, which no run sees; the run trusts it through a
 * bundle of the system's CAs and spd's), and the client of the real
 * server, verified against the system's trust store (and for names under
 * .test only, [network] test-ca).  In between, spd reads the request
 * head, decides on its method and path, puts the credential in, and
 * passes one request: "Connection: close" upstream, and bytes after the
 * request's end are never forwarded, so each request on a connection is
 * judged.  OpenSSL does the TLS over memory BIOs; libuv the sockets.
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
#include "daemon/keys/secrets.h"
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

/* Write data to path through a temporary file and rename (mode). */
static int write_file(const char *path, const char *data, size_t len,
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
		else if ((r = write_file(cpath, cp, cl, 0644)) < 0 ||
			 (r = write_file(kpath, kp, kl, 0600)) < 0)
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
	r = write_file(path, all, sl + cl, 0644);
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
static bool cert_name_ok(const char *host)
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
static SSL_CTX *leaf_ctx(struct proxy_tls *t, const char *host)
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

/* ---- a terminated connection --------------------------------------- */

struct tside {
	struct ptls *t;
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	uv_stream_t *s;
	unsigned pending; /* writes to s in flight */
	bool paused;	  /* not read: the other side's writes are pending */
	char buf[PROXY_CHUNK];
};

enum tstate { T_UP_HS, T_CL_HS, T_HEAD, T_BODY, T_DONE };

struct ptls {
	struct pconn *c;
	struct tside cl, up;
	enum tstate state;
	bool finishing; /* close once the writes to the run are out */
	http_parser p;
	char *head;
	size_t head_len;
	char url[PROXY_HEAD_MAX];
	size_t url_len;
	/* A push held until its ref updates are judged: the head for
	 * upstream, the body's raw bytes, and the same de-chunked. */
	bool inspect;
	char *held_head, *held, *pkt;
	size_t held_head_len, held_len, pkt_len;
	bool pkt_over;
	char path[2048];
	char plain[TLS_PLAIN_CHUNK];
};

/* Most bytes of a push's body held while its ref updates are read:
 * 64 updates of a few hundred bytes, and the capabilities. */
#define PUSH_HEAD_MAX (64 * 1024)

struct twrite {
	uv_write_t w;
	struct tside *side;
	char data[];
};

static void tls_close(struct ptls *t)
{
	pconn_close(t->c);
}

static void resume(struct ptls *t);

static void on_twritten(uv_write_t *w, int status)
{
	struct twrite *tw = (struct twrite *)w;
	struct tside *side = tw->side;
	struct ptls *t = side->t;

	free(tw);
	side->pending--;
	if (t->c->closing)
		return;
	if (status < 0) {
		tls_close(t);
		return;
	}
	resume(t);
}

static int raw_write(struct tside *side, const void *data, size_t len)
{
	struct twrite *tw = malloc(sizeof(*tw) + len);
	uv_buf_t b;

	if (!tw)
		return -ENOMEM;
	memcpy(tw->data, data, len);
	tw->side = side;
	b = uv_buf_init(tw->data, (unsigned)len);
	if (uv_write(&tw->w, side->s, &b, 1, on_twritten) < 0) {
		free(tw);
		return -EIO;
	}
	side->pending++;
	return 0;
}

/* What side's SSL has for its socket goes out. */
static int flush(struct tside *side)
{
	int n;

	while ((n = (int)BIO_pending(side->wbio)) > 0) {
		struct twrite *tw = malloc(sizeof(*tw) + (size_t)n);
		uv_buf_t b;

		if (!tw)
			return -ENOMEM;
		if (BIO_read(side->wbio, tw->data, n) != n) {
			free(tw);
			return -EIO;
		}
		tw->side = side;
		b = uv_buf_init(tw->data, (unsigned)n);
		if (uv_write(&tw->w, side->s, &b, 1, on_twritten) < 0) {
			free(tw);
			return -EIO;
		}
		side->pending++;
	}
	return 0;
}

/* Plaintext to side's peer: with memory BIOs a write takes it whole. */
static int tls_send(struct tside *side, const void *data, size_t len)
{
	if (len && SSL_write(side->ssl, data, (int)len) != (int)len)
		return -EIO;
	return flush(side);
}

/* Close once what the run is owed has gone out. */
static void finish(struct ptls *t)
{
	if (t->c->closing)
		return;
	t->state = T_DONE;
	t->finishing = true;
	/* Nothing more is read either way: what the run is owed is out. */
	uv_read_stop(t->cl.s);
	uv_read_stop(t->up.s);
	t->cl.paused = t->up.paused = false;
	if (t->cl.ssl && SSL_is_init_finished(t->cl.ssl)) {
		SSL_shutdown(t->cl.ssl);
		flush(&t->cl);
	}
	if (t->cl.pending == 0)
		tls_close(t);
}

/* Refuse the request in TLS: status and a JSON body naming host, method,
 * path and the rule (so an agent sees why and stops), then close. */
static void tls_refuse(struct ptls *t, int status, const char *method,
		       const char *path, const char *rule, const char *why)
{
	struct pconn *c = t->c;
	json_t *o =
	    json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s}", "error",
		      "refused by spd's proxy", "host", c->host, "method",
		      method, "path", path, "rule", rule, "why", why);
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL, *msg = NULL;
	char note[300];
	int n;

	json_decref(o);
	snprintf(note, sizeof(note), "%s %s: %s", method ? method : "?",
		 path ? path : "?", why);
	pconn_refusal_note(c, status, note);
	n = body ? asprintf(&msg,
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json"
			    "\r\nContent-Length: %zu\r\nConnection: close\r\n"
			    "\r\n%s\n",
			    status, status == 403 ? "Forbidden" : "Bad Gateway",
			    strlen(body) + 1, body)
		 : -1;
	if (n > 0)
		tls_send(&t->cl, msg, (size_t)n);
	free(msg);
	free(body);
	finish(t);
}

static void tls_alloc(uv_handle_t *h, size_t hint, uv_buf_t *ret)
{
	struct pconn *c = h->data;
	struct tside *side =
	    h == (uv_handle_t *)&c->client ? &c->tls->cl : &c->tls->up;

	(void)hint;
	*ret = uv_buf_init(side->buf, sizeof(side->buf));
}

static void tls_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void resume(struct ptls *t)
{
	if (t->finishing) {
		if (t->cl.pending == 0)
			tls_close(t);
		return;
	}
	if (t->up.pending == 0 && t->cl.paused) {
		t->cl.paused = false;
		if (uv_read_start(t->cl.s, tls_alloc, tls_read) < 0)
			tls_close(t);
	}
	if (t->cl.pending == 0 && t->up.paused) {
		t->up.paused = false;
		if (uv_read_start(t->up.s, tls_alloc, tls_read) < 0)
			tls_close(t);
	}
}

/* ---- the request --------------------------------------------------- */

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct ptls *t = p->data;

	if (len >= sizeof(t->url) - t->url_len)
		return 1;
	memcpy(t->url + t->url_len, at, len);
	t->url_len += len;
	t->url[t->url_len] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct ptls *t = p->data;

	if (!t->inspect)
		return 0;
	if (len > PUSH_HEAD_MAX - t->pkt_len) {
		t->pkt_over = true;
		return 0;
	}
	if (!t->pkt && !(t->pkt = malloc(PUSH_HEAD_MAX))) {
		t->pkt_over = true;
		return 0;
	}
	memcpy(t->pkt + t->pkt_len, at, len);
	t->pkt_len += len;
	return 0;
}

static int on_message_complete(http_parser *p)
{
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings req_settings = {
    .on_url = on_url,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ${VAR} of tmpl replaced from spd's secrets; NULL with *ret_missing set
 * to the first missing name. */
static char *expand(struct spd *spd, const char *tmpl, char *missing,
		    size_t mlen)
{
	size_t cap = strlen(tmpl) + 1, n = 0;
	char *out = malloc(cap);

	for (const char *p = tmpl; out && *p;) {
		const char *v = NULL, *end;
		size_t vl;

		if (p[0] == '$' && p[1] == '{' && (end = strchr(p, '}'))) {
			char name[128];

			snprintf(name, sizeof(name), "%.*s", (int)(end - p - 2),
				 p + 2);
			v = secrets_value(spd, name);
			if (!v) {
				snprintf(missing, mlen, "%s", name);
				OPENSSL_cleanse(out, cap);
				free(out);
				return NULL;
			}
			p = end + 1;
		} else {
			v = p++;
		}
		vl = v == p - 1 ? 1 : strlen(v);
		if (n + vl + 1 > cap) {
			char *o = malloc(cap = 2 * (n + vl + 1));

			if (o)
				memcpy(o, out, n);
			OPENSSL_cleanse(out, n);
			free(out);
			out = o;
			if (!out)
				return NULL;
		}
		memcpy(out + n, v, vl);
		n += vl;
	}
	if (out)
		out[n] = '\0';
	return out;
}

/* The header line the credential adds ("Name: value"), malloc'd. */
static char *cred_line(struct spd *spd, const struct proxy_credential *cr,
		       char *missing, size_t mlen)
{
	char *v = expand(spd, cr->value, missing, mlen), *line = NULL;

	if (!v)
		return NULL;
	if (cr->basic) {
		size_t vl = strlen(v), el = 4 * ((vl + 2) / 3) + 1;
		unsigned char *b64 = malloc(el);

		if (b64 &&
		    EVP_EncodeBlock(b64, (unsigned char *)v, (int)vl) >= 0 &&
		    asprintf(&line, "%s: Basic %s", cr->header_name, b64) < 0)
			line = NULL;
		if (b64)
			OPENSSL_cleanse(b64, el);
		free(b64);
	} else if (asprintf(&line, "%s: %s", cr->header_name, v) < 0) {
		line = NULL;
	}
	OPENSSL_cleanse(v, strlen(v));
	free(v);
	return line;
}

static bool header_is(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

/* The head upstream sees: the request line as sent, the run's headers
 * but the hop ones, Host and the credential's header (replacing any the
 * run sent by that name), Connection: close. */
static char *rewrite(struct ptls *t, size_t end, const char *cred,
		     const char *cred_name, size_t *ret_len)
{
	struct pconn *c = t->c;
	size_t cap = end + PROXY_HOST_MAX + (cred ? strlen(cred) : 0) + 64, n;
	const char *line = memchr(t->head, '\n', end);
	char *o = malloc(cap);

	if (!o || !line) {
		free(o);
		return NULL;
	}
	n = (size_t)(line - t->head);
	if (n && t->head[n - 1] == '\r')
		n--;
	memcpy(o, t->head, n);
	n += (size_t)snprintf(o + n, cap - n, "\r\nHost: %s", c->host);
	if (c->dport != 443)
		n += (size_t)snprintf(o + n, cap - n, ":%u", c->dport);
	n += (size_t)snprintf(o + n, cap - n, "\r\n");
	if (cred)
		n += (size_t)snprintf(o + n, cap - n, "%s\r\n", cred);
	for (line++; line < t->head + end;) {
		const char *nl =
		    memchr(line, '\n', (size_t)(t->head + end - line));
		size_t len = (size_t)(nl - line);

		if (len > 0 && line[len - 1] == '\r')
			len--;
		if (len > 0 && !header_is(line, len, "host") &&
		    !header_is(line, len, "connection") &&
		    !header_is(line, len, "keep-alive") &&
		    !header_is(line, len, "proxy-connection") &&
		    !header_is(line, len, "proxy-authorization") &&
		    !(cred_name && header_is(line, len, cred_name))) {
			memcpy(o + n, line, len);
			memcpy(o + n + len, "\r\n", 2);
			n += len + 2;
		}
		line = nl + 1;
	}
	n += (size_t)snprintf(o + n, cap - n, "Connection: close\r\n\r\n");
	*ret_len = n;
	return o;
}

/* The request's path, without its query, into path (cap bytes): from
 * origin-form, or absolute-form naming the connection's host.  False
 * when the target is neither. */
static bool request_path(struct ptls *t, char *path, size_t cap)
{
	struct http_parser_url u;
	size_t off, len;

	http_parser_url_init(&u);
	if (t->url_len == 0 ||
	    http_parser_parse_url(t->url, t->url_len, 0, &u) != 0)
		return false;
	if (t->url[0] != '/') {
		if (!(u.field_set & (1 << UF_HOST)) ||
		    u.field_data[UF_HOST].len != strlen(t->c->host) ||
		    strncasecmp(t->url + u.field_data[UF_HOST].off, t->c->host,
				u.field_data[UF_HOST].len) != 0)
			return false;
	}
	if (!(u.field_set & (1 << UF_PATH))) {
		snprintf(path, cap, "/");
		return true;
	}
	off = u.field_data[UF_PATH].off;
	len = u.field_data[UF_PATH].len;
	snprintf(path, cap, "%.*s", (int)len, t->url + off);
	return true;
}

static void body(struct ptls *t, const char *data, size_t len);

static bool has_header(struct ptls *t, size_t end, const char *name)
{
	for (const char *line = memchr(t->head, '\n', end);
	     line && ++line < t->head + end;
	     line = memchr(line, '\n', (size_t)(t->head + end - line))) {
		const char *nl =
		    memchr(line, '\n', (size_t)(t->head + end - line));

		if (nl && header_is(line, (size_t)(nl - line), name))
			return true;
	}
	return false;
}

/* A header line that continues the one before (obs-fold): a server
 * could read it as its own header, or not; refused. */
static bool has_folded_line(struct ptls *t, size_t end)
{
	for (const char *p = t->head;
	     (p = memchr(p, '\n', (size_t)(t->head + end - p)));) {
		p++;
		if (p < t->head + end && (*p == ' ' || *p == '\t'))
			return true;
	}
	return false;
}

/* A git push to be judged: POST .../git-receive-pack in a session's
 * run (an operator's runs follow their own rule). */
static bool is_push(struct ptls *t, const char *path, size_t end)
{
	size_t n = strlen(path);

	(void)end;
	return t->c->port->push_restricted && t->p.method == HTTP_POST &&
	       n >= 17 && strcmp(path + n - 17, "/git-receive-pack") == 0;
}

/* Commits walked at most to find a push's old tip below its new one
 * (each compared with those seen: the walk is quadratic, bounded to a
 * few milliseconds of spd's loop); a longer push cannot be told a
 * fast-forward and is refused. */
#define FF_WALK_MAX 5000

/* Whether new descends from old, walking parents in odb: 1, 0, or -1
 * when spd cannot tell (an object it does not have, too long a walk).
 * Commits are read as objects (their hashes checked by libgit2), parents
 * from their own text: no ref, graft or replacement of the agent's
 * repository has a say. */
static int descends(git_odb *odb, const git_oid *new_oid, const git_oid *old)
{
	git_oid *queue = malloc(FF_WALK_MAX * sizeof(*queue));
	size_t head = 0, tail = 0;
	int r = 0;

	if (!queue)
		return -1;
	queue[tail++] = *new_oid;
	while (head < tail && r == 0) {
		git_odb_object *obj = NULL;
		const char *d, *end;

		if (git_oid_equal(&queue[head], old)) {
			r = 1;
			break;
		}
		if (git_odb_read(&obj, odb, &queue[head++]) < 0 ||
		    git_odb_object_type(obj) != GIT_OBJECT_COMMIT) {
			git_odb_object_free(obj);
			r = -1;
			break;
		}
		d = git_odb_object_data(obj);
		end = d + git_odb_object_size(obj);
		/* "tree X\n", then "parent X\n" lines, then the rest. */
		while (d < end) {
			const char *nl = memchr(d, '\n', (size_t)(end - d));

			if (!nl || nl == d)
				break;
			if (nl - d == 47 && memcmp(d, "parent ", 7) == 0) {
				bool seen = false;
				git_oid p;

				if (git_oid_fromstrn(&p, d + 7, 40) < 0) {
					r = -1;
					break;
				}
				for (size_t i = 0; i < tail && !seen; i++)
					seen = git_oid_equal(&queue[i], &p);
				if (!seen && tail == FF_WALK_MAX) {
					r = -1;
					break;
				}
				if (!seen)
					queue[tail++] = p;
			} else if (memcmp(d, "tree ", 5) != 0) {
				break;
			}
			d = nl + 1;
		}
		git_odb_object_free(obj);
	}
	free(queue);
	return r;
}

/* Whether a push from old_id to new_id is a fast-forward, judged on the
 * objects of the session's worktree (the agent's commits) and of its
 * repository: NULL, or why not (an object spd does not have is not known
 * to be one). */
static const char *not_ff(const struct proxy_port *port, const char *old_id,
			  const char *new_id)
{
	git_odb *odb = NULL;
	git_oid o, n;
	char *objs = NULL;
	const char *why = NULL;
	int r;

	if (strlen(old_id) != 40 || git_oid_fromstr(&o, old_id) < 0 ||
	    git_oid_fromstr(&n, new_id) < 0)
		return "spd cannot tell whether it is a fast-forward";
	if (git_libgit2_init() < 0)
		return "spd cannot tell whether it is a fast-forward";
	if (git_odb_new(&odb) < 0) {
		git_libgit2_shutdown();
		return "spd cannot tell whether it is a fast-forward";
	}
	if (port->push_worktree &&
	    asprintf(&objs, "%s/.git/objects", port->push_worktree) > 0)
		git_odb_add_disk_alternate(odb, objs);
	free(objs);
	objs = NULL;
	if (port->push_gitdir &&
	    asprintf(&objs, "%s/objects", port->push_gitdir) > 0)
		git_odb_add_disk_alternate(odb, objs);
	free(objs);
	r = descends(odb, &n, &o);
	if (r == 0)
		why = "not a fast-forward of the branch (a force push)";
	else if (r < 0)
		why = "spd cannot tell that it is a fast-forward (it does not "
		      "have the commits between)";
	git_odb_free(odb);
	git_error_clear();
	git_libgit2_shutdown();
	return why;
}

/* The push's ref updates are read: each must be the session's branch,
 * not a deletion, a fast-forward; then the held head and body go up. */
static void push_judge(struct ptls *t, const struct proxy_pkt_update *u,
		       size_t n)
{
	struct pconn *c = t->c;
	struct proxy_port *port = c->port;
	json_t *refs = json_array();
	char why[600];

	for (size_t i = 0; i < n; i++) {
		const char *nf = NULL;

		json_array_append_new(refs, json_string(u[i].ref));
		if (!port->push_ref || strcmp(u[i].ref, port->push_ref) != 0) {
			snprintf(why, sizeof(why),
				 "a push to %s: this session may push only to "
				 "%s",
				 u[i].ref,
				 port->push_ref
				     ? port->push_ref
				     : "(no branch: it is detached)");
		} else if (proxy_oid_zero(u[i].new_id)) {
			snprintf(why, sizeof(why), "deleting %s is refused",
				 u[i].ref);
		} else if (!proxy_oid_zero(u[i].old_id) &&
			   (nf = not_ff(port, u[i].old_id, u[i].new_id))) {
			snprintf(why, sizeof(why), "a push to %s: %s", u[i].ref,
				 nf);
		} else {
			continue;
		}
		json_decref(refs);
		tls_refuse(t, 403, "POST", t->path, "git push", why);
		return;
	}
	pconn_journal(c, "net.proxy.request",
		      json_pack("{s:s, s:i, s:s, s:s, s:s, s:o}", "host",
				c->host, "port", (int)c->dport, "method",
				"POST", "path", t->path, "decision", "allow",
				"refs", refs));
	t->inspect = false;
	if (tls_send(&t->up, t->held_head, t->held_head_len) < 0 ||
	    tls_send(&t->up, t->held, t->held_len) < 0) {
		tls_close(t);
		return;
	}
	c->up.bytes += t->held_len;
}

/* The head is complete (end: its bytes with the blank line): decide,
 * then send it upstream with the credential and go on with the body. */
static void judge(struct ptls *t, size_t end)
{
	struct pconn *c = t->c;
	struct spd *spd = c->port->spd;
	const struct spd_config *cfg = &spd->config;
	const struct proxy_credential *cr = proxy_credential_for(cfg, c->host);
	const struct proxy_http_rule *rule;
	const char *method = http_method_str(t->p.method);
	char path[2048], missing[128] = "", *cred = NULL, *out;
	bool any;
	size_t out_len;

	if (has_folded_line(t, end)) {
		tls_refuse(t, 403, method, NULL, NULL,
			   "a folded header line (obs-fold) is refused");
		return;
	}
	if (t->p.method == HTTP_CONNECT ||
	    !request_path(t, path, sizeof(path))) {
		tls_refuse(t, 403, method, NULL, NULL,
			   "not a request for this host");
		return;
	}
	rule = proxy_http_decide(cfg, c->host, method, path, &any);
	if (any && proxy_path_ambiguous(path)) {
		tls_refuse(t, 403, method, path, NULL,
			   "a path with dot segments or encoded separators "
			   "is refused for a host with request rules");
		return;
	}
	if (any && (!rule || !rule->allow)) {
		char why[400];

		snprintf(why, sizeof(why),
			 rule ? "[network \"%s\"] %s refuses it"
			      : "no [network \"%s\"] allow rule matches it%s",
			 rule ? rule->host : c->host, rule ? rule->text : "");
		tls_refuse(t, 403, method, path,
			   rule ? rule->text : "(no rule matches)", why);
		return;
	}
	if (!pconn_journal_charge(c->port)) {
		tls_refuse(t, 403, method, path, NULL,
			   "the session made more journaled requests this "
			   "minute than [limits] session-journal-rate allows");
		return;
	}
	if (cr && !(cred = cred_line(spd, cr, missing, sizeof(missing)))) {
		char why[300];

		snprintf(why, sizeof(why),
			 missing[0] ? "[credential \"%s\"]: %s is not in "
				      "spd's environment file"
				    : "[credential \"%s\"]: out of memory%s",
			 cr->name, missing);
		tls_refuse(t, 502, method, path, NULL, why);
		return;
	}
	out = rewrite(t, end, cred, cr ? cr->header_name : NULL, &out_len);
	if (cred) {
		OPENSSL_cleanse(cred, strlen(cred));
		free(cred);
	}
	if (out && is_push(t, path, end)) {
		if (has_header(t, end, "content-encoding")) {
			OPENSSL_cleanse(out, out_len);
			free(out);
			tls_refuse(t, 403, method, path, NULL,
				   "an encoded push body is not read by spd");
			return;
		}
		/* Held until its ref updates are judged (push_judge). */
		snprintf(t->path, sizeof(t->path), "%s", path);
		t->inspect = true;
		t->held_head = out;
		t->held_head_len = out_len;
		t->state = T_BODY;
		http_parser_pause(&t->p, 0);
		body(t, t->head + end - 1, t->head_len - end + 1);
		free(t->head);
		t->head = NULL;
		return;
	}
	pconn_journal(c, "net.proxy.request",
		      json_pack("{s:s, s:i, s:s, s:s, s:s, s:s?, s:s?}", "host",
				c->host, "port", (int)c->dport, "method",
				method, "path", path, "decision", "allow",
				"rule", rule ? rule->text : NULL, "credential",
				cr ? cr->name : NULL));
	if (!out || tls_send(&t->up, out, out_len) < 0) {
		if (out)
			OPENSSL_cleanse(out, out_len);
		free(out);
		tls_close(t);
		return;
	}
	OPENSSL_cleanse(out, out_len);
	free(out);
	c->up.bytes += end;
	t->state = T_BODY;
	/* The parser paused on the head's last line feed, which it reads
	 * again: the body starts after it. */
	http_parser_pause(&t->p, 0);
	body(t, t->head + end - 1, t->head_len - end + 1);
	if (t->state == T_BODY || t->state == T_DONE) {
		free(t->head);
		t->head = NULL;
	}
}

/* Body bytes (the first call: from the head's last line feed): passed
 * up to the request's end; what comes after is not forwarded. */
static void body(struct ptls *t, const char *data, size_t len)
{
	bool first = t->head && data >= t->head && data < t->head + t->head_len;
	size_t parsed;

	if (t->state != T_BODY || !len)
		return;
	parsed = http_parser_execute(&t->p, &req_settings, data, len);
	if (HTTP_PARSER_ERRNO(&t->p) != HPE_OK &&
	    HTTP_PARSER_ERRNO(&t->p) != HPE_PAUSED) {
		tls_close(t);
		return;
	}
	if (HTTP_PARSER_ERRNO(&t->p) == HPE_PAUSED)
		t->state = T_DONE; /* the request ended */
	if (first) {
		data++;
		parsed = parsed ? parsed - 1 : 0;
	}
	if (t->inspect) {
		struct proxy_pkt_update u[PROXY_PUSH_UPDATES_MAX];
		const char *why;
		size_t n;
		int r;

		if (parsed > PUSH_HEAD_MAX * 2 - t->held_len || t->pkt_over) {
			tls_refuse(t, 403, "POST", t->path, "git push",
				   "the push's ref updates are too long");
			return;
		}
		if (!t->held && !(t->held = malloc(PUSH_HEAD_MAX * 2))) {
			tls_close(t);
			return;
		}
		memcpy(t->held + t->held_len, data, parsed);
		t->held_len += parsed;
		r = proxy_pkt_commands(t->pkt, t->pkt_len, u,
				       PROXY_PUSH_UPDATES_MAX, &n, &why);
		if (r == 0 && t->state == T_DONE)
			why = "the push ended before its ref updates did";
		if (r < 0 || (r == 0 && t->state == T_DONE))
			tls_refuse(t, 403, "POST", t->path, "git push", why);
		else if (r == 1)
			push_judge(t, u, n);
		return;
	}
	t->c->up.bytes += parsed;
	if (parsed && tls_send(&t->up, data, parsed) < 0)
		tls_close(t);
}

static void head(struct ptls *t, const char *data, size_t len)
{
	size_t parsed, before = t->head_len, end;

	if (!t->head && !(t->head = malloc(PROXY_HEAD_MAX))) {
		tls_close(t);
		return;
	}
	if (len > PROXY_HEAD_MAX - t->head_len) {
		tls_refuse(t, 403, NULL, NULL, NULL, "request head too long");
		return;
	}
	memcpy(t->head + t->head_len, data, len);
	t->head_len += len;
	parsed =
	    http_parser_execute(&t->p, &req_settings, t->head + before, len);
	if (HTTP_PARSER_ERRNO(&t->p) == HPE_PAUSED) {
		end = before + parsed + 1;
		if (end > t->head_len || t->head[end - 1] != '\n') {
			tls_refuse(t, 403, NULL, NULL, NULL,
				   "not an HTTP/1.1 request");
			return;
		}
		judge(t, end);
		return;
	}
	if (HTTP_PARSER_ERRNO(&t->p) != HPE_OK)
		tls_refuse(t, 403, NULL, NULL, NULL, "not an HTTP/1.1 request");
}

/* Plaintext from the run, in order. */
static void from_run(struct ptls *t, const char *data, size_t len)
{
	if (t->state == T_HEAD)
		head(t, data, len);
	else if (t->state == T_BODY)
		body(t, data, len);
	/* T_DONE: a request after the one judged is not forwarded. */
}

/* ---- the two sides ------------------------------------------------- */

static void client_hs_begin(struct ptls *t)
{
	struct pconn *c = t->c;
	SSL_CTX *ctx = leaf_ctx(c->port->spd->proxy_tls, c->host);

	t->cl.ssl = ctx ? SSL_new(ctx) : NULL;
	t->cl.rbio = BIO_new(BIO_s_mem());
	t->cl.wbio = BIO_new(BIO_s_mem());
	if (!t->cl.ssl || !t->cl.rbio || !t->cl.wbio) {
		BIO_free(t->cl.rbio);
		BIO_free(t->cl.wbio);
		t->cl.rbio = t->cl.wbio = NULL;
		tls_close(t);
		return;
	}
	SSL_set_bio(t->cl.ssl, t->cl.rbio, t->cl.wbio);
	SSL_set_accept_state(t->cl.ssl);
	t->state = T_CL_HS;
	if (raw_write(&t->cl, c->out, c->out_len) < 0 ||
	    uv_read_start(t->cl.s, tls_alloc, tls_read) < 0)
		tls_close(t);
}

static void up_data(struct ptls *t)
{
	struct pconn *c = t->c;
	int n, e;

	if (t->state == T_UP_HS) {
		n = SSL_do_handshake(t->up.ssl);
		flush(&t->up);
		if (n == 1) {
			client_hs_begin(t);
			return;
		}
		e = SSL_get_error(t->up.ssl, n);
		if (e == SSL_ERROR_WANT_READ)
			return;
		{
			char why[300];
			long v = SSL_get_verify_result(t->up.ssl);

			snprintf(
			    why, sizeof(why), "TLS with %s port %u failed: %s",
			    c->host, c->dport,
			    v != X509_V_OK ? X509_verify_cert_error_string(v)
					   : "handshake error");
			ERR_clear_error();
			uv_read_stop(t->up.s);
			pconn_refuse_plain(c, 502, why);
		}
		return;
	}
	while ((n = SSL_read(t->up.ssl, t->plain, sizeof(t->plain))) > 0) {
		c->down.bytes += (uint64_t)n;
		if (t->cl.ssl && tls_send(&t->cl, t->plain, (size_t)n) < 0) {
			tls_close(t);
			return;
		}
	}
	e = SSL_get_error(t->up.ssl, n);
	flush(&t->up);
	if (e != SSL_ERROR_WANT_READ) {
		ERR_clear_error();
		finish(t); /* the server is done (or failed): so is the run */
	}
}

static void cl_data(struct ptls *t)
{
	struct pconn *c = t->c;
	int n, e;

	if (t->state == T_CL_HS) {
		n = SSL_do_handshake(t->cl.ssl);
		flush(&t->cl);
		if (n != 1) {
			e = SSL_get_error(t->cl.ssl, n);
			if (e == SSL_ERROR_WANT_READ)
				return;
			ERR_clear_error();
			pconn_refusal_note(
			    c, 502,
			    "the run's client refused spd's certificate "
			    "(does it use the CA bundle in SSL_CERT_FILE?)");
			tls_close(t);
			return;
		}
		t->state = T_HEAD;
		http_parser_init(&t->p, HTTP_REQUEST);
		t->p.data = t;
	}
	while (!c->closing &&
	       (n = SSL_read(t->cl.ssl, t->plain, sizeof(t->plain))) > 0)
		from_run(t, t->plain, (size_t)n);
	if (c->closing)
		return;
	e = SSL_get_error(t->cl.ssl, n);
	flush(&t->cl);
	if (e != SSL_ERROR_WANT_READ) {
		ERR_clear_error();
		tls_close(t);
	}
}

static void tls_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct pconn *c = s->data;
	struct ptls *t = c->tls;
	bool from_client = s == (uv_stream_t *)&c->client;
	struct tside *side = from_client ? &t->cl : &t->up,
		     *other = from_client ? &t->up : &t->cl;

	/* P_DONE: refused in plain HTTP (the server's handshake failed),
	 * the answer on its way. */
	if (n == 0 || c->closing || c->state == P_DONE || t->finishing)
		return;
	if (n < 0) {
		if (!from_client && t->state == T_UP_HS) {
			uv_read_stop(t->up.s);
			pconn_refuse_plain(c, 502,
					   "the server closed the connection "
					   "during the TLS handshake");
		} else if (from_client)
			tls_close(t);
		else
			finish(t);
		return;
	}
	c->last_ms = uv_now(c->port->spd->loop);
	if (BIO_write(side->rbio, b->base, (int)n) != (int)n) {
		tls_close(t);
		return;
	}
	if (from_client)
		cl_data(t);
	else
		up_data(t);
	if (c->closing || t->finishing)
		return;
	/* The slower side sets the pace: no more from here while what it
	 * made for the other side is still being written. */
	if (other->pending > 0) {
		uv_read_stop(s);
		side->paused = true;
	}
}

void pconn_tls_start(struct pconn *c)
{
	struct proxy_tls *pt = c->port->spd->proxy_tls;
	struct ptls *t;
	size_t hl = strlen(c->host);
	SSL_CTX *ctx;

	if (!pt) {
		pconn_refuse_plain(c, 502,
				   "the proxy's CA is not set up; the run "
				   "cannot trust spd for this host");
		return;
	}
	if (!cert_name_ok(c->host)) {
		pconn_refuse_plain(c, 403, "not a host name spd can terminate");
		return;
	}
	ctx =
	    pt->up_test && hl > 5 && strcasecmp(c->host + hl - 5, ".test") == 0
		? pt->up_test
		: pt->up_sys;
	t = calloc(1, sizeof(*t));
	if (!t) {
		pconn_close(c);
		return;
	}
	c->tls = t;
	t->c = c;
	t->cl.t = t->up.t = t;
	t->cl.s = (uv_stream_t *)&c->client;
	t->up.s = (uv_stream_t *)&c->upstream;
	t->up.ssl = SSL_new(ctx);
	t->up.rbio = BIO_new(BIO_s_mem());
	t->up.wbio = BIO_new(BIO_s_mem());
	if (!t->up.ssl || !t->up.rbio || !t->up.wbio) {
		BIO_free(t->up.rbio);
		BIO_free(t->up.wbio);
		t->up.rbio = t->up.wbio = NULL;
		pconn_close(c);
		return;
	}
	SSL_set_bio(t->up.ssl, t->up.rbio, t->up.wbio);
	SSL_set_connect_state(t->up.ssl);
	if (SSL_set_tlsext_host_name(t->up.ssl, c->host) != 1 ||
	    SSL_set1_host(t->up.ssl, c->host) != 1) {
		pconn_close(c);
		return;
	}
	t->state = T_UP_HS;
	SSL_do_handshake(t->up.ssl);
	if (flush(&t->up) < 0 ||
	    uv_read_start(t->up.s, tls_alloc, tls_read) < 0)
		pconn_close(c);
}

void pconn_tls_free(struct pconn *c)
{
	struct ptls *t = c->tls;

	if (!t)
		return;
	SSL_free(t->cl.ssl);
	SSL_free(t->up.ssl);
	if (t->head)
		OPENSSL_cleanse(t->head, t->head_len);
	free(t->head);
	if (t->held_head)
		OPENSSL_cleanse(t->held_head, t->held_head_len);
	free(t->held_head);
	free(t->held);
	free(t->pkt);
	OPENSSL_cleanse(t->plain, sizeof(t->plain));
	free(t);
	c->tls = NULL;
}
