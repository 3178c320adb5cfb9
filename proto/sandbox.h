/*
 * The messages between spd and sandboxd (docs/design.md, "Processes"): small
 * typed binary records over a SOCK_SEQPACKET socketpair, never JSON.
 *
 * Every message is one datagram: a fixed header {type, len, id} followed
 * by exactly len bytes of body.  Each type has one body struct; a body is
 * decoded only when its length is exactly what the type requires (RUN,
 * the one variable message, ends with a string table whose length is a
 * field of its fixed part, and must then match exactly too).  File
 * descriptors travel as SCM_RIGHTS beside the datagram.  A message longer
 * than SBXP_MSG_MAX, an unknown type or a wrong length is a broken peer:
 * sandboxd exits, spd restarts it.
 *
 * Both ends are built from this tree at the same time, so host byte order
 * is the wire format; every struct here has fixed-width fields and
 * explicit reserved bytes (zero, checked on receipt) instead of padding,
 * and this header includes nothing of sandboxd or spd.
 */
#ifndef SPD_PROTO_SANDBOX_H
#define SPD_PROTO_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

/* Network modes (docs/design.md): none, a private loopback, the host's
 * network, and broker: none, except that 127.0.0.1:PORT inside the run
 * reaches spd's model broker (spctl agent; docs/sandbox.md, "Agents and
 * the broker").  In broker mode the run has its own network namespace
 * with lo up and one listening socket on it, made by the run's init and
 * held by spd; seccomp allows AF_INET (not AF_INET6) sockets, and
 * Landlock (ABI 4+) allows TCP connect to PORT only and no bind. */
enum sbx_net {
	SBX_NET_NONE = 0,
	SBX_NET_LOOPBACK = 1,
	SBX_NET_HOST = 2,
	SBX_NET_BROKER = 3,
	/* As BROKER, but the one listener is spd's egress proxy
	 * (docs/sandbox.md, "Network mode proxy"). */
	SBX_NET_PROXY = 4,
	SBX_NET__COUNT,
};

/* What sandboxd's probe found (PROBE_RESULT's body): fixed-width fields
 * with no padding, each flag a byte that is 0 or 1, the reserved bytes
 * zero, each sentence ending within its field; spd checks all of it on
 * receipt (daemon/sandbox/sbx.c). */
#define SBX_WHY_MAX 240

struct sbx_layers {
	uint8_t userns;		  /* a user namespace can be created by us */
	uint8_t seccomp;	  /* seccomp filters can be loaded */
	uint8_t cgroup2;	  /* cgroup v2 is mounted at /sys/fs/cgroup */
	uint8_t tiocsti_disabled; /* dev.tty.legacy_tiocsti = 0 (or absent) */
	uint8_t idmap_mounts;	  /* mount_setattr(MOUNT_ATTR_IDMAP) works */
	uint8_t run_init;	  /* sandboxd-init runs from its memfd */
	uint8_t reserved[2];	  /* zero */
	int32_t landlock_abi;	  /* 0 when absent */
	/* When a layer is missing: the cause and the fix, one sentence. */
	char userns_why[SBX_WHY_MAX];
	char landlock_why[SBX_WHY_MAX];
	char seccomp_why[SBX_WHY_MAX];
	char cgroup2_why[SBX_WHY_MAX];
	char tiocsti_why[SBX_WHY_MAX];
	char idmap_why[SBX_WHY_MAX];
	char run_init_why[SBX_WHY_MAX];
};
_Static_assert(sizeof(struct sbx_layers) == 12 + 7 * SBX_WHY_MAX,
	       "struct sbx_layers has no padding");

/* The strings of one RUN (argv, environment, paths): enough for a long
 * command line and a normal environment, small enough that one datagram
 * fits in the default socket buffer (212992 bytes) with room to spare. */
