#!/usr/bin/env python3
"""An npm registry stand-in on 127.0.0.2 for tests/integration/test_proxy.c.

usage: npm_registry_standin.py WORKSPACE HOST

Builds a one-file package (spd-tiny 1.0.0) and its tarball at start,
serves its packument at /spd-tiny and the tarball under /spd-tiny/-/,
and writes into WORKSPACE a package.json, a package-lock.json pinning
the tarball at http://HOST:PORT/ with its sha512 integrity, and an .npmrc
naming that registry (cache in the workspace, no audit, no retries).
Prints the port once the files are written; /seen lists the paths
requested so far.
"""
import base64
import hashlib
import http.server
import io
import json
import os
import sys
import tarfile

NAME, VERSION = "spd-tiny", "1.0.0"


def tarball():
    buf = io.BytesIO()
    files = (
        ("package/package.json",
         json.dumps({"name": NAME, "version": VERSION,
                     "main": "index.js"}).encode()),
        ("package/index.js", b"module.exports = 'spd-tiny works';\n"),
    )
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


ws, host = sys.argv[1], sys.argv[2]
TGZ = tarball()
INTEGRITY = "sha512-" + base64.b64encode(hashlib.sha512(TGZ).digest()).decode()
seen = []
pages = {}


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/seen":
            body, ctype = ("seen:" + " ".join(seen) + "\n").encode(), "text/plain"
        else:
            seen.append(self.path)
            body, ctype = pages.get(self.path, (None, None))
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


http.server.ThreadingHTTPServer.request_queue_size = 128
srv = http.server.ThreadingHTTPServer(("127.0.0.2", 0), H)
port = srv.server_address[1]
base = "http://%s:%d" % (host, port)
tgz_path = "/%s/-/%s-%s.tgz" % (NAME, NAME, VERSION)
dist = {"tarball": base + tgz_path, "integrity": INTEGRITY,
        "shasum": hashlib.sha1(TGZ).hexdigest()}
pages[tgz_path] = (TGZ, "application/octet-stream")
pages["/" + NAME] = (json.dumps({
    "name": NAME, "dist-tags": {"latest": VERSION},
    "versions": {VERSION: {"name": NAME, "version": VERSION, "dist": dist}},
}).encode(), "application/json")

with open(os.path.join(ws, "package.json"), "w") as f:
    json.dump({"name": "spd-npm-test", "version": "0.0.0", "private": True,
               "dependencies": {NAME: VERSION}}, f)
with open(os.path.join(ws, "package-lock.json"), "w") as f:
    json.dump({
        "name": "spd-npm-test", "version": "0.0.0", "lockfileVersion": 3,
        "requires": True,
        "packages": {
            "": {"name": "spd-npm-test", "version": "0.0.0",
                 "dependencies": {NAME: VERSION}},
            "node_modules/" + NAME: {"version": VERSION,
                                     "resolved": base + tgz_path,
                                     "integrity": INTEGRITY},
        },
    }, f)
with open(os.path.join(ws, ".npmrc"), "w") as f:
    f.write("registry=%s/\ncache=%s/.npm-cache\naudit=false\nfund=false\n"
            "update-notifier=false\nfetch-retries=0\n" % (base, ws))
sys.stdout.write("%d\n" % port)
sys.stdout.flush()
srv.serve_forever()
