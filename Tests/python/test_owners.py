"""Owners, end to end through `--auth jwt`: real JSON Web Tokens (PyJWT, signed with RS256,
ES256, EdDSA and HS256 keys made for each run), a real server, its real SQLite store.

Without a valid token every route on /reactors answers 401 and nothing is created or changed;
another subject's session answers 404 exactly as an unknown id, on every route, the stream
included; keys rotate through the JWKS file without a restart; a session stays its creator's
across kill -9; the admin routes are an admin's; a subject past its limit gets 429; the query
token is never logged.
"""

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

AUDIENCE = "reactor-tests"
ISSUER = "https://issuer.test"
UNKNOWN_ID = "AAAAAAAAAAAAAAAAAAAAAA"


class Keys:
    """Signing keys of each kind, and the JWKS file and HS256 secret file the server reads."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.ed = ed25519.Ed25519PrivateKey.generate()
        self.secret = os.urandom(32).hex()
        self.secret_file = directory / "secret"
        self.secret_file.write_text(self.secret + "\n")
        self.jwks_file = directory / "jwks.json"
        self.admin_token = "admin-" + os.urandom(16).hex()
        self.admin_token_file = directory / "admin-token"
        self.admin_token_file.write_text(self.admin_token + "\n")
        self.write_jwks({"r1": self.rsa, "e1": self.ec, "d1": self.ed})

    def write_jwks(self, keys: dict) -> None:
        """Replaces the JWKS file at once (a rename), as a key rotation does."""
        partial = self.jwks_file.with_suffix(".partial")
        partial.write_text(self.jwks_json(keys))
        os.replace(partial, self.jwks_file)

    @staticmethod
    def jwks_json(keys: dict) -> str:
        """The JWKS of the public halves of `keys` (by kid)."""
        entries = []
        for kid, key in keys.items():
            public = key.public_key()
            if isinstance(key, rsa.RSAPrivateKey):
                entry, alg = RSAAlgorithm.to_jwk(public, as_dict=True), "RS256"
            elif isinstance(key, ec.EllipticCurvePrivateKey):
                entry, alg = ECAlgorithm.to_jwk(public, as_dict=True), "ES256"
            else:
                entry, alg = OKPAlgorithm.to_jwk(public, as_dict=True), "EdDSA"
            entries.append({**entry, "kid": kid, "alg": alg, "use": "sig"})
        return json.dumps({"keys": entries})

    def token(self, subject: str | None = "alice", kid: str | None = "r1", key=None, alg: str | None = None,
              lifetime: float = 300, audience: str | None = AUDIENCE, issuer: str | None = ISSUER,
              not_before: float | None = None) -> str:
        now = time.time()
        claims = {"exp": int(now + lifetime), "iat": int(now)}
        if subject is not None:
            claims["sub"] = subject
        if audience is not None:
            claims["aud"] = audience
        if issuer is not None:
            claims["iss"] = issuer
        if not_before is not None:
            claims["nbf"] = int(now + not_before)
        if key is None:
            key, alg = {"r1": (self.rsa, "RS256"), "e1": (self.ec, "ES256"), "d1": (self.ed, "EdDSA"),
                        None: (self.secret.encode(), "HS256")}[kid]
        headers = {"kid": kid} if kid is not None else {}
        return jwt.encode(claims, key, algorithm=alg, headers=headers)


def first_state(stream) -> dict:
    """The state of a stream's first event; the stream is closed."""
    try:
        assert stream.status == 200, (stream.status, getattr(stream, "body", b""))
        return stream.states_until(lambda state: True)[0].json()
    finally:
        stream.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def keys(tmp_path) -> Keys:
    return Keys(tmp_path)


def start_jwt_server(start_server, keys: Keys, *args: str, store: str | None = None,
                     env: dict[str, str] | None = None):
    return start_server(
        "--auth", "jwt", "--jwks-file", str(keys.jwks_file), "--jwt-secret-file", str(keys.secret_file),
        "--jwt-audience", AUDIENCE, "--jwt-issuer", ISSUER, "--jwt-leeway-s", "5",
        "--admin-subject", "root", "--admin-token-file", str(keys.admin_token_file), *args, store=store, env=env)


def stored_sessions(server) -> list[tuple]:
    """The sessions' rows as the store file holds them: (id, version, subject)."""
    path = server.store.removeprefix("sqlite:")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as database:
        return sorted(database.execute("SELECT id, version, subject FROM sessions"))


