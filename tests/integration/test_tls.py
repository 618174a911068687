"""TLS on --secure-listen as the apiserver configures it, checked with real clients.

- The default: TLS 1.2 and 1.3, forward-secret AEAD suites only. A TLS 1.1 client and a TLS 1.2
  client offering only a CBC suite are refused with the alert OpenSSL sends (protocol_version,
  handshake_failure); the apiserver refuses the same TLS 1.1 client.
- --tls-cipher-suites and --tls-min-version with the apiserver's names; an unknown name stops
  kube-fanout at start with the name in the message.
- The serving certificate replaced on disk: a new connection gets the new one, a connection
  made before keeps working; a bad new file leaves the last good certificate in place, with a
  log line and a metric.
- A loud warning for an upstream that is not verified or not encrypted.
- TLS 1.2 and 1.3 sessions with a client certificate resume (openssl s_client -sess_out, then
  -sess_in), as the apiserver's do, and the resumed connection is the same user;
  kube_fanout_tls_handshakes_total{resumed} counts the full and the resumed handshakes. A TLS
  1.3 ticket follows only the handshakes of clients that can resume with it (OpenSSL's do;
  client-go's, kubectl's, offer no resumption mode and get none, as from Go's server).
- A handshake that never comes is given up after 32 s, as the apiserver gives it up (both
  measured at once), counted, and logged as an overload episode (one that fails at once is not).
"""
import json
import selectors
import shutil
import socket
import ssl
import subprocess
import time

from kfrig import BINARY, Proxy, free_port, metric_values, scaled
from test_identity import issue_cert

OPENSSL = shutil.which("openssl")


def s_client(port, *args):
    """One handshake with `openssl s_client`; (negotiated protocol, cipher) or the error text."""
    out = subprocess.run(
        [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
         *args],
        input="", capture_output=True, text=True, timeout=scaled(20))
    text = out.stdout + out.stderr
    for line in text.splitlines():
        if line.startswith("New, ") and "Cipher is" in line:
            proto, cipher = line[len("New, "):].split(", Cipher is ")
            if cipher.strip() != "(NONE)":
                return proto.strip(), cipher.strip()
    return text


def refused_with(port, alert, *args):
    got = s_client(port, *args)
    assert isinstance(got, str), f"handshake {args} succeeded: {got}"
    assert alert in got, got


def served_cert(cluster, port):
    """The DER certificate a new TLS connection to `port` gets (verified against the CA)."""
    ctx = cluster.ssl_context()
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(10)) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def metrics(cluster, proxy):
    return cluster.request("GET", "/metrics", port=proxy.port, tls=False).body.decode()


def test_the_default_is_tls12_and_up_with_forward_secret_aead_suites(cluster, tmp_path):
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="])
    try:
        port = proxy.secure_port
        # TLS 1.1 (the client's security level lowered so that it offers it at all).
        refused_with(port, "alert protocol version", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        refused_with(cluster.port, "alert protocol version", "-tls1_1", "-cipher",
                     "DEFAULT@SECLEVEL=0")
        # TLS 1.2 without forward secrecy, and with a CBC suite: refused.
        refused_with(port, "alert handshake failure", "-tls1_2", "-cipher", "AES128-GCM-SHA256")
        refused_with(port, "alert handshake failure", "-tls1_2", "-cipher",
                     "ECDHE-ECDSA-AES128-SHA")
        # The AEAD suites the certificate (ECDSA) can use, and TLS 1.3.
        for cipher in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                       "ECDHE-ECDSA-CHACHA20-POLY1305"):
            assert s_client(port, "-tls1_2", "-cipher", cipher) == ("TLSv1.2", cipher)
        assert s_client(port, "-tls1_3")[0] == "TLSv1.3"
        # The API is served over it.
        got = cluster.request("GET", "/api/v1/namespaces/default", port=port)
        assert got.status == 200
    finally:
        assert proxy.stop() == 0


