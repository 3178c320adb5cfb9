# ptyrun.py CMD...: run CMD as a session leader with a fresh pty as its
# controlling terminal and stdio, the way an operator's shell runs spctl.
# Prints everything that reached the terminal: what was written to it and,
# afterwards, any input still queued on it (where TIOCSTI would put text).
import fcntl, os, pty, select, sys, termios, time

m, s = pty.openpty()
pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
    for fd in (0, 1, 2):
        os.dup2(s, fd)
    os.close(m)
    os.execvp(sys.argv[1], sys.argv[1:])
data = b""
deadline = time.time() + 60
status = None
while time.time() < deadline:
    r = select.select([m], [], [], 0.1)[0]
    if r:
        try:
            data += os.read(m, 65536)
        except OSError:
            pass
    if status is None:
        w, st = os.waitpid(pid, os.WNOHANG)
        if w:
            status = st
    if status is not None and not r:
        break
attrs = termios.tcgetattr(s)
attrs[3] &= ~termios.ICANON
attrs[6][termios.VMIN] = 0
attrs[6][termios.VTIME] = 0
termios.tcsetattr(s, termios.TCSANOW, attrs)
fcntl.fcntl(s, fcntl.F_SETFL, os.O_NONBLOCK)
pending = b""
try:
    pending = os.read(s, 65536)
except OSError:
    pass
sys.stdout.write("TERMINAL-OUTPUT:\n" + data.decode("utf-8", "replace") +
                 "\nQUEUED-INPUT:\n" + pending.decode("utf-8", "replace") + "\n")
