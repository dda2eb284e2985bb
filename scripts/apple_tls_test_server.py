#!/usr/bin/env python3
"""A throw-away HTTPS server for the Apple client TLS tests.

Usage: apple_tls_test_server.py DIR
Creates in DIR a test CA (ca.pem) and a server certificate for IP 127.0.0.1 only (server.pem, server.key),
listens on 127.0.0.1 on a free port, and prints "ready PORT" once it accepts connections. Every GET or POST is
answered 200 with the body "tls ok". Runs until stdin closes or it is killed.
"""
import http.server
import os
import ssl
import subprocess
import sys
import threading


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certificates(directory):
    ca_key, ca_pem = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.pem")
    key, csr, pem = (os.path.join(directory, name) for name in ("server.key", "server.csr", "server.pem"))
    ext = os.path.join(directory, "server.ext")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", ca_key, "-out", ca_pem, "-days", "2", "-subj", "/CN=verify-worker test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    with open(ext, "w") as handle:
        handle.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial",
        "-out", pem, "-days", "2", "-extfile", ext)
    return pem, key


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"tls ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = answer
    do_POST = answer

    def log_message(self, *args):
        pass


def main():
    directory = sys.argv[1]
    certificate, key = make_certificates(directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    context.set_alpn_protocols(["http/1.1"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready %d" % server.server_address[1], flush=True)
    sys.stdin.read()  # until the test closes our stdin or kills us
    server.shutdown()


if __name__ == "__main__":
    main()
