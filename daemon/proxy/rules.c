/*
 * The egress proxy's decisions that need no I/O: a host name against
 * [network] allow-host, deny-host and ask-host (spd.conf's, tightened by
 * the project's), and a resolved address against the classes a name
 * must not lead to.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "daemon/proxy/proxy.h"
#include "daemon/spd.h"
#include "daemon/transport/rpc.h"

/* pattern: "name" or "*.suffix"; host without a trailing dot. */
static bool host_matches(const char *pattern, const char *host, size_t hlen)
{
	size_t plen = strlen(pattern);

	if (plen && pattern[plen - 1] == '.')
		plen--;
	if (plen > 2 && pattern[0] == '*' && pattern[1] == '.') {
		/* "*.example.com" matches "a.example.com", never
		 * "example.com" or "badexample.com". */
		return hlen > plen - 1 &&
		       strncasecmp(host + hlen - (plen - 1), pattern + 1,
				   plen - 1) == 0;
	}
	return plen == hlen && strncasecmp(pattern, host, hlen) == 0;
}

static bool list_matches(char *const *list, const char *host, size_t hlen)
{
	for (size_t i = 0; list && list[i]; i++)
		if (host_matches(list[i], host, hlen))
			return true;
	return false;
}

/* The address literal s into *ret (AF_INET or AF_INET6), or false. */
static bool parse_address(const char *s, struct sockaddr_storage *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, s, &((struct sockaddr_in *)ret)->sin_addr) ==
	    1) {
		ret->ss_family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, s, &((struct sockaddr_in6 *)ret)->sin6_addr) ==
	    1) {
		ret->ss_family = AF_INET6;
		return true;
	}
	return false;
}