def test_every_algorithm_is_accepted_and_refused_tokens_create_and_change_nothing(start_server, keys):
    server = start_jwt_server(start_server, keys)
    for kid in ["r1", "e1", "d1", None]:
        reply = server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(keys.token(kid=kid)))
        assert reply.status == 201, (kid, reply)
    session = server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(keys.token())).json()
    assert server.request("POST", f"/reactors/{session['id']}/actions?wait=true", '"increase"',
                          headers=bearer(keys.token())).status == 200
    before = stored_sessions(server)
    assert len(before) == 5 and all(subject == "alice" for _, _, subject in before)

    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "none": {},
        "malformed": {"Authorization": "Bearer not a token"},
        "not a JWT": bearer("abc.def.ghi"),
        "bad signature": bearer(keys.token(key=stranger, alg="RS256")),
        "expired": bearer(keys.token(lifetime=-60)),
        "not yet valid": bearer(keys.token(not_before=600)),
        "other audience": bearer(keys.token(audience="someone-else")),
        "no audience": bearer(keys.token(audience=None)),
        "other issuer": bearer(keys.token(issuer="https://elsewhere.test")),
        "unknown key": bearer(keys.token(kid="gone", key=keys.rsa, alg="RS256")),
        "algorithm swapped": bearer(keys.token(kid="r1", key=keys.secret.encode(), alg="HS256")),
        "unsigned": bearer(jwt.encode({"sub": "alice", "exp": int(time.time()) + 300, "aud": AUDIENCE,
                                       "iss": ISSUER}, None, algorithm="none")),
        "no subject": bearer(keys.token(subject=None)),
    }
    for name, headers in refused.items():
        for method, path, body in [("POST", "/reactors", {"type": "counter"}),
                                   ("POST", f"/reactors/{session['id']}/actions", '"increase"'),
                                   ("GET", f"/reactors/{session['id']}", None),
                                   ("GET", f"/reactors/{session['id']}/events", None),
                                   ("DELETE", f"/reactors/{session['id']}", None)]:
            reply = server.request(method, path, body, headers=headers)
            assert reply.status == 401, (name, method, path, reply)
            assert reply.header("Content-Type") == "application/problem+json"
            assert reply.json()["type"] == "urn:reactor-server:problem:unauthenticated"
            assert reply.header("WWW-Authenticate").startswith('Bearer realm="reactor-server"'), reply
    assert stored_sessions(server) == before


def test_another_subjects_session_is_404_on_every_route_as_an_unknown_id(start_server, keys):
    server = start_jwt_server(start_server, keys)
    alice, bob = bearer(keys.token("alice")), bearer(keys.token("bob", kid="e1"))
    session = server.request("POST", "/reactors", {"type": "counter"}, headers=alice).json()
    instance = session["id"]
    assert server.request("POST", f"/reactors/{instance}/actions?wait=true", '"increase"', headers=alice).status == 200
    before = stored_sessions(server)
    for method, suffix, body, extra in [
        ("GET", "", None, {}), ("POST", "/actions", '"increase"', {}),
        ("POST", "/actions?wait=true", '"increase"', {"Idempotency-Key": "k1"}),
        ("GET", "/events", None, {"Last-Event-ID": "0"}), ("GET", "/events?format=patch", None, {}),
        ("DELETE", "", None, {}),
    ]:
        theirs = server.request(method, f"/reactors/{instance}{suffix}", body, headers={**bob, **extra})
        nobodys = server.request(method, f"/reactors/{UNKNOWN_ID}{suffix}", body, headers={**bob, **extra})
        assert theirs.status == 404, (method, suffix, theirs)
        assert theirs.body.replace(instance.encode(), UNKNOWN_ID.encode()) == nobodys.body
        assert theirs.header("Content-Type") == nobodys.header("Content-Type")
    # Alice's session is as she left it, in memory and on disk; her stream works.
    state = server.request("GET", f"/reactors/{instance}", headers=alice).json()
    assert state["state"]["value"] == 1
    assert stored_sessions(server) == before
    assert first_state(server.events(instance, headers=alice))["value"] == 1