#define SBXP_STRTAB_MAX (96 * 1024)
/* The hard maximum of any message, header included. */
#define SBXP_MSG_MAX (SBXP_STRTAB_MAX + 1024)
/* Entries per list of a RUN (argv, env, each path list): Landlock needs
 * fixed arrays in the child, and no sane command needs more. */
#define SBXP_LIST_MAX 1024
/* Runs sandboxd holds at once: each holds three descriptors and a pid
 * namespace.  spd counts its runs against the same number (holding some
 * back for the operator), so sandboxd's own refusal is a last resort. */
#define SBXP_RUNS_MAX 256
/* Path lists (writable, hidden, read-only, empty files, read-only
 * binds) together: each
 * becomes a mount and maybe a Landlock rule (SBX_LANDLOCK_MAX_PATHS). */
#define SBXP_PATHS_MAX 64
/* Names of a RUN's link list (SBXP_L_LINKS): the workspace's names of
 * multi-linked files that spd's watch knows of.  A workspace with more
 * (git clone --local hard-links every object) gets the full walk in
 * sandboxd instead, which is what a list that long would cost anyway. */
#define SBXP_LINKS_MAX SBXP_LIST_MAX
/* Past this many names to bind one by one, the hard-link check binds
 * directories whole (docs/sandbox.md, "Hard links"): sandboxd's walk, and
 * spd's list, which then carries SBXP_L_LINK_RO_DIRS. */
#define SBXP_LINKS_EACH_MAX 128

/*
 * Past SBXP_LINKS_EACH_MAX, whether a directory (not the workspace, not
 * under .git) is bound read-only whole, with all below it: most files
 * directly in it have a link outside (nshort against nown, the files the
 * run may write: a package's directory), or most of what it holds is
 * read-only so: those files and the directories below it bound whole
 * (nwhole), against its own files and the other directories holding a
 * file (nopen).  The second makes pnpm's node_modules/.pnpm, a directory
 * of packages beside a lock file, one bind instead of one per package.
 * sandboxd's walk and spd's plan judge alike (docs/sandbox.md, "Hard
 * links").
 */
static inline int sbxp_links_whole(uint32_t nshort, uint32_t nown,
				   uint32_t nwhole, uint32_t nopen)
{
	return nshort > nown ||
	       (uint64_t)nshort + nwhole > (uint64_t)nown + nopen;
}
/* Read-only bind pairs of a RUN (the held-out checks need one). */
#define SBXP_RO_BINDS_MAX 8
/* File descriptors with a RUN: the write ends of stdout and stderr (one,
 * both 1 and 2, with SBXP_RUN_MERGED), and with SBXP_RUN_STDIN the read
 * end of the command's stdin after them (sbxp_run_nfds). */
#define SBXP_RUN_FDS 3
/* Warnings a STARTED carries: one per layer that can be missing. */
#define SBXP_WARN_MAX 8
#define SBXP_WARN_LEN 256
#define SBXP_ERRMSG_LEN 256

enum sbxp_type {
	SBXP_RUN = 1,	       /* spd -> sandboxd, struct sbxp_run + fds */
	SBXP_STARTED = 2,      /* sandboxd -> spd, struct sbxp_started */
	SBXP_EXITED = 3,       /* sandboxd -> spd, struct sbxp_exited */
	SBXP_CANCEL = 4,       /* spd -> sandboxd, struct sbxp_cancel */
	SBXP_PROBE = 5,	       /* spd -> sandboxd, struct sbxp_probe */
	SBXP_PROBE_RESULT = 6, /* sandboxd -> spd, struct sbx_layers */
	SBXP_LISTENER = 7,     /* sandboxd -> spd, struct sbxp_listener + fd */
	SBXP__TYPE_MAX,
};

/* id: the run a message is about (RUN, STARTED, EXITED, CANCEL), chosen
 * by spd, or the probe's cookie (PROBE, PROBE_RESULT). */
