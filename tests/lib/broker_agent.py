#!/usr/bin/env python3
"""A tiny coding agent for the spctl agent tests (standard library only).

Run under `spctl agent`, it does what an agent CLI does with the broker:
one Anthropic-shaped call to $ANTHROPIC_BASE_URL with $ANTHROPIC_API_KEY,
then writes the model's reply into agent-out.txt in its working directory
(the session's worktree) and a note into $HOME.  It also reports, one
"probe NAME: RESULT" line each, what else of the network it could reach:
the ports given as arguments on 127.0.0.1, a port of its own (bind), and
IPv6.  Its whole environment's values are printed so that the test can
check no real key is among them.
"""
import base64
import json
import os
import socket
import sys
import urllib.error
import urllib.request


def probe(name, fn):
    try:
        fn()
        print("probe %s: reached" % name, flush=True)
    except OSError as e:
        print("probe %s: refused (%s)" % (name, e.__class__.__name__),
              flush=True)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.close()


def bind_own():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 9999))
    s.listen(1)
    s.close()


def inet6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.close()


def main():
    base = os.environ["ANTHROPIC_BASE_URL"]
    key = os.environ["ANTHROPIC_API_KEY"]
    print("env:", json.dumps(sorted(os.environ.items())), flush=True)
    # The turn key spd minted, as it is and base64-encoded: spd redacts
    # both in what the run prints (its set of minted values).
    print("turn key:", key, flush=True)
    print("turn key b64:", base64.b64encode(key.encode()).decode(),
          flush=True)
    body = json.dumps({"model": "test-model", "max_tokens": 50,
                       "messages": [{"role": "user",
                                     "content": "write the file"}]})
    req = urllib.request.Request(
        base + "/v1/messages", data=body.encode(), method="POST",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01",
                 "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as r:
        reply = json.load(r)
    text = reply["content"][0]["text"]
    with open("agent-out.txt", "w") as f:
        f.write(text + "\n")
    with open(os.path.join(os.environ["HOME"], "agent-note"), "w") as f:
        f.write("remembered\n")
    # A key that is not this run's (another session's turn, left in the
    # worktree): the broker's port here must refuse it.
    if os.path.exists("foreign-key.txt"):
        with open("foreign-key.txt") as f:
            other = f.read().strip()
        req = urllib.request.Request(
            base + "/v1/messages", data=body.encode(), method="POST",
            headers={"x-api-key": other, "content-type": "application/json",
                     "anthropic-version": "2023-06-01"})
        try:
            urllib.request.urlopen(req, timeout=20)
            print("probe foreign key: accepted", flush=True)
        except urllib.error.HTTPError as e:
            print("probe foreign key: %d" % e.code, flush=True)
    for p in sys.argv[1:]:
        probe("port %s" % p, lambda: connect(int(p)))
    probe("bind", bind_own)
    probe("inet6", inet6)
    print("reply:", text, flush=True)


if __name__ == "__main__":
    sys.exit(main())
