/* net OP ARGS...: reach the network from inside a run.
 *   tcp IP PORT | udp IP PORT | mptcp IP PORT | unix PATH | abstract NAME
 *   | unixdgram PATH | raw | packet | vsock PORT | netlink PROTO | alg
 *   | dns | talk     (talk: a server and a client within this process tree)
 * Connects time out after a second: nothing may leave this machine. */
#include "common.h"
#include <signal.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

#define NET_TIMEOUT_MS 1000

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int err = 0;
	socklen_t el = sizeof(err);

	fcntl(fd, F_SETFL, O_NONBLOCK);
	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	if (poll(&p, 1, NET_TIMEOUT_MS) != 1)
		return -ETIMEDOUT;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
	return -err;
}

static void inet(const char *name, int type, int proto, const char *ip,
		 int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port)};
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, proto), r;

	if (fd < 0) {
		res_err(name, errno);
		return;
	}
	inet_pton(AF_INET, ip, &sa.sin_addr);
	if (type == SOCK_DGRAM) {
		const char msg[] = "escape-udp";

		r = sendto(fd, msg, sizeof(msg), 0, (void *)&sa, sizeof(sa)) < 0
			? -errno
			: 0;
	} else {
		r = connect_timeout(fd, (void *)&sa, sizeof(sa));
		if (r == 0)
			(void)!write(fd, "escape-tcp\n", 11);
	}
	if (r == 0)
		res_ok(name, "%s:%d", ip, port);
	else
		res_err(name, -r);
	close(fd);
}

static void unix_conn(const char *name, const char *path, int abstract,
		      int type)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0), r;
	socklen_t len;

	strncpy(sa.sun_path + abstract, path, sizeof(sa.sun_path) - 2);
	len = offsetof(struct sockaddr_un, sun_path) + abstract + strlen(path) +
	      !abstract;
	if (type == SOCK_DGRAM)
		r = sendto(fd, "escape-dgram", 12, 0, (void *)&sa, len) < 0
			? -errno
			: 0;
	else
		r = connect(fd, (void *)&sa, len) < 0 ? -errno : 0;
	if (r == 0) {
		if (type == SOCK_STREAM) {
			char buf[256];
			ssize_t n;

			(void)!write(fd,
				     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
				     "\"ping\"}\n",
				     40);
			struct pollfd p = {.fd = fd, .events = POLLIN};

			n = poll(&p, 1, 500) == 1
				? read(fd, buf, sizeof(buf) - 1)
				: 0;
			buf[n > 0 ? n : 0] = 0;
			res_ok(name, "connected %s%s reply=%s",
			       abstract ? "@" : "", path, buf);
		} else {
			res_ok(name, "sent to %s", path);
		}
	} else {
		res_err(name, -r);
	}
	close(fd);
}

static void family(const char *name, int fam, int type, int proto)
{
	int fd = socket(fam, type | SOCK_CLOEXEC, proto);

	if (fd < 0)
		res_err(name, errno);
	else
		res_ok(name, "socket(%d,%d,%d)", fam, type, proto);
	if (fd >= 0)
		close(fd);
}

static void dns(void)
{
	FILE *f = fopen("/etc/resolv.conf", "r");
	char line[256], ip[64] = "";

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "nameserver %63s", ip) == 1 && strchr(ip, '.'))
			break;
	if (f)
		fclose(f);
	if (!ip[0]) {
		printf("R dns ERR no-ipv4-nameserver\n");
		return;
	}
	/* A query for a name that cannot exist: if this ever leaves, it
	 * asks the resolver about nothing real. */
	static const unsigned char q[] = {
	    0x12, 0x34, 1,   0,	  0,   1,   0,	 0,   0,   0,	0,   0,
	    10,	  's',	'p', 'd', '-', 'e', 's', 'c', 'a', 'p', 'e', 7,
	    'i',  'n',	'v', 'a', 'l', 'i', 'd', 0,   0,   1,	0,   1};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		res_err("dns", errno);
		return;
	}
	inet_pton(AF_INET, ip, &sa.sin_addr);
	if (sendto(fd, q, sizeof(q), 0, (void *)&sa, sizeof(sa)) < 0) {
		res_err("dns", errno);
	} else {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char buf[512];

		if (poll(&p, 1, NET_TIMEOUT_MS) == 1 &&
		    recv(fd, buf, sizeof(buf), 0) > 0)
			res_ok("dns", "answer from %s", ip);
		else
			res_ok("dns", "query sent to %s (no answer)", ip);
	}
	close(fd);
}