struct sbxp_hdr {
	uint32_t type;
	uint32_t len; /* of the body, after this header */
	uint32_t id;
};

/* The lists of a RUN, in string-table order after workspace, cwd, home. */
enum sbxp_list {
	SBXP_L_ARGV,	     /* at least one entry */
	SBXP_L_ENV,	     /* "NAME=value" */
	SBXP_L_WRITABLE,     /* extra writable paths (absolute) */
	SBXP_L_HIDDEN,	     /* paths made unreadable (absolute) */
	SBXP_L_READONLY,     /* read-only inside writable paths (absolute) */
	SBXP_L_EMPTY,	     /* files that read as empty (absolute) */
	SBXP_L_RO_BINDS,     /* pairs: host dir, where it is seen read-only
			    inside the workspace (both absolute) */
	SBXP_L_LINKS,	     /* with SBXP_RUN_LINKS_LISTED: every name below
			    the workspace (relative, canonical, in strcmp
			    order, no duplicate) whose file has more than
			    one link, but for those below LINK_RO_DIRS */
	SBXP_L_LINK_RO_DIRS, /* the same: directories to bind read-only
				whole, with all below them (most files
				directly in one have a link outside) */
	SBXP_L__COUNT,
};

enum sbxp_rlimit {
	SBXP_RLIM_NPROC,
	SBXP_RLIM_NOFILE,
	SBXP_RLIM_FSIZE,
	SBXP_RLIM_CPU,
	SBXP_RLIM_AS,
	SBXP_RLIM__COUNT,
};

/* Run even where a layer is missing, with one warning per missing layer
 * (docs/design.md: mode = best-effort).  Without it such a run is refused. */
#define SBXP_RUN_BEST_EFFORT 0x1u
/* SBXP_L_LINKS is complete: spd's inotify watch of the workspace saw
 * nothing since its last walk that could have added a multi-linked name
 * it does not list (docs/sandbox.md, "Hard links").  sandboxd then checks
 * the listed names instead of walking the workspace, and walks it in full
 * whenever a listed name cannot be judged (the list is only a hint: a
 * stale one never leaves a name writable that the walk would bind). */
#define SBXP_RUN_LINKS_LISTED 0x2u
/* The RUN carries a third descriptor, the read end of a pipe that
 * becomes the command's stdin (spctl acp: the agent's protocol channel);
 * without it stdin is /dev/null.  sandboxd refuses a RUN whose
 * descriptor count does not match this flag. */
#define SBXP_RUN_STDIN 0x4u
/* The command's stdout and stderr are one pipe (cmd.run's merge_stderr:
 * a client whose stdout and stderr are one file, as with 2>&1): the RUN
 * carries one output descriptor instead of two and sandboxd puts it on
 * both 1 and 2, so writes to either keep the order the command made
 * them in, which two pipes cannot. */
#define SBXP_RUN_MERGED 0x8u
#define SBXP_RUN__FLAGS 0xfu

struct sbxp_run {
	uint32_t net;	     /* enum sbx_net */
	uint32_t timeout_ms; /* 0: no deadline */
	uint32_t flags;	     /* SBXP_RUN_* */
	uint32_t run_uid;    /* the command's uid when sandboxd runs as root */
	uint32_t run_gid;
	uint32_t strtab_len;		    /* bytes of strtab that follow */
	uint64_t rlimits[SBXP_RLIM__COUNT]; /* 0: sandboxd's default */
	uint32_t counts[SBXP_L__COUNT];
	/* net == SBX_NET_BROKER or SBX_NET_PROXY: the port of 127.0.0.1
	 * inside the run that reaches spd's model broker or its egress
	 * proxy (SBXP_LISTENER); 0 otherwise. */
	uint32_t broker_port;
	/* strtab is at sizeof(struct sbxp_run): a hole before it would be
	 * bytes on the wire that neither side writes (asserted in
	 * proto/sandbox.c).  With an even number of lists, a uint32_t
	 * field here (0) keeps it so. */
	/* Then strtab_len bytes: NUL-terminated strings, in order:
	 * workspace (absolute), cwd (absolute or "" for the workspace),
	 * home (absolute or "" for none: the operator's HOME, whose caches
	 * are writable and whose credential dirs are hidden), then the
	 * entries of each list in enum sbxp_list order. */
	char strtab[];
};

