"""``siesta-runtime config check``: the ``SIESTA_*`` environment against the settings
model (``runtime/settings.py``). Names no setting has are matched to the nearest one
(a typo passes silently otherwise: pydantic ignores unknown top-level names), the
settings are validated, and the effective configuration is shown, secrets masked."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from runtime.settings import Settings, describe_invalid_settings

if TYPE_CHECKING:
    import argparse
    import logging

PREFIX = "SIESTA_"
OTHER_VARIABLES = frozenset(
    {
        "SIESTA_URL",  # the Python client's service address (SIESTA_API_TOKEN is a setting)
        "SIESTA_SETUP",  # scripts/setup.sh: serve or test
        "SIESTA_SETUP_YES",
        "SIESTA_GVISOR",
        "SIESTA_USERNS_REMAP",
        "SIESTA_REFLINK_DISKS",  # scripts/setup.sh: the disk folder on XFS with reflink
        "SIESTA_REFLINK_DISK_GB",
        "SIESTA_REFLINK_IMAGE",
        "SIESTA_DISK_ROOT",
        "SIESTA_TEST_ARTIFACTS",  # the console's browser tests
    }
)
"""``SIESTA_*`` names read by something other than the settings."""
OTHER_PREFIXES = ("SIESTA_MCP_",)
"""``siesta-runtime mcp`` takes its options from ``SIESTA_MCP_*``."""
_URL_PASSWORD = re.compile(r"(?<=://)([^/@:\s]*):[^/@\s]+@")
MASK = "**********"
_MASKED = rf"\1:{MASK}@"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = commands.add_parser("config", help="the SIESTA_* configuration")
    actions = config.add_subparsers(required=True, metavar="ACTION")
    checking = actions.add_parser(
        "check",
        help="validate the SIESTA_* environment, name unknown variables with the nearest "
        "setting, print the effective configuration (secrets masked); exit 2 on a problem",
    )
    checking.set_defaults(handler=run)


def run(_: argparse.Namespace) -> int:
    """Problems on stderr, the effective configuration on stdout."""
    report = check(os.environ)
    for line in report.lines():
        print(f"error: {line}", file=sys.stderr)
    if report.settings is None:
        return 2
    if report.settings.api_token is None and not report.settings.tokens:
        print("note: serve needs SIESTA_API_TOKEN or SIESTA_TOKENS (or --create-token)")
    print("\n".join(effective(report.settings)))
    return 0 if report.ok else 2


def warn_unknown(log: logging.Logger) -> None:
    """At ``serve``'s start: one warning per unknown name (it still starts)."""
    for name, near in unknown_variables(os.environ).items():
        log.warning("%s: %s", name, unknown_text(near))


def invalid(error: ValidationError) -> str:
    """What is wrong with the environment the settings refused, unknown names with
    their nearest setting (``SIESTA_COMMAND__TIMEOUT`` would only be "not permitted")."""
    return "\n".join(check(os.environ).lines()) or describe_invalid_settings(error)


@dataclass
class Report:
    unknown: dict[str, str | None] = field(default_factory=dict)
    """Each unknown name, with the nearest known one (``None``: nothing close)."""
    problems: list[str] = field(default_factory=list)
    """Invalid settings, one line each, naming the variable."""
    settings: Settings | None = None

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.problems

    def lines(self) -> list[str]:
        found = [f"{name}: {unknown_text(nearest)}" for name, nearest in self.unknown.items()]
        return found + self.problems


def unknown_text(nearest: str | None) -> str:
    hint = f"; did you mean {nearest}?" if nearest else ""
    return f"no setting has this name{hint}"


def check(env: Mapping[str, str]) -> Report:
    """Checks ``env`` (``os.environ``, or a test's own) without changing it."""
    report = Report(unknown=unknown_variables(env))
    known = {k: v for k, v in env.items() if k.upper() not in report.unknown}
    try:
        with _siesta_environment(known):
            report.settings = Settings()
    except ValidationError as error:
        report.problems = describe_invalid_settings(error).splitlines()
    return report


def unknown_variables(env: Mapping[str, str]) -> dict[str, str | None]:
    names, open_prefixes = known_variables()
    unknown: dict[str, str | None] = {}
    for name in sorted(n.upper() for n in env if n.upper().startswith(PREFIX)):
        if name in names or name in OTHER_VARIABLES or name.startswith(OTHER_PREFIXES):
            continue
        if name.startswith(open_prefixes):
            continue
        unknown[name] = nearest(name, names)
    return unknown


def nearest(name: str, names: frozenset[str]) -> str | None:
    """The known name closest to ``name``; else the one whose last part (after its
    last ``__``) is closest to ``name``'s (a setting given without its section)."""
    found = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.75)
    if found:
        return found[0]
    tail = name.removeprefix(PREFIX).rsplit("__", 1)[-1]
    tails: dict[str, str] = {}
    for known in sorted(names):
        tails.setdefault(known.removeprefix(PREFIX).rsplit("__", 1)[-1], known)
    close = difflib.get_close_matches(tail, list(tails), n=1, cutoff=0.75)
    return tails[close[0]] if close else None


def known_variables() -> tuple[frozenset[str], tuple[str, ...]]:
    """Every variable a setting reads, and the prefixes under which any name is a key
    of a mapping setting (``SIESTA_TOOLS__ORG_POLICIES__ACME``)."""
    names: set[str] = set()
    prefixes: list[str] = []
    _walk(Settings, PREFIX, names, prefixes)
    return frozenset(names), tuple(prefixes)


def _walk(model: type[BaseModel], prefix: str, names: set[str], prefixes: list[str]) -> None:
    for name, info in model.model_fields.items():
        variable = prefix + name.upper()
        names.add(variable)
        for kind in _kinds(info.annotation):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                _walk(kind, variable + "__", names, prefixes)
            elif get_origin(kind) is dict:
                prefixes.append(variable + "__")


def _kinds(annotation: Any) -> Iterator[Any]:
    """The types a field may hold (a union's members, ``Annotated`` unwrapped)."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from _kinds(member)
    elif origin is not None and hasattr(annotation, "__metadata__"):
        yield from _kinds(get_args(annotation)[0])
    else:
        yield annotation


def effective(settings: Settings) -> list[str]:
    """``NAME=value`` for every setting, secrets and URL passwords masked."""
    return list(_flatten(settings, settings.model_dump(mode="json"), PREFIX))


def _flatten(model: BaseModel, dumped: dict[str, Any], prefix: str) -> Iterator[str]:
    for name in type(model).model_fields:
        value, variable = getattr(model, name), prefix + name.upper()
        if isinstance(value, BaseModel):
            yield from _flatten(value, dumped[name], variable + "__")
            continue
        shown = dumped[name]
        text = shown if isinstance(shown, str) else json.dumps(shown)
        yield f"{variable}={_URL_PASSWORD.sub(_MASKED, text)}"


@contextlib.contextmanager
def _siesta_environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ``'s ``SIESTA_*`` names replaced by ``env``'s for a moment (the
    settings read the process environment)."""
    saved = {k: v for k, v in os.environ.items() if k.upper().startswith(PREFIX)}
    for name in saved:
        del os.environ[name]
    os.environ.update({k: v for k, v in env.items() if k.upper().startswith(PREFIX)})
    try:
        yield
    finally:
        for name in [k for k in os.environ if k.upper().startswith(PREFIX)]:
            del os.environ[name]
        os.environ.update(saved)
