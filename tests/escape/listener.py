# The host side of the network attacks: listens on 127.0.0.1 (TCP and UDP),
# on a pathname stream and datagram Unix socket and on an abstract one, and
# appends a line to LOG for every connection or datagram it ever sees.
#   listener.py LOG PORTFILE STREAM_PATH DGRAM_PATH ABSTRACT_NAME
import os, select, socket, sys

log, portfile, spath, dpath, aname = sys.argv[1:6]
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("127.0.0.1", 0)); tcp.listen(16)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
us = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
us.bind(spath); us.listen(16); os.chmod(spath, 0o777)
ud = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
ud.bind(dpath); os.chmod(dpath, 0o777)
ua = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ua.bind("\0" + aname); ua.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write("%d %d\n" % (tcp.getsockname()[1], udp.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
kinds = {tcp: "tcp", udp: "udp", us: "unix", ud: "unixdgram", ua: "abstract"}
while True:
    for s in select.select(list(kinds), [], [])[0]:
        if s.type == socket.SOCK_DGRAM:
            s.recv(4096)
        else:
            c, _ = s.accept(); c.close()
        with open(log, "a") as f:
            f.write(kinds[s] + "\n")