def test_cipher_suites_and_min_version_flags_take_the_apiservers_names(cluster, tmp_path):
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=",
        "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256"])
    try:
        port = proxy.secure_port
        assert s_client(port, "-tls1_2") == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
        refused_with(port, "alert handshake failure", "-tls1_2", "-cipher",
                     "ECDHE-ECDSA-AES128-GCM-SHA256")
        assert s_client(port, "-tls1_3")[0] == "TLSv1.3"
    finally:
        assert proxy.stop() == 0
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources=",
                                                       "--tls-min-version=VersionTLS13"])
    try:
        refused_with(proxy.secure_port, "alert protocol version", "-tls1_2")
        assert s_client(proxy.secure_port, "-tls1_3")[0] == "TLSv1.3"
    finally:
        assert proxy.stop() == 0


def test_an_unknown_suite_or_version_name_stops_kube_fanout_with_the_name(tmp_path):
    for flag, message in (
            ("--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,ECDHE-RSA-AES128-SHA",
             "cipher suite ECDHE-RSA-AES128-SHA not supported or doesn't exist"),
            ("--tls-min-version=TLS1.3", 'unknown tls version "TLS1.3"')):
        out = subprocess.run([str(BINARY), f"--listen=127.0.0.1:{free_port()}",
                              "--upstream=https://127.0.0.1:1", flag],
                             capture_output=True, text=True, timeout=scaled(10))
        assert out.returncode == 2, out.stderr
        assert message in out.stderr, out.stderr


def test_a_replaced_certificate_is_served_to_new_connections(cluster, tmp_path):
    proxy = Proxy.start(cluster, tmp_path, extra_args=["--cache-resources="])
    try:
        port = proxy.secure_port
        crt, key = tmp_path / "tls.crt", tmp_path / "tls.key"
        first = served_cert(cluster, port)
        assert first == ssl.PEM_cert_to_DER_cert(crt.read_text())
        kept = cluster.connection(port)  # Made before the change, kept alive across it.
        kept.request("GET", "/version", headers={"Authorization":
                                                 f"Bearer {cluster.token('admin')}"})
        assert kept.getresponse().read() and kept.sock is not None

        # A new pair from the same CA, written over the old files.
        new_dir = tmp_path / "new"
        new_dir.mkdir()
        new_crt, new_key = cluster.issue_serving_cert(new_dir)
        shutil.copy(new_key, key)
        shutil.copy(new_crt, crt)
        second = ssl.PEM_cert_to_DER_cert(new_crt.read_text())
        assert second != first
        deadline = time.monotonic() + scaled(10)
        while served_cert(cluster, port) != second:
            assert time.monotonic() < deadline, "the new certificate was not served"
            time.sleep(0.2)
        kept.request("GET", "/version", headers={"Authorization":
                                                 f"Bearer {cluster.token('admin')}"})
        assert kept.getresponse().status == 200
        kept.close()
        m = metrics(cluster, proxy)
        assert metric_values(m, "kube_fanout_serving_certificate_reloads_total") == {
            '{result="success"}': 1.0, '{result="failure"}': 0.0}

        # A broken certificate file: refused, the last good one still served.
        crt.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
        deadline = time.monotonic() + scaled(10)
        while not any("serving certificate rejected" in line for line in proxy.log_lines()):
            assert time.monotonic() < deadline, f"no rejection logged:\n{proxy.log_tail()}"
            time.sleep(0.2)
        assert served_cert(cluster, port) == second
        assert cluster.request("GET", "/version", port=port).status == 200
        m = metrics(cluster, proxy)
        assert metric_values(m, "kube_fanout_serving_certificate_reloads_total") == {
            '{result="success"}': 1.0, '{result="failure"}': 1.0}
        expiry = metric_values(m, "kube_fanout_serving_certificate_expiration_timestamp_seconds")
        assert time.time() < expiry[""] < time.time() + 3 * 86400  # issue_serving_cert: 2 days
    finally:
        assert proxy.stop() == 0


