"""The official MCP client conformance suite (npm @modelcontextprotocol/conformance, 0.1.16 and
0.2.0-alpha.12 side by side) drives conformance/client.py, built on tools/mcp/connection.py and
tools/mcp/oauth_flow.py. The scenarios that need no OAuth, one of each kind of OAuth scenario, and a
few of the 2026-07-28 requirement set run here (a few seconds each); `make conformance` runs every
scenario of both versions and prints the tables and totals."""

from __future__ import annotations

import subprocess

import pytest

from conformance import run as conformance
from tests.helpers import which

pytestmark = pytest.mark.worker

NO_OAUTH = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
# Discovery with metadata elsewhere, a pre-registered client with client_secret_basic, a step-up,
# the 2025-03-26 default endpoints, and 2025-03-26 metadata naming an issuer `<origin>/oauth`
# (accepted: same origin; the RFC 8414 §3.3 issuer check must not refuse it), and a Client ID
# Metadata Document URL as client id; and an extension: enterprise-managed authorization (the ID
# token exchanged at the IdP for an ID-JAG, then the jwt-bearer grant: tools/mcp/token_exchange.py).
OAUTH = ["auth/metadata-var3", "auth/token-endpoint-auth-basic", "auth/pre-registration", "auth/scope-step-up",
         "auth/2025-03-26-oauth-endpoint-fallback", "auth/2025-03-26-oauth-metadata-backcompat", "auth/basic-cimd",
         "auth/cross-app-access-complete-flow"]


# Of the 0.2.0-alpha.12 suite's 2026-07-28 requirement set, at its wire: request _meta, the
# RFC 9207 / RFC 8414 issuer checks, tools set aside for an invalid x-mcp-header, Mcp-Param-*
# headers mirrored from x-mcp-header arguments, requestState echoed across input rounds, the
# step-up's scope union (SEP-2350), a new registration with a new authorization server (SEP-2352);
# and four of its extensions: the client credentials grant with client_secret_basic and with private_key_jwt,
# and DPoP-bound tokens, without and with the servers' nonces (about 2.5 s each).
REQUIRED_2026 = ["request-metadata", "auth/iss-supported-missing", "auth/metadata-issuer-mismatch",
                 "http-invalid-tool-headers", "http-custom-headers", "sep-2322-client-request-state",
                 "auth/scope-step-up", "auth/authorization-server-migration",
                 "auth/client-credentials-basic", "auth/client-credentials-jwt", "auth/dpop", "auth/dpop-nonce"]


@pytest.fixture(scope="module")
def suite():
    if not all(path.exists() for path in (conformance.SUITE, conformance.SUITE_02, conformance.NODE)):
        if not which("npm"):
            pytest.fail("npm is needed to install the conformance suite")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=conformance.HERE,
                       check=True, capture_output=True, timeout=300)
    return conformance


@pytest.mark.parametrize("scenario", NO_OAUTH + OAUTH)
def test_the_client_passes_the_official_scenario(suite, scenario):
    outcome, detail, _ = suite.run(scenario)
    assert outcome == "pass", detail


@pytest.mark.parametrize("scenario", REQUIRED_2026)
def test_the_client_passes_the_0_2_scenario(suite, scenario):
    outcome, detail, _ = suite.run(scenario, "0.2.0-alpha.12")
    assert outcome == "pass", detail


def test_make_conformance_runs_both_versions(suite):
    """Both versions are installed side by side (an npm alias) and each is asked for its own list:
    0.1.16 by protocol version, 0.2 by the frozen 2026-07-28 requirement set (32 client scenarios
    scored, the extensions run and counted apart)."""
    old = {name: scored for name, _, scored in suite.scenarios(suite.VERSIONS["0.1.16"])}
    new = {name: scored for name, _, scored in suite.scenarios(suite.VERSIONS["0.2.0-alpha.12"])}
    assert old["auth/basic-cimd"] and not old["auth/client-credentials-basic"] and "request-metadata" not in old
    assert sum(new.values()) == 32 and new["http-invalid-tool-headers"] and new["auth/iss-supported-missing"]
    assert new["auth/dpop"] is False and new["auth/client-credentials-basic"] is False
    assert suite.total_line("0.2.0-alpha.12", {"scored": [30, 32], "not scored": [2, 7]}) == (
        "0.2.0-alpha.12: 30/32 passed (the 2026-07-28 requirement set); not scored (draft, extensions): 2/7 passed")


# What the runner (0.1.16) printed for auth/basic-cimd while the client registered dynamically:
# no failed check, one WARNING, and its own verdict FAILED.
WARNED = """Test Results:
Passed: 15/15, 0 failed, 1 warnings

Warning Checks:
  - Client ID Metadata Document Usage: Client SHOULD use URL-based client ID when server advertises client_id_metadata_document_supported=true

\u274c OVERALL: FAILED
"""


def test_a_scenario_the_runner_calls_failed_is_not_counted_as_passed():
    """The runner's `OVERALL:` line is the verdict (a WARNING check fails a scenario there), not
    our own reading of its counts."""
    outcome, detail = conformance.verdict(WARNED)
    assert outcome == "fail", detail
    assert "1 warnings" in detail or "1 warning" in detail
    assert "Client ID Metadata Document Usage" in detail
    assert conformance.verdict(WARNED.replace("\u274c OVERALL: FAILED", "\u2705 OVERALL: PASSED"))[0] == "pass"
    assert conformance.verdict("Error: scenario not found")[0] == "error"