struct sbxp_started {
	int32_t pid; /* the run's init, as sandboxd sees it */
	uint32_t nwarn;
	char warn[SBXP_WARN_MAX][SBXP_WARN_LEN];
};

/* Why an EXITED did not run: spd answers the RPC error of the same name
 * (docs/design.md's error codes). */
enum sbxp_err {
	SBXP_ERR_NONE = 0, /* it ran */
	SBXP_ERR_UNAVAILABLE = 1,
	SBXP_ERR_INTERNAL = 2,
	SBXP_ERR_BAD_REQUEST = 3,
	SBXP_ERR__COUNT,
};

/* The symbolic code of e ("SANDBOX-UNAVAILABLE"), NULL for SBXP_ERR_NONE
 * or a value out of range. */
const char *sbxp_err_code(enum sbxp_err e);

/*
 * How a CANCEL ended a run (EXITED's ended).  With a grace, sandboxd sends
 * SIGTERM first: the run's init forwards it to the command's process
 * group (sandboxd-init, init.h), so that a program that handles it (a
 * Node agent flushing its files) can finish and exit; whatever is still
 * running after the grace gets SIGKILL, the whole pid namespace at once.
 */
enum sbxp_ended {
	SBXP_ENDED_ITSELF = 0, /* no CANCEL ended it */
	SBXP_ENDED_TERM = 1,   /* it ended after SIGTERM, within the grace */
	SBXP_ENDED_KILL = 2,   /* SIGKILL: no grace, or the grace ran out */
	SBXP_ENDED__COUNT,
};

/* The longest grace a CANCEL may ask for: a run holds its sandboxd slot
 * meanwhile, and a program that has not exited in five minutes of
 * SIGTERM is not going to. */
#define SBXP_CANCEL_GRACE_MAX_MS (300 * 1000)

/* PROBE: what spd will ask of the runs that follow, so that sandboxd
 * makes ahead, while idle, what the first of them would make (their
 * uid's user namespaces: sandboxd/linux/spawn.h, spawn_prepare). */
struct sbxp_probe {
	uint32_t run_uid; /* as sbxp_run's: 0, sandboxd's default */
	uint32_t run_gid;
};

struct sbxp_cancel {
	/* 0: SIGKILL at once; else SIGTERM, then SIGKILL after this long
	 * (at most SBXP_CANCEL_GRACE_MAX_MS: more is a broken spd). */
	uint32_t grace_ms;
};

struct sbxp_exited {
	int32_t exit_code;   /* -1 when killed by a signal or not run */
	int32_t term_signal; /* 0 unless killed by a signal */
	uint32_t timed_out;  /* the deadline killed it (1) */
	uint32_t cancelled;  /* a CANCEL ended it (1) */
	uint64_t duration_us;
	uint32_t error; /* enum sbxp_err */
	uint32_t ended; /* enum sbxp_ended */
	char error_msg[SBXP_ERRMSG_LEN];
};

/*
 * The listening socket of a SBX_NET_BROKER or SBX_NET_PROXY run, sent
 * once, right after the run's init made it (before STARTED): a TCP
 * socket bound to 127.0.0.1:port in the run's own network namespace,
 * listening, passed as the one descriptor of the message.  spd accepts
 * on it and serves the connections as the service named (its model
 * broker or its egress proxy); nothing inside the run relays.
 */
enum sbxp_service {
	SBXP_SERVICE_BROKER = 0, /* net == SBX_NET_BROKER */
	SBXP_SERVICE_PROXY = 1,	 /* net == SBX_NET_PROXY */
};

