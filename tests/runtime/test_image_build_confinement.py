"""Builds stay inside the catalog, without an engine: what a new version may name and
say, what an inline Dockerfile's context holds, where builds' steps may reach, and
what their log keeps. The same on a real engine: tests/security/test_image_builds_docker.py."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.admin.audit import AuditLog
from runtime.admin.builder import Progress
from runtime.admin.images import Actor, CatalogAdmin
from runtime.admin.settings import AuditSettings
from runtime.core.errors import DockerfileNotAllowed, ImageNameOutsideCatalog
from runtime.core.network_rules import Allowlist
from runtime.core.secrets import secret_values
from runtime.egress.credentials import verify
from runtime.egress.service import BUILD_ORG, Egress, ProxiedEgress
from runtime.images.catalog import CatalogImage
from runtime.images.inline import INLINE_DOCKERFILE, check_inline_dockerfile, inline_context
from runtime.images.settings import ImageSettings
from runtime.seams.store_settings import SqliteStoreSettings
from runtime.settings import Settings
from runtime.store import open_stores

ACTOR = Actor("tester", "local", "api")
SECRET = "s3cret-token-of-the-deployment"
CATALOG = (
    'images:\n  - {id: shipped, tag: "1", title: S, image: "siesta/shipped:1", build: shipped}\n'
)


class ChattyBuilder:
    """Prints what a hostile or careless build step would: a secret, then a flood."""

    def build(
        self, image: CatalogImage, root: Path, progress: Progress, *, no_cache: bool = False
    ) -> str:
        progress(f"env: API_TOKEN={SECRET}")
        for n in range(1000):
            progress(f"line {n} " + "x" * 100)
        if image.tag == "bad":
            msg = f"it failed, printing {SECRET}"
            raise RuntimeError(msg)
        return "sha256:" + "a" * 64

    def digest_of(self, reference: str) -> tuple[str, float] | None:
        return None


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[CatalogAdmin]:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    stores = open_stores(SqliteStoreSettings(), tmp_path / "state.db")
    settings = ImageSettings(catalog_path=tmp_path / "catalog.yaml", build_log_bytes=4096)
    audit = AuditLog(stores.audit, AuditSettings())
    made = CatalogAdmin(
        stores.catalog,
        stores.sessions,
        stores.leases,
        audit,
        settings,
        ChattyBuilder(),
        secrets=[SECRET],
    )
    made.seed()
    yield made
    stores.close()


def version(image: str, **source: str) -> CatalogImage:
    return CatalogImage(id="mine", tag="1", title="Mine", image=image, **source)


@pytest.mark.parametrize(
    "name", ["debian:bookworm-slim", "siesta/runtime:1", "siesta-catalog/shipped:1"]
)
def test_a_version_to_build_names_only_its_own_place_in_the_catalog(
    admin: CatalogAdmin, name: str
) -> None:
    with pytest.raises(ImageNameOutsideCatalog) as refused:
        admin.add(
            version(name, dockerfile="FROM debian:bookworm-slim\n"), default=False, actor=ACTOR
        )
    assert refused.value.fields == {"image": name, "expected": "siesta-catalog/mine:1"}
    assert admin.catalog.find("mine:1") is None
    built = admin.add(
        version("siesta-catalog/mine:1", dockerfile="FROM x\n"), default=False, actor=ACTOR
    )
    assert built.image == "siesta-catalog/mine:1"


def test_a_version_to_run_may_name_any_image(admin: CatalogAdmin) -> None:
    added = admin.add(version("debian:bookworm-slim"), default=False, actor=ACTOR)
    assert added.image == "debian:bookworm-slim" and not added.buildable


@pytest.mark.parametrize(
    "dockerfile",
    [
        "FROM x\nADD http://169.254.169.254/latest/meta-data/ /m\n",
        "FROM x\n  add --chown=1 https://example.com/a /a\n",
        "FROM x\nAD\\\nD http://10.0.0.1/ /a\n",
        "# escape=`\nFROM x\nAD`\nD http://10.0.0.1/ /a\n",
        "FROM x\nONBUILD ADD http://10.0.0.1/ /a\n",
        'FROM x\nADD ["http://10.0.0.1/", "/a"]\n',
    ],
)
def test_an_inline_dockerfile_may_not_add(dockerfile: str) -> None:
    with pytest.raises(DockerfileNotAllowed) as refused:
        check_inline_dockerfile(dockerfile)
    assert refused.value.code == "dockerfile_not_allowed"
    assert "may not use ADD" in refused.value.message


def test_copy_and_run_are_fine() -> None:
    check_inline_dockerfile(
        "FROM x\nCOPY siesta-fs/siesta-fs.c /src/\nRUN apt-get install -y \\\n  add-apt-key\n"
    )


def test_the_admin_refuses_an_add_before_it_is_stored(admin: CatalogAdmin) -> None:
    dockerfile = "FROM x\nADD http://169.254.169.254/ /m\n"
    with pytest.raises(DockerfileNotAllowed):
        admin.add(
            version("siesta-catalog/mine:1", dockerfile=dockerfile), default=False, actor=ACTOR
        )
    assert admin.catalog.find("mine:1") is None


def test_an_inline_context_holds_the_shared_sources_alone(tmp_path: Path) -> None:
    (tmp_path / "catalog.yaml").write_text(CATALOG)
    (tmp_path / "service.env").write_text(f"SIESTA_API_TOKEN={SECRET}\n")
    (tmp_path / "siesta-fs" / "sub").mkdir(parents=True)
    (tmp_path / "siesta-fs" / "siesta-fs.c").write_text("int main;\n")
    (tmp_path / "siesta-fs" / "sub" / "x.h").write_text("\n")
    (tmp_path / "siesta-fs" / "passwd").symlink_to("/etc/passwd")
    (tmp_path / "siesta-fs" / "etc").symlink_to("/etc")
    (tmp_path / "siesta-agent").symlink_to("/etc")
    context = inline_context(tmp_path, "FROM x\n")
    with tarfile.open(fileobj=io.BytesIO(context.getvalue())) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == [INLINE_DOCKERFILE, "siesta-fs/siesta-fs.c", "siesta-fs/sub/x.h"]
    assert all(m.isfile() for m in members.values())


def wait_done(admin: CatalogAdmin, build_id: str) -> None:
    deadline = time.monotonic() + 30
    while admin.build(build_id).state == "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_build_log_is_capped_in_bytes_and_masks_the_deployments_secrets(
    admin: CatalogAdmin,
) -> None:
    build = admin.start_build("shipped:1", ACTOR)
    wait_done(admin, build.build_id)
    lines = admin.build_log(build.build_id)
    text = "\n".join(lines)
    assert SECRET not in text and "API_TOKEN=\u2022\u2022\u2022\u2022\u2022\u2022" in text
    assert len(text.encode()) <= 4096 + 200
    assert lines[-1] == (
        "[the log stops here: it is capped at 4096 bytes (SIESTA_IMAGES__BUILD_LOG_BYTES); "
        "the build goes on]"
    )
    # The build wrote its version's own name: the entry now runs that.
    assert admin.get("shipped:1").image == "siesta-catalog/shipped:1"


def test_a_failed_builds_error_is_kept_past_the_cap_and_masked(admin: CatalogAdmin) -> None:
    admin.add(
        CatalogImage(
            id="shipped", tag="bad", title="B", image="siesta-catalog/shipped:bad", build="shipped"
        ),
        default=False,
        actor=ACTOR,
    )
    build = admin.start_build("shipped:bad", ACTOR)
    wait_done(admin, build.build_id)
    done = admin.build(build.build_id)
    assert done.state == "failed" and done.error is not None and SECRET not in done.error
    assert admin.build_log(build.build_id)[-1].startswith("build failed: RuntimeError: it failed")


def test_the_settings_secrets_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIESTA_API_TOKEN", "api-token-0123456789")
    monkeypatch.setenv("SIESTA_STORE__URL", "redis://:store%2Fpass@localhost:6379/0")
    monkeypatch.setenv("SIESTA_EGRESS__KEY", "k" * 40)
    found = secret_values(Settings())
    assert {"api-token-0123456789", "store%2Fpass", "store/pass", "k" * 40} <= set(found)
    assert "siesta_port_token" not in found  # a cookie's name, not a secret


def test_without_egress_builds_get_no_network() -> None:
    assert Egress().build_network().mode == "none"
    assert Egress().build_network().build_args("x:1") == {}
    apart = ProxiedEgress(Allowlist.parse(["deb.debian.org"]), b"k" * 32, "10.0.0.1:3128")
    assert apart.build_network().mode == "none"  # a proxy run apart: no network of ours


def test_with_egress_builds_use_the_sandbox_network_and_the_proxy() -> None:
    egress = ProxiedEgress(Allowlist.parse(["deb.debian.org"]), b"k" * 32, "10.0.0.1:3128")
    egress.network = "siesta-sandboxes-dep"
    network = egress.build_network()
    assert network.mode == "siesta-sandboxes-dep"
    args = network.build_args("mine:1")
    assert args["http_proxy"] == args["HTTPS_PROXY"] and args["NO_PROXY"]
    user, password = args["HTTP_PROXY"].removeprefix("http://").split("@")[0].split(":")
    claims = verify(b"k" * 32, user, password)
    assert claims is not None and (claims.org, claims.conversation) == (BUILD_ORG, "mine:1")
    assert claims.narrowed_to is None  # the deployment's allowlist, as it is