def test_a_stream_ends_when_its_token_expires_and_one_with_a_later_token_goes_on(start_server, keys):
    server = start_server(
        "--auth", "jwt", "--jwks-file", str(keys.jwks_file), "--jwt-audience", AUDIENCE, "--jwt-issuer", ISSUER,
        "--jwt-leeway-s", "0", "--heartbeat-s", "1")
    lasting = bearer(keys.token("alice"))
    instance = server.request("POST", "/reactors", {"type": "counter"}, headers=lasting).json()["id"]
    brief = server.events(instance, headers=bearer(keys.token("alice", lifetime=2)))
    going_on = server.events(instance, headers=lasting)
    try:
        assert brief.status == 200 and going_on.status == 200
        seen, deadline = [], time.monotonic() + 15
        while (event := brief.next(timeout=15, include_comments=True)) is not None:
            seen.append(event)
            assert time.monotonic() < deadline, f"the stream went on past its token's expiry: {seen[-3:]}"
        # Ended as a dropped connection ends, saying why in a comment; no `event: end`, which
        # would tell the client the instance is gone.
        assert seen[-1].event == "comment" and "credentials this stream was opened with have expired" in seen[-1].comment, seen
        assert "end" not in [event.event for event in seen]
        # The stream opened with a token that has not expired goes on.
        assert server.request("POST", f"/reactors/{instance}/actions", '"increase"', headers=lasting).status == 202
        going_on.states_until(lambda state: state["value"] == 1)
    finally:
        brief.close()
        going_on.close()


def test_keys_rotate_through_the_jwks_file_without_a_restart(start_server, keys):
    server = start_jwt_server(start_server, keys)
    old = keys.token(kid="r1")
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(old)).status == 201
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    new = keys.token(kid="r2", key=rotated, alg="RS256")
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(new)).status == 401
    pid = server.process.pid
    keys.write_jwks({"r2": rotated, "e1": keys.ec})
    deadline = time.monotonic() + 15
    while server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(new)).status != 201:
        assert time.monotonic() < deadline, "the new key was not taken up"
        time.sleep(0.1)
    refused = server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(old))
    assert refused.status == 401
    assert "kid" in refused.json()["detail"]
    assert server.process.pid == pid and server.process.poll() is None
    assert "token keys read again" in server.stderr()
    # A broken file is refused, and the keys in use stay.
    keys.jwks_file.write_text("{not json")
    deadline = time.monotonic() + 15
    while "token keys not read again" not in server.stderr():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(new)).status == 201


def test_sighup_reads_the_keys_again(start_server, keys):
    """A key file rewritten in place with its size and times kept: only SIGHUP tells."""
    server = start_jwt_server(start_server, keys)
    replacement = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    new = keys.token(kid="r1", key=replacement, alg="RS256")
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(new)).status == 401
    before = os.stat(keys.jwks_file)
    rewritten = keys.jwks_json({"r1": replacement, "e1": keys.ec, "d1": keys.ed})
    assert len(rewritten.encode()) == before.st_size
    with open(keys.jwks_file, "r+") as file:
        file.write(rewritten)
    os.utime(keys.jwks_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(keys.jwks_file)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    # Longer than the server's look at the files: it saw no change.
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(new)).status == 401
        time.sleep(0.25)
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 15
    while server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(new)).status != 201:
        assert time.monotonic() < deadline, "SIGHUP did not read the keys again"
        time.sleep(0.1)
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(keys.token())).status == 401
    assert server.process.poll() is None


def test_a_session_stays_its_creators_across_kill_9(start_server, keys, tmp_path):
    store = f"sqlite:{tmp_path / 'sessions.sqlite'}"
    first = start_jwt_server(start_server, keys, store=store)
    alice, bob = bearer(keys.token("alice")), bearer(keys.token("bob"))
    instance = first.request("POST", "/reactors", {"type": "counter"}, headers=alice).json()["id"]
    assert first.request("POST", f"/reactors/{instance}/actions", '"increase"', headers=alice).status == 202
    first.signal(signal.SIGKILL)
    first.wait(10)
    second = start_jwt_server(start_server, keys, store=store)
    assert second.request("GET", f"/reactors/{instance}", headers=bob).status == 404
    reply = second.request("POST", f"/reactors/{instance}/actions?wait=true", '"increase"', headers=alice)
    assert reply.status == 200, reply
    assert reply.json()["state"]["value"] == 2
    assert [(subject) for id_, _, subject in stored_sessions(second) if id_ == instance] == ["alice"]


def test_admin_routes_are_an_admins_and_health_stays_open(start_server, keys):
    server = start_jwt_server(start_server, keys)
    instance = server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(keys.token())).json()["id"]
    for path in ["/metrics", f"/reactors/{instance}/history"]:
        assert server.request("GET", path).status == 401, path
        forbidden = server.request("GET", path, headers=bearer(keys.token("alice")))
        assert forbidden.status == 403, path
        assert forbidden.json()["type"] == "urn:reactor-server:problem:forbidden"
        assert server.request("GET", path, headers=bearer(keys.token("root"))).status == 200, path
        assert server.request("GET", path, headers=bearer(keys.admin_token)).status == 200, path
    # Prometheus scrapes with the admin token.
    assert b"reactor_instances" in server.request("GET", "/metrics", headers=bearer(keys.admin_token)).body
    for path in ["/healthz", "/readyz", "/types", "/", "/inspector"]:
        assert server.request("GET", path).status == 200, path
    # An admin reaches any session.
    assert server.request("GET", f"/reactors/{instance}", headers=bearer(keys.token("root"))).status == 200