def test_an_unverified_or_plain_http_upstream_is_warned_about_loudly(cluster, tmp_path):
    token = tmp_path / "token"
    token.write_text(cluster.token("admin"))
    for name, upstream_args, warning in (
            ("unverified", [f"--upstream={cluster.url}", "--upstream-insecure-skip-tls-verify",
                            f"--upstream-token-file={token}"],
             "its certificate is not verified (insecure-skip-tls-verify)"),
            ("plain", [f"--upstream=http://127.0.0.1:{free_port()}",
                       f"--upstream-token-file={token}"],
             "plain HTTP; clients' bearer tokens"),
            ("verified", None, None)):
        directory = tmp_path / name
        directory.mkdir()
        proxy = Proxy.start(cluster, directory, extra_args=["--cache-resources="],
                            upstream_args=upstream_args)
        try:
            warnings = [line for line in proxy.log_lines()
                        if '"level":"warning"' in line and "INSECURE UPSTREAM" in line]
            if warning is None:
                assert warnings == []
            else:
                assert len(warnings) == 1 and warning in warnings[0], proxy.log_tail()
        finally:
            assert proxy.stop() == 0


def _review_through_s_client(port, cert, key, ca, version, sess_flag, sess_file):
    """A SelfSubjectReview over one `openssl s_client` connection: (reused, username)."""
    body = '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}'
    request = ("POST /apis/authentication.k8s.io/v1/selfsubjectreviews HTTP/1.1\r\n"
               "Host: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}")
    out = subprocess.run(
        [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
         "-cert", cert, "-key", key, "-CAfile", ca, version, sess_flag, sess_file, "-ign_eof",
         "-alpn", "http/1.1"],
        input=request, capture_output=True, text=True, timeout=scaled(20))
    text = out.stdout + out.stderr
    lines = [line for line in text.splitlines() if line.startswith(("New, ", "Reused, "))]
    assert lines, text
    start = out.stdout.find('{"kind":"SelfSubjectReview"')
    assert start >= 0, text
    review, _ = json.JSONDecoder().raw_decode(out.stdout[start:])
    return lines[0].startswith("Reused, "), review["status"]["userInfo"]["username"]


def test_a_client_certificate_session_resumes_and_is_still_that_user(cluster, tmp_path):
    """TLS 1.2 and 1.3 resumption with a client certificate, as the apiserver resumes: before,
    the resumed handshake failed with an internal_error alert once --client-ca-file was set."""
    env = cluster.env
    cert, key = issue_cert(cluster, "kf-resume", "kf-resume-user")
    proxy = Proxy.start(cluster, tmp_path, extra_args=[
        "--cache-resources=", f"--client-ca-file={env['KF_CA_FILE']}",
        f"--proxy-client-cert-file={env['KF_FRONT_PROXY_CLIENT_CERT']}",
        f"--proxy-client-key-file={env['KF_FRONT_PROXY_CLIENT_KEY']}"])
    try:
        for version in ("-tls1_2", "-tls1_3"):
            for name, port in (("apiserver", cluster.port), ("kube-fanout", proxy.secure_port)):
                session = tmp_path / f"{name}{version}.pem"
                first = _review_through_s_client(port, cert, key, env["KF_CA_FILE"], version,
                                                 "-sess_out", str(session))
                assert session.stat().st_size > 0
                again = _review_through_s_client(port, cert, key, env["KF_CA_FILE"], version,
                                                 "-sess_in", str(session))
                print(f"{name} {version}: {first} then {again}")
                assert first == (False, "kf-resume-user"), (name, version)
                assert again == (True, "kf-resume-user"), (name, version)
        # Two full handshakes and two resumed ones, counted as such.
        handshakes = metric_values(metrics(cluster, proxy), "kube_fanout_tls_handshakes_total")
        assert handshakes == {'{resumed="false"}': 2, '{resumed="true"}': 2}, handshakes
        # A ticket after each TLS 1.3 handshake of a client that can resume (OpenSSL's offers
        # psk_dhe_ke): the full one and the resumed one.
        tickets = metric_values(metrics(cluster, proxy), "kube_fanout_tls_session_tickets_total")
        assert tickets == {"": 2}, tickets
        # client-go (kubectl) offers no resumption mode: its handshake makes no ticket, as
        # Go's server (the apiserver) sends it none.
        cluster.kubectl("get", "--raw", "/version", server=proxy.server)
        after = metric_values(metrics(cluster, proxy), "kube_fanout_tls_handshakes_total")
        assert after['{resumed="false"}'] >= 3, after
        tickets = metric_values(metrics(cluster, proxy), "kube_fanout_tls_session_tickets_total")
        assert tickets == {"": 2}, tickets
    finally:
        assert proxy.stop() == 0


