/*
 * sandboxd-init: a run's pid 1 once the run is set up (sandboxd/linux/init.h).
 *
 *   sandboxd-init PID
 *   sandboxd-init PID ready  (a spare's: says so on descriptor 3 first)
 *   sandboxd-init            (exits 0: sandboxd's probe that it runs)
 *
 * Executed by the child that set the run up, right after it started the
 * command PID; a spare's pid 1 executes it before its run, beside the
 * process that will set the run up and become the command PID, which
 * waits for the byte this writes on descriptor 3 once it holds nothing
 * (init.h, FD_READY).  It holds descriptor 4, the status pipe (and in a
 * run cloned anew descriptor 3, the report pipe, until it handles
 * SIGTERM: init.h, FD_REPORT), and nothing it does not need: it drops
 * every capability but CAP_KILL (drop_privileges) and sets no_new_privs
 * first, then reaps whatever the
 * pid namespace hands it until the command itself ends, writes that wait
 * status as one REC_STATUS record, and exits.  SIGTERM from sandboxd (spd
 * ending the run) it passes on to the command's process group
 * (catch_term).  The exit of a pid namespace's init kills
 * everything else in it, so nothing outlives the command.  The record
 * says whether init was alone by then (REC_STATUS_EMPTY): most commands
 * leave nothing behind, and sandboxd need not wait for init's own exit
 * to say the run is over.  Alone, init exits once sandboxd lets it
 * (init.h, INIT_LINGER_MS), so that the run's namespaces come down after
 * the answer rather than beside it.  The parent-death signal set before
 * the exec stays set (the exec changes no credentials): if sandboxd dies,
 * so does the run.
 *
 * Freestanding on purpose: no libc, no dynamic loader, a few pages of
 * text.  Its exec and its exit cost a small fraction of those of a libc
 * program, which is the point of it.  Built with -nostdlib -static.
 */
#include <asm/unistd.h>
#include <linux/capability.h>
#include <linux/poll.h>
#include <linux/prctl.h>
#include <linux/signal.h>
#include <linux/time_types.h>
#include <linux/wait.h>

#include "sandboxd/linux/init.h"

#ifndef EINTR
#define EINTR 4
#endif
#ifndef ECHILD
#define ECHILD 10
#endif

#if defined(__x86_64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

__asm__(".text\n"
	".global _start\n"
	"_start:\n"
	"	xor %rbp, %rbp\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call init_main\n"
	"	hlt\n");
#elif defined(__aarch64__)
static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

__asm__(".text\n"
	".global _start\n"
	"_start:\n"
	"	mov x29, #0\n"
	"	mov x0, sp\n"
	"	bl init_main\n"
	"	brk #0\n");
#else
#error "sandboxd-init: add this architecture's system call entry"
#endif

/* The signal trampoline: x86-64's kernel needs one (SA_RESTORER) to
 * return from a handler, and there is no libc to give it. */
#define INIT_STR_(x) #x
#define INIT_STR(x) INIT_STR_(x)
#if defined(__x86_64__)
__asm__(".text\n"
	"init_sigreturn:\n"
	"	mov $" INIT_STR(__NR_rt_sigreturn) ", %eax\n"
						   "	syscall\n"
						   "	hlt\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	"init_sigreturn:\n"
	"	mov x8, #" INIT_STR(__NR_rt_sigreturn) "\n"
						       "	svc 0\n"
						       "	brk #0\n");
#endif
void init_sigreturn(void);

#define sys1(n, a) sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d)                                                    \
	sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

__attribute__((noreturn)) static void die(int code)
{
	for (;;)
		sys1(__NR_exit_group, code);
}

/*
 * Drop every capability and never gain one again: init runs nothing, but
 * a process in the run could otherwise find a privileged one beside it.
 * As pid 1 of the run's own pid namespace it keeps CAP_KILL alone, if it
 * has it, to pass SIGTERM on to the command (forward_term): as root the
 * command has an unprivileged uid of its own, which init's uid may not
 * signal.  Every pid init can name is one of the run's, so the capability
 * reaches no process outside it.  Not as root, init has no capability
 * left after its exec and needs none (the command's uid is its own);
 * without a pid namespace of the run's own it keeps nothing (sandboxd
 * signals the run's process group itself).
 */
static int drop_privileges(int pid1)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {
	    {0, 0, 0}, {0, 0, 0}};
	unsigned int keep;

	if (sys2(__NR_capget, &hdr, data) < 0)
		return -1;
	keep = pid1 ? data[0].permitted & (1u << CAP_KILL) : 0;
	data[0].effective = data[0].permitted = keep;
	data[0].inheritable = 0;
	data[1].effective = data[1].permitted = data[1].inheritable = 0;
	if (sys6(__NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0) < 0 ||
	    sys2(__NR_capset, &hdr, data) < 0 ||
	    sys6(__NR_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0, 0) < 0)
		return -1;
	return 0;
}