def test_a_subject_past_its_limit_gets_429(start_server, keys):
    server = start_jwt_server(start_server, keys, "--max-instances-per-subject", "2")
    alice = bearer(keys.token("alice"))
    made = [server.request("POST", "/reactors", {"type": "counter"}, headers=alice) for _ in range(2)]
    assert [reply.status for reply in made] == [201, 201]
    refused = server.request("POST", "/reactors", {"type": "counter"}, headers=alice)
    assert refused.status == 429
    assert refused.json()["type"] == "urn:reactor-server:problem:too-many-instances-for-subject"
    assert int(refused.header("Retry-After")) > 0
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(keys.token("bob"))).status == 201
    assert server.request("DELETE", f"/reactors/{made[0].json()['id']}", headers=alice).status == 204
    assert server.request("POST", "/reactors", {"type": "counter"}, headers=alice).status == 201


def test_a_cookie_or_the_query_carry_the_token_and_the_query_is_never_logged(start_server, keys):
    server = start_jwt_server(start_server, keys, "--auth-cookie", "reactor_token", "--auth-query-token",
                              "--log-level", "trace", "--log-format", "json")
    token = keys.token("alice")
    bad = keys.token("alice", lifetime=-60)
    instance = server.request("POST", "/reactors", {"type": "counter"},
                              headers={"Cookie": f"theme=dark; reactor_token={token}"}).json()["id"]
    assert first_state(server.events(instance, query=f"?access_token={token}"))["value"] == 0
    assert first_state(server.events(instance, headers={"Cookie": f"reactor_token={token}"}))["value"] == 0
    assert server.request("GET", f"/reactors/{instance}?access_token={bad}").status == 401
    assert server.request("GET", f"/reactors/{UNKNOWN_ID}?access_token={token}").status == 404
    assert server.request("GET", f"/nowhere?access_token={token}").status == 404
    server.stop()
    logs = server.stderr()
    assert '"request"' in logs or "request" in logs  # requests were logged, at trace level
    for secret in [token, bad, token.split(".")[2], "access_token"]:
        assert secret not in logs


@pytest.mark.parametrize("value,accepted", [("1", True), ("On", True), ("0", False), ("no", False)])
def test_the_query_token_is_switched_on_by_its_environment_variable(start_server, keys, value, accepted):
    server = start_jwt_server(start_server, keys, env={"AUTH_QUERY_TOKEN": value})
    token = keys.token("alice")
    instance = server.request("POST", "/reactors", {"type": "counter"}, headers=bearer(token)).json()["id"]
    status = server.request("GET", f"/reactors/{instance}?access_token={token}").status
    assert status == (200 if accepted else 401), status


@pytest.mark.cluster
def test_a_session_is_its_creators_on_every_node_and_the_limit_spans_them(tmp_path, keys):
    """Two nodes on one PostgreSQL store behind nginx: a session created through one node is
    served to its creator by the other and to nobody else, and the limit per subject counts the
    sessions a subject created on either."""
    from cluster import Cluster

    arguments = ("--auth", "jwt", "--jwks-file", str(keys.jwks_file), "--jwt-audience", AUDIENCE,
                 "--jwt-issuer", ISSUER, "--max-instances-per-subject", "3")
    with Cluster(tmp_path / "cluster", nodes=2, lease_s=1, node_store="postgres", node_args=arguments) as cluster:
        alice, bob = bearer(keys.token("alice")), bearer(keys.token("bob"))
        first, second = cluster.node(0), cluster.node(1)
        made = [first.request("POST", "/reactors", {"type": "counter"}, headers=alice) for _ in range(2)]
        assert [reply.status for reply in made] == [201, 201]
        assert second.request("POST", "/reactors", {"type": "counter"}, headers=alice).status == 201
        refused = second.request("POST", "/reactors", {"type": "counter"}, headers=alice)
        assert refused.status == 429, refused
        instance = made[0].json()["id"]
        # Through the proxy, to whichever node its id routes to, and on each node directly.
        assert cluster.request("GET", f"/reactors/{instance}", headers=bob).status == 404
        reply = cluster.request("POST", f"/reactors/{instance}/actions?wait=true", '"increase"', headers=alice)
        assert reply.status == 200, reply
        subjects = cluster.postgres.psql("SELECT DISTINCT subject FROM reactor_sessions").split()
        assert subjects == ["alice"], subjects
