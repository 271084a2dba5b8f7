"""`manage.py surface snapshot|diff|approve SERVER`: a server's surface history for CI.

- `snapshot SERVER` connects, lists everything and stores a new version if the surface changed.
  Exit 1 when a version is approved and the surface now differs from it (unapproved drift).
- `diff SERVER [--from V] [--to V] [--fail-on breaking|risky|compatible]` compares two versions
  (`V`: a number, `approved`, `latest`, `live`; default from the approved version, else the one
  before, to `live`: connect and snapshot first). Exit 1 when a change is at or above --fail-on
  (default breaking).
- `approve SERVER [--number N] [--user NAME]` pins a version (default the latest).
Exit codes: 0 nothing to report, 1 see above, 2 could not connect, 3 bad input.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from review import diff as surface_diff
from review import drift, surface
from review.ci import EXIT_OK, EXIT_REPORT, ReviewCommand, as_json, bad_input, connect_error, find_server, junit
from review.models import SurfaceVersion


class Command(ReviewCommand):
    help = "Snapshot, compare and approve a server's surface. Exit: 0 nothing, 1 breaking change or drift, 2 no connection, 3 bad input."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["snapshot", "diff", "approve"])
        parser.add_argument("server", help="Server id or exact name.")
        parser.add_argument("--from", dest="from_", default=None, help="diff: a version number, approved, latest (default: approved, else the one before --to).")
        parser.add_argument("--to", default="live", help="diff: a version number, latest, approved or live (default live).")
        parser.add_argument("--fail-on", choices=list(surface_diff.ORDER), default=surface_diff.BREAKING)
        parser.add_argument("--number", type=int, help="approve: the version number (default: the latest).")
        parser.add_argument("--user", help="approve: who approves (recorded); default nobody.")
        self.add_format(parser)

    def handle(self, *args, **options):
        server = find_server(options["server"])
        action = options["action"]
        if action == "snapshot":
            return self.finish(self.snapshot(server, options))
        if action == "diff":
            return self.finish(self.diff(server, options))
        return self.finish(self.approve(server, options))

    def _capture(self, server) -> tuple[SurfaceVersion, bool]:
        try:
            return surface.capture(server, source="command")
        except Exception as exc:  # noqa: BLE001 - every failure to reach the server is exit 2
            raise connect_error(exc) from None

    def snapshot(self, server, options) -> int:
        version, created = self._capture(server)
        state = drift.state(server)
        data = {"server": server.name, "version": version.number, "hash": version.hash, "new": created,
                "tokens": version.tokens, "findings": len(version.findings),
                "approved": state.approved.number if state.approved else None, "drift": state.drifted,
                "changed_tools": state.changed_tools}
        fmt = options["format"]
        if fmt == "json":
            self.stdout.write(as_json(data))
        elif fmt == "junit":
            failure = (f"v{version.number} differs from approved v{state.approved.number}" if state.drifted else None)
            self.stdout.write(junit(f"surface {server.name}", [(f"surface.{server.name}", "matches the approved version", failure)]))
        else:
            self.stdout.write(f"{server.name}: v{version.number} {version.short_hash} ({'new' if created else 'unchanged'}), "
                              f"{version.tokens} tokens, {len(version.findings)} findings")
            if state.approved:
                self.stdout.write(f"approved: v{state.approved.number}" + (
                    f" — DRIFT: changed tools {', '.join(state.changed_tools) or '(none; other parts)'}" if state.drifted else " — matches"))
            else:
                self.stdout.write("approved: none")
        return EXIT_REPORT if state.drifted else EXIT_OK

    def _version(self, server, ref: str, live: SurfaceVersion | None) -> SurfaceVersion | None:
        if ref == "live":
            return live
        if ref == "latest":
            return surface.latest(server)
        if ref == "approved":
            return drift.state(server).approved
        if not ref.isdigit():
            raise bad_input(f"A version is a number, latest, approved or live, not {ref!r}.")
        found = SurfaceVersion.objects.filter(server=server, number=int(ref)).first()
        if found is None:
            raise bad_input(f"{server.name} has no version {ref}.")
        return found

    def diff(self, server, options) -> int:
        refs = (options["from_"] or "", options["to"])
        for ref in refs:
            if ref and ref not in ("live", "latest", "approved") and not ref.isdigit():
                raise bad_input(f"A version is a number, latest, approved or live, not {ref!r}.")
        live = self._capture(server)[0] if "live" in refs else None
        to = self._version(server, options["to"], live)
        if to is None:
            raise bad_input(f"{server.name} has no {options['to']} version.")
        if options["from_"]:
            before = self._version(server, options["from_"], live)
            if before is None:
                raise bad_input(f"{server.name} has no {options['from_']} version.")
        else:
            before = drift.state(server).approved or SurfaceVersion.objects.filter(
                server=server, number__lt=to.number).order_by("-number").first()
        result = surface_diff.compare(before.surface if before else to.surface, to.surface,
                                      before.tokens if before else to.tokens, to.tokens)
        threshold = surface_diff.ORDER[options["fail_on"]]
        failing = [c for c in result.changes if c.rule != "token-cost" and surface_diff.ORDER[c.severity] <= threshold]
        fmt = options["format"]
        label = f"v{before.number if before else to.number} → v{to.number}"
        if fmt == "json":
            self.stdout.write(as_json({"server": server.name, "from": before.number if before else None, "to": to.number,
                                       **result.as_json()}))
        elif fmt == "junit":
            self.stdout.write(junit(f"surface diff {server.name} {label}", [
                (f"{server.name}.{c.subject}", f"{c.rule} {c.path}".strip(),
                 f"{c.severity}: {c.detail} ({c.why})" if c in failing else None) for c in result.changes]))
        else:
            self.stdout.write(f"{server.name} {label}: {result.count('breaking')} breaking, {result.count('risky')} risky, "
                              f"{result.count('compatible')} compatible; tokens {result.tokens_before} → {result.tokens_after}")
            for c in result.changes:
                self.stdout.write(f"  {c.severity.upper():10} {c.subject} {c.path} — {c.detail} [{c.rule}: {c.why}]")
        return EXIT_REPORT if failing else EXIT_OK

    def approve(self, server, options) -> int:
        number = options["number"]
        version = (SurfaceVersion.objects.filter(server=server, number=number).first() if number is not None
                   else surface.latest(server))
        if version is None:
            raise bad_input(f"{server.name} has no version {number}." if number is not None else
                            f"{server.name} has no stored version yet: run `surface snapshot` first.")
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise bad_input(f"No user {options['user']!r}.")
        drift.approve(version, user)
        data = {"server": server.name, "approved": version.number, "hash": version.hash}
        fmt = options["format"]
        if fmt == "json":
            self.stdout.write(as_json(data))
        elif fmt == "junit":
            self.stdout.write(junit(f"surface approve {server.name}", [(f"surface.{server.name}", f"approve v{version.number}", None)]))
        else:
            self.stdout.write(f"{server.name}: approved v{version.number} ({version.short_hash})")
        return EXIT_OK