/* Whether the run holds no process but init: init is pid 1 of the run's
 * own pid namespace, every process of which descends from it, and it has
 * no child left.  Leftovers that already ended are reaped on the way. */
static int run_empty(void)
{
	if (sys6(__NR_getpid, 0, 0, 0, 0, 0, 0) != 1)
		return 0;
	for (;;) {
		long w = sys4(__NR_wait4, -1, 0, __WALL | WNOHANG, 0);

		if (w > 0 || w == -EINTR)
			continue;
		return w == -ECHILD;
	}
}

/* An empty run's init: wait until sandboxd closes its end of the status
 * pipe, or INIT_LINGER_MS (init.h). */
static void linger(void)
{
	struct pollfd p = {FD_STATUS, 0, 0};
	struct __kernel_timespec ts = {INIT_LINGER_MS / 1000,
				       (INIT_LINGER_MS % 1000) * 1000000L};

	while (sys4(__NR_ppoll, &p, 1, &ts, 0) == -EINTR)
		;
}

/* The command's process group (its pid: it is a session leader), which
 * SIGTERM is passed on to; 0 until known. */
static volatile long term_group;

static void forward_term(int sig)
{
	(void)sig;
	if (term_group > 0)
		sys2(__NR_kill, -term_group, SIGTERM);
}

/*
 * SIGTERM from sandboxd (a run ended by spd, proto/sandbox.h, CANCEL) is
 * passed on to the command's process group, so that a program that
 * handles it can finish and exit before SIGKILL.  A pid namespace's init
 * is sent only the signals it handles: without this, SIGTERM would be
 * dropped.  The loops below retry what the handler interrupts.
 */
static int catch_term(long cmd)
{
	struct {
		void (*handler)(int);
		unsigned long flags;
		void (*restorer)(void);
		unsigned long mask;
	} sa = {forward_term, SA_RESTORER, init_sigreturn, 0};

	term_group = cmd;
	return (int)sys4(__NR_rt_sigaction, SIGTERM, &sa, 0, sizeof(sa.mask));
}

/* argv[2] is INIT_ARG_READY (no libc: no strcmp). */
static int is_ready_arg(const char *a)
{
	const char *r = INIT_ARG_READY;

	while (*a && *a == *r) {
		a++;
		r++;
	}
	return *a == 0 && *r == 0;
}

__attribute__((used, noreturn)) void init_main(long *sp);
__attribute__((used, noreturn)) void init_main(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	long cmd = 0;
	const char *p;

	/* Descriptors 0-2 are the run's: init needs none of them. */
	for (int fd = 0; fd <= 2; fd++)
		sys1(__NR_close, fd);
	/* Without an argument: sandboxd's probe that it can be executed. */
	if (argc == 1)
		die(0);
	if (argc != 2 && !(argc == 3 && is_ready_arg(argv[2])))
		die(CHILD_EXIT_REFUSED);
	for (p = argv[1]; *p >= '0' && *p <= '9' && cmd < (1L << 30); p++)
		cmd = cmd * 10 + (*p - '0');
	if (*p || cmd <= 0 ||
	    drop_privileges(sys6(__NR_getpid, 0, 0, 0, 0, 0, 0) == 1) < 0 ||
	    catch_term(cmd) < 0)
		die(CHILD_EXIT_REFUSED);
	if (argc == 3) {
		const char c = INIT_READY_BYTE;
		long n;

		do {
			n = sys3(__NR_write, FD_READY, &c, 1);
		} while (n == -EINTR);
		if (n != 1 || sys1(__NR_close, FD_READY) < 0)
			die(CHILD_EXIT_REFUSED);
	} else {
		/* A run cloned anew: the report pipe, whose end tells
		 * sandboxd the run has started, now that SIGTERM is handled
		 * (init.h, FD_REPORT). */
		sys1(__NR_close, FD_REPORT);
	}
	for (;;) {
		int st = 0;
		long w = sys4(__NR_wait4, -1, &st, __WALL, 0);

		if (w == cmd) {
			struct rec r = {REC_STATUS,
					run_empty() ? REC_STATUS_EMPTY : 0, 0,
					st};
			long n;

			do {
				n = sys3(__NR_write, FD_STATUS, &r, sizeof(r));
			} while (n == -EINTR);
			if (n == sizeof(r) && r.layer == REC_STATUS_EMPTY)
				linger();
			/* Returning kills every process left in the pid
			 * namespace: a daemonised child dies with its run. */
			die(0);
		}
		if (w < 0 && w != -EINTR)
			die(CHILD_EXIT_REFUSED);
	}
}