def test_a_handshake_that_never_comes_is_given_32s_as_by_the_apiserver_and_logged(cluster,
                                                                                  tmp_path):
    """A client that connects to --secure-listen and sends no ClientHello, and another that
    connects to the apiserver at the same moment: each server gives up its handshake after 32 s
    (Go's server in the apiserver: its ReadHeaderTimeout), kube-fanout within 2 s of the
    apiserver; it counts it in kube_fanout_tls_handshake_timeouts_total (and as a refused
    tls_handshake), and the log's overload warning counts it. A handshake that fails at once (a
    client that closes: a TCP probe) is counted as refused, and is no overload."""
    from test_identity import STORM_CAUSES, overload_line

    proxy = Proxy.start(cluster, tmp_path)

    def counts():
        text = metrics(cluster, proxy)
        return (metric_values(text, "kube_fanout_tls_handshake_timeouts_total").get(""),
                metric_values(text, "kube_fanout_requests_refused_total").get(
                    '{reason="tls_handshake"}'))

    def closed_at(socks, t0, limit):
        """Seconds from t0 until the server closed each of `socks` (the end of the stream or a
        reset; nothing else may come), watched together."""
        when = {}
        with selectors.DefaultSelector() as sel:
            for i, sock in enumerate(socks):
                sel.register(sock, selectors.EVENT_READ, i)
            while len(when) < len(socks):
                assert time.monotonic() - t0 < limit, when
                for key, _ in sel.select(timeout=1):
                    try:
                        data = key.fileobj.recv(1)
                    except ConnectionResetError:
                        data = b""
                    assert data == b"", data
                    when[key.data] = time.monotonic() - t0
                    sel.unregister(key.fileobj)
        return [when[i] for i in range(len(socks))]

    try:
        assert counts() == (0, 0)
        socket.create_connection(("127.0.0.1", proxy.secure_port), timeout=5).close()
        deadline = time.monotonic() + scaled(10)
        while counts() != (0, 1):
            assert time.monotonic() < deadline, counts()
            time.sleep(0.05)

        silent = socket.create_connection(("127.0.0.1", proxy.secure_port), timeout=5)
        silent_direct = socket.create_connection(("127.0.0.1", cluster.port), timeout=5)
        t0 = time.monotonic()
        time.sleep(12)
        # Still open past client-go's own 10 s: nothing counted, no episode (the failed
        # handshake, over 12 s ago, began none).
        assert not [l for l in proxy.log_lines() if '"msg":"overload ' in l]
        assert counts() == (0, 1)
        ours_s, direct_s = closed_at([silent, silent_direct], t0, scaled(45))
        silent.close()
        silent_direct.close()
        assert 31 <= direct_s <= 36, direct_s
        assert abs(ours_s - direct_s) <= 2, (ours_s, direct_s)
        deadline = time.monotonic() + scaled(5)
        while counts() != (1, 2):
            assert time.monotonic() < deadline, counts()
            time.sleep(0.1)
        began = overload_line(proxy, "began", 1)
        assert began["tls_handshake_timeout"] == 1, began
        assert all(began[c] == 0 for c in STORM_CAUSES if c != "tls_handshake_timeout"), began
    finally:
        assert proxy.stop() == 0
