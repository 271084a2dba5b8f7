"""The DPoP proof itself (tools/mcp/dpop.py, RFC 9449 §4.2): its header and claims, a signature that
verifies with the public JWK it carries (and only with it), `ath`, the nonces kept per origin, and
the token response that may be DPoP-bound."""

from __future__ import annotations

import base64
import hashlib
import time

import httpx2
import jwt
import pytest

from tools.mcp import dpop


@pytest.fixture
def proofer() -> dpop.Proofer:
    return dpop.Proofer(dpop.new_private_key())


def verified(proof: str) -> tuple[dict, dict]:
    header = jwt.get_unverified_header(proof)
    return header, jwt.decode(proof, jwt.PyJWK(header["jwk"], "ES256").key, algorithms=["ES256"])


def test_a_proof_is_signed_by_the_key_whose_public_jwk_it_carries(proofer):
    header, claims = verified(proofer.proof("post", "https://as.example/token?x=1#f"))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}  # public only: no "d"
    assert claims["htm"] == "POST" and claims["htu"] == "https://as.example/token"  # no query, no fragment
    assert isinstance(claims["jti"], str) and abs(claims["iat"] - time.time()) < 5
    assert "ath" not in claims and "nonce" not in claims
    assert verified(proofer.proof("GET", "http://[::1]:8000/mcp?session=1"))[1]["htu"] == "http://[::1]:8000/mcp"
    other = dpop.Proofer(dpop.new_private_key())
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(proofer.proof("POST", "https://as.example/token"), jwt.PyJWK(other.public_jwk, "ES256").key,
                   algorithms=["ES256"])


def test_each_proof_is_fresh_and_binds_the_token(proofer):
    token = "the-access-token"
    _, one = verified(proofer.proof("POST", "http://127.0.0.1:8000/mcp", token))
    _, two = verified(proofer.proof("POST", "http://127.0.0.1:8000/mcp", token))
    assert one["jti"] != two["jti"]
    assert one["ath"] == base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
    canonical = '{"crv":"P-256","kty":"EC","x":"%s","y":"%s"}' % (proofer.public_jwk["x"], proofer.public_jwk["y"])
    assert proofer.thumbprint == base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def test_a_nonce_challenge_is_kept_for_its_origin_only(proofer):
    rs = httpx2.Request("POST", "http://127.0.0.1:8000/mcp")
    challenge = httpx2.Response(401, headers={"WWW-Authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": "n-1"},
                                request=rs)
    assert dpop.is_nonce_challenge(challenge) and proofer.note_nonce(challenge)
    assert verified(proofer.proof("POST", "http://127.0.0.1:8000/mcp"))[1]["nonce"] == "n-1"
    assert "nonce" not in verified(proofer.proof("POST", "http://127.0.0.1:9000/token"))[1]  # another origin
    as_error = httpx2.Response(400, json={"error": "use_dpop_nonce"}, headers={"DPoP-Nonce": "n-2"},
                               request=httpx2.Request("POST", "http://127.0.0.1:9000/token"))
    assert dpop.is_nonce_challenge(as_error)
    other = httpx2.Response(401, headers={"WWW-Authenticate": 'DPoP error="invalid_token"', "DPoP-Nonce": "n-3"}, request=rs)
    assert not dpop.is_nonce_challenge(other)  # a refusal, not a nonce to retry with


def test_a_bound_token_response_is_read_and_a_key_that_is_not_p256_is_refused():
    assert dpop.BoundToken.model_validate({"access_token": "t", "token_type": "dpop"}).token_type == "DPoP"
    assert dpop.BoundToken.model_validate({"access_token": "t", "token_type": "bearer"}).token_type == "Bearer"
    with pytest.raises(dpop.DPoPError):
        dpop.Proofer("not a key")
    with pytest.raises(dpop.DPoPError, match="ES256"):
        dpop.Proofer(dpop.new_private_key()).check_algorithms(["RS256"])