static void talk(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[32] = "";

	if (s < 0) {
		res_err("talk", errno);
		return;
	}
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (bind(s, (void *)&sa, sizeof(sa)) < 0 || listen(s, 1) < 0 ||
	    getsockname(s, (void *)&sa, &len) < 0) {
		res_err("talk", errno);
		return;
	}
	pid_t pid = fork();

	if (pid == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0);

		if (connect(c, (void *)&sa, sizeof(sa)) == 0)
			(void)!write(c, "hello", 5);
		_exit(0);
	}
	int a = accept(s, NULL, NULL);

	if (a >= 0 && read(a, buf, sizeof(buf) - 1) == 5 &&
	    !strcmp(buf, "hello"))
		res_ok("talk", "server and client talked");
	else
		res_err("talk", errno ? errno : EPROTO);
	waitpid(pid, NULL, 0);
}

int main(int argc, char **argv)
{
	int n;
	char **a = expand_args(argc - 1, argv + 1, &n);
	char name[256];

	/* A listener that accepts and closes at once must not kill this
	 * process with SIGPIPE when it writes: the next attempts (the
	 * abstract socket after the pathname one) would never be made. */
	signal(SIGPIPE, SIG_IGN);

	for (int i = 0; i < n; i++) {
		const char *op = a[i];

		if (!strcmp(op, "tcp") || !strcmp(op, "udp") ||
		    !strcmp(op, "mptcp")) {
			if (i + 2 >= n)
				break;
			snprintf(name, sizeof(name), "%s-%s:%s", op, a[i + 1],
				 a[i + 2]);
			inet(name, op[0] == 'u' ? SOCK_DGRAM : SOCK_STREAM,
			     op[0] == 'm' ? IPPROTO_MPTCP : 0, a[i + 1],
			     atoi(a[i + 2]));
			i += 2;
		} else if (!strcmp(op, "unix") || !strcmp(op, "abstract") ||
			   !strcmp(op, "unixdgram")) {
			if (i + 1 >= n)
				break;
			snprintf(name, sizeof(name), "%s-%s", op, a[i + 1]);
			unix_conn(name, a[i + 1], op[0] == 'a',
				  op[4] == 'd' ? SOCK_DGRAM : SOCK_STREAM);
			i += 1;
		} else if (!strcmp(op, "raw")) {
			family("raw-icmp", AF_INET, SOCK_RAW, IPPROTO_ICMP);
			family("raw6", AF_INET6, SOCK_RAW, IPPROTO_RAW);
		} else if (!strcmp(op, "packet")) {
			family("packet", AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
			family("packet-dgram", AF_PACKET, SOCK_DGRAM,
			       htons(ETH_P_IP));
		} else if (!strcmp(op, "vsock")) {
			struct sockaddr_vm vm = {.svm_family = AF_VSOCK,
						 .svm_cid = VMADDR_CID_HOST,
						 .svm_port = 9999};
			int fd =
			    socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (fd < 0)
				res_err("vsock", errno);
			else if (connect_timeout(fd, (void *)&vm, sizeof(vm)) ==
				 0)
				res_ok("vsock", "connected to host cid");
			else
				res_ok("vsock",
				       "socket created (connect failed)");
		} else if (!strcmp(op, "netlink")) {
			family("netlink-audit", AF_NETLINK, SOCK_RAW,
			       NETLINK_AUDIT);
			family("netlink-uevent", AF_NETLINK, SOCK_DGRAM,
			       NETLINK_KOBJECT_UEVENT);
			family("netlink-sockdiag", AF_NETLINK, SOCK_RAW,
			       NETLINK_SOCK_DIAG);
			family("netlink-generic", AF_NETLINK, SOCK_RAW,
			       NETLINK_GENERIC);
			family("netlink-netfilter", AF_NETLINK, SOCK_RAW,
			       NETLINK_NETFILTER);
		} else if (!strcmp(op, "alg")) {
			family("alg", 38 /* AF_ALG */, SOCK_SEQPACKET, 0);
			family("bluetooth", 31, SOCK_RAW, 0);
			family("xdp", 44, SOCK_RAW, 0);
			/* The family with junk in the upper 32 bits. */
			long fd =
			    syscall(SYS_socket, 0xdead00000000ul | AF_PACKET,
				    SOCK_RAW, htons(ETH_P_ALL));
			if (fd < 0)
				res_err("packet-hi", errno);
			else
				res_ok("packet-hi", "socket created");
		} else if (!strcmp(op, "inet")) {
			family("socket-inet", AF_INET, SOCK_STREAM, 0);
			family("socket-inet6", AF_INET6, SOCK_DGRAM, 0);
		} else if (!strcmp(op, "dns")) {
			dns();
		} else if (!strcmp(op, "talk")) {
			talk();
		} else {
			fprintf(stderr, "net: unknown op %s\n", op);
			return 2;
		}
	}
	return 0;
}