struct sbxp_listener {
	uint32_t port;
	uint32_t service; /* enum sbxp_service */
};

/* A RUN with its strings split back out.  The pointers point into the
 * message buffer given to sbxp_run_decode; lists are NULL-terminated. */
struct sbxp_run_view {
	const struct sbxp_run *msg;
	const char *workspace;
	const char *cwd;
	const char *home;
	const char **lists[SBXP_L__COUNT];
	const char **storage; /* one allocation behind lists */
};

/*
 * The exact body length a message of this type must have, or -1 for an
 * unknown type.  RUN returns its fixed part; the full length then also
 * depends on strtab_len (see sbxp_run_decode).
 */
long sbxp_body_size(uint32_t type);

/*
 * Fill the RUN message m (a buffer of at least SBXP_MSG_MAX bytes, the
 * fixed fields already set by the caller) with the strings: workspace
 * must be absolute; cwd and home may be NULL; lists[i] may be NULL (an
 * empty list) except SBXP_L_ARGV.  Sets counts and strtab_len.  Returns
 * the body length, -EINVAL for a malformed input or -SPD_ETOOBIG when it
 * does not fit the limits above.
 */
long sbxp_run_encode(struct sbxp_run *m, const char *workspace, const char *cwd,
		     const char *home,
		     const char *const *const lists[SBXP_L__COUNT]);

/*
 * Check a received RUN body of len bytes and split its string table.
 * Refuses (-SPD_EPROTO) a length that is not exactly the fixed part plus
 * strtab_len, counts that do not match the strings, relative paths, an
 * empty argv, an odd number of read-only bind entries, unknown flags or
 * a net mode out of range, a link list without SBXP_RUN_LINKS_LISTED
 * or past SBXP_LINKS_MAX, or a link name that is not canonical (empty,
 * absolute, an empty, "." or ".." component, a trailing slash) or not
 * strictly after the one before it in strcmp order.  On success fills
 * *ret (free with sbxp_run_view_free; it points into body, which must
 * outlive it) and returns 0; -ENOMEM or -SPD_EPROTO otherwise.
 */
int sbxp_run_decode(const void *body, size_t len, struct sbxp_run_view *ret);
/* Free what sbxp_run_decode allocated.  Accepts a zeroed view. */
void sbxp_run_view_free(struct sbxp_run_view *v);

/*
 * The number of descriptors a RUN with these flags carries, in order: the
 * write end of stdout, of stderr unless SBXP_RUN_MERGED, the read end of
 * stdin with SBXP_RUN_STDIN.  sandboxd refuses a RUN with any other count.
 */
size_t sbxp_run_nfds(uint32_t flags);

/*
 * Send one message (header, body of len bytes, up to SBXP_RUN_FDS fds) as
 * one datagram.  Returns 0, -EAGAIN on a non-blocking socket that is full
 * (nothing was sent), or -errno.  The fds stay owned by the caller.
 */
int sbxp_send(int sock, uint32_t type, uint32_t id, const void *body,
	      size_t len, const int *fds, size_t nfds);

/*
 * Receive one datagram: the header into *hdr, the body into buf (at
 * least SBXP_MSG_MAX bytes, aligned for the body structs).  Checks
 * that it is complete (not truncated), at least a header, and that the
 * header's len matches what arrived.  Received descriptors (CLOEXEC) are
 * stored in fds (up to SBXP_RUN_FDS; more is a protocol error and all are
 * closed), their count in *ret_nfds.  Returns the body length (0 for an
 * empty body), -EPIPE on end of stream, -EAGAIN when nothing is waiting,
 * -SPD_EPROTO on a malformed datagram, or -errno.
 */
long sbxp_recv(int sock, void *buf, struct sbxp_hdr *hdr, int *fds,
	       size_t *ret_nfds);

#endif