static bool same_address(const struct sockaddr *a,
			 const struct sockaddr_storage *b)
{
	if (a->sa_family != b->ss_family)
		return false;
	if (a->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
			      &((const struct sockaddr_in *)b)->sin_addr,
			      4) == 0;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

static bool address_listed(const struct spd_config *cfg,
			   const struct sockaddr *sa)
{
	struct sockaddr_storage ss;

	for (size_t i = 0;
	     cfg->proxy_allow_address && cfg->proxy_allow_address[i]; i++)
		if (parse_address(cfg->proxy_allow_address[i], &ss) &&
		    same_address(sa, &ss))
			return true;
	return false;
}

enum proxy_verdict proxy_decide(const struct spd_config *cfg, const char *host)
{
	struct sockaddr_storage ss;
	size_t hlen = strlen(host);

	if (hlen && host[hlen - 1] == '.')
		hlen--;
	if (hlen == 0)
		return PROXY_DENY_UNLISTED;
	if (list_matches(cfg->proxy_deny_host, host, hlen))
		return PROXY_DENY_RULE;
	/* A raw address skips the name rules: "allow-host = *.example.com"
	 * must not be read as permission for whatever address a run
	 * types. */
	if (parse_address(host, &ss))
		return address_listed(cfg, (struct sockaddr *)&ss)
			   ? PROXY_ALLOW
			   : PROXY_DENY_ADDRESS;
	if (list_matches(cfg->proxy_allow_host, host, hlen))
		return PROXY_ALLOW;
	if (list_matches(cfg->proxy_ask_host, host, hlen))
		return PROXY_ASK;
	return PROXY_DENY_UNLISTED;
}

static size_t host_len(const char *host)
{
	size_t hlen = strlen(host);

	return hlen && host[hlen - 1] == '.' ? hlen - 1 : hlen;
}

bool proxy_project_names(const struct proxy_project *proj, const char *host)
{
	size_t hlen = host_len(host);

	return proj && hlen &&
	       (list_matches(proj->allow, host, hlen) ||
		list_matches(proj->ask, host, hlen));
}

enum proxy_verdict proxy_decide_run(const struct spd_config *cfg,
				    const struct proxy_project *proj,
				    const char *host)
{
	enum proxy_verdict v = proxy_decide(cfg, host);
	size_t hlen = host_len(host);

	if ((v != PROXY_ALLOW && v != PROXY_ASK) || !proj)
		return v;
	if (proj->error)
		return PROXY_DENY_PROJECT;
	if (list_matches(proj->deny, host, hlen))
		return PROXY_DENY_PROJECT;
	if (list_matches(proj->ask, host, hlen))
		return PROXY_ASK;
	if (proj->allow && !list_matches(proj->allow, host, hlen))
		return PROXY_DENY_PROJECT_UNLISTED;
	/* The project allows it: what spd.conf said stands (an ask stays
	 * an ask). */
	return v;
}

/* "*.suffix" → true and the suffix (without its dot) in *body. */
static bool wildcard(const char *pattern, const char **body)
{
	if (strlen(pattern) > 2 && pattern[0] == '*' && pattern[1] == '.') {
		*body = pattern + 2;
		return true;
	}
	*body = pattern;
	return false;
}

bool proxy_pattern_covered(char *const *list, const char *pattern)
{
	const char *pb, *qb;
	bool pw = wildcard(pattern, &pb);
	size_t plen = host_len(pb);

	for (size_t i = 0; list && list[i]; i++) {
		bool qw = wildcard(list[i], &qb);
		size_t qlen = host_len(qb);

		/* The same pattern. */
		if (pw == qw && plen == qlen && strncasecmp(pb, qb, plen) == 0)
			return true;
		/* "*.s" covers a name below s and a "*.t" with t below s
		 * (or t = s). */
		if (qw &&
		    (host_matches(list[i], pb, plen) ||
		     (pw && plen == qlen && strncasecmp(pb, qb, plen) == 0)))
			return true;
	}
	return false;
}

/* Why a v4 address (host order) is not public, or NULL. */
static const char *v4_class(uint32_t a)
{
	if ((a >> 24) == 127)
		return "loopback";
	if ((a >> 24) == 0)
		return "unspecified";
	if ((a >> 16) == 0xa9fe) /* 169.254/16: cloud metadata lives here */
		return "link-local";
	if ((a >> 24) == 10 || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8)
		return "private";
	if ((a >> 22) == (0x64400000u >> 22)) /* 100.64/10, carrier NAT */
		return "shared";
	if ((a >> 28) >= 0xe) /* multicast, reserved, broadcast */
		return "multicast or reserved";
	return NULL;
}

/* The v4 address (host order) of four bytes in network order. */
static uint32_t v4_at(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
}

/*
 * Why a v6 address that carries a v4 one is not public, or NULL (also
 * for one that carries none).  Each of these reaches the v4 address it
 * embeds through a translator or a tunnel the host may sit behind: a
 * NAT64 gateway (with DNS64 every v4-only name resolves to one), a 6to4
 * relay, a Teredo server.  So 64:ff9b::a9fe:a9fe is the cloud's metadata
 * service as surely as 169.254.169.254 is.
 */
static const char *v6_embedded_class(const uint8_t *b)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0,
					  0, 0,	   0,	 0,    0, 0};
	static const uint8_t compat[12] = {0};
	uint8_t u[4];
	const char *why;

	/* ::ffff:127.0.0.1 reaches 127.0.0.1; so did the deprecated
	 * v4-compatible ::127.0.0.1 (:: and ::1 are classed apart). */
	if (memcmp(b, mapped, 12) == 0 ||
	    (memcmp(b, compat, 12) == 0 && v4_at(b + 12) > 1))
		return v4_class(v4_at(b + 12));
	/* NAT64's well-known prefix 64:ff9b::/96 (RFC 6052). */
	if (memcmp(b, nat64, 12) == 0)
		return v4_class(v4_at(b + 12));
	/* The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215): a network
	 * may put its translator's prefix anywhere from /48 to /96 in it,
	 * so each place RFC 6052 allows for the v4 address is classed, and
	 * any one that is not public refuses it. */
	if (memcmp(b, nat64, 4) == 0 && b[4] == 0 && b[5] == 1) {
		static const uint8_t at[][4] = {
		    {6, 7, 9, 10},   /* /48 */
		    {7, 9, 10, 11},  /* /56 */
		    {9, 10, 11, 12}, /* /64 */
		    {12, 13, 14, 15} /* /96 */
		};
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			for (size_t k = 0; k < 4; k++)
				u[k] = b[at[i][k]];
			if ((why = v4_class(v4_at(u))))
				return why;
		}
		return NULL;
	}
	/* 6to4, 2002:V4ADDR::/48 (RFC 3056). */
	if (b[0] == 0x20 && b[1] == 0x02)
		return v4_class(v4_at(b + 2));
	/* Teredo, 2001:0::/32 (RFC 4380): the server's v4 address, and the
	 * client's with every bit flipped. */
	if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
		if ((why = v4_class(v4_at(b + 4))))
			return why;
		for (size_t k = 0; k < 4; k++)
			u[k] = (uint8_t)~b[12 + k];
		return v4_class(v4_at(u));
	}
	return NULL;
}

const char *proxy_address_class(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return v4_class(
		    ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6) {
		const uint8_t *b =
		    ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		const char *why = v6_embedded_class(b);

		if (why)
			return why;
		if (IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)b))
			return "loopback";
		if (IN6_IS_ADDR_UNSPECIFIED((const struct in6_addr *)b))
			return "unspecified";
		if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
			return "link-local";
		/* fec0::/10, deprecated (RFC 3879) but still routed inside
		 * some sites: as private as fc00::/7. */
		if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
			return "site-local";
		if ((b[0] & 0xfe) == 0xfc)
			return "unique-local";
		if (b[0] == 0xff)
			return "multicast or reserved";
		return NULL;
	}
	return "not an IP address";
}

bool proxy_address_ok(const struct spd_config *cfg, const struct sockaddr *sa)
{
	return !proxy_address_class(sa) || address_listed(cfg, sa);
}

json_t *proxy_state_add(json_t *o, const struct spd_config *cfg)
{
	if (o)
		json_object_set_new(
		    o, "proxy",
		    json_pack("{s:o, s:o, s:o}", "allow_host",
			      rpc_strings(cfg->proxy_allow_host), "ask_host",
			      rpc_strings(cfg->proxy_ask_host), "deny_host",
			      rpc_strings(cfg->proxy_deny_host)));
	return o;
}
