from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.errors import CatalogInvalid, ImageNotInCatalog, ImageRequired
from runtime.images.catalog import ImageCatalog
from runtime.images.settings import ImageSettings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    return path


CATALOG = """
images:
  - {id: base, title: Base, image: "x/base:1"}
  - {id: old, title: Old, image: "x/old:1", enabled: false}
"""


def test_shipped_catalog_has_three_enabled_buildable_images() -> None:
    catalog = ImageCatalog.load(ImageSettings().catalog_path)
    enabled = catalog.enabled()
    assert [image.id for image in enabled] == ["debian-base", "python", "base"]
    for image in enabled:
        assert image.build is not None
        dockerfile = (catalog.root / image.build / "Dockerfile").read_text()
        assert dockerfile.startswith("#") and "FROM debian:bookworm-slim" in dockerfile
        # An init as PID 1: the sandbox agent (it reaps orphans, as tini did).
        assert 'ENTRYPOINT ["/usr/local/lib/siesta/siesta-agent"]' in dockerfile


def test_selection_of_enabled_image(tmp_path: Path) -> None:
    catalog = ImageCatalog.load(write(tmp_path, CATALOG))
    assert catalog.select("base").image == "x/base:1"
    assert [image.id for image in catalog.enabled()] == ["base"]


@pytest.mark.parametrize("selection", [None, ""])
def test_selection_is_required(tmp_path: Path, selection: str | None) -> None:
    catalog = ImageCatalog.load(write(tmp_path, CATALOG))
    with pytest.raises(ImageRequired) as caught:
        catalog.select(selection)
    assert caught.value.fields["enabled"] == ["base"]


@pytest.mark.parametrize("selection", ["old", "missing", "x/base:1"])
def test_disabled_or_unknown_image_is_not_in_catalog(tmp_path: Path, selection: str) -> None:
    catalog = ImageCatalog.load(write(tmp_path, CATALOG))
    with pytest.raises(ImageNotInCatalog) as caught:
        catalog.select(selection)
    assert caught.value.code == "image_not_in_catalog"
    assert caught.value.fields["imageId"] == selection


@pytest.mark.parametrize(
    "text",
    [
        "images:\n  - {id: a, title: A, image: x}\n  - {id: a, title: B, image: y}\n",
        "images:\n  - {id: a, title: A}\n",
        "images:\n  - {id: 'Bad Id', title: A, image: x}\n",
        "images:\n  - {id: a, title: A, image: x, colour: red}\n",
        "images: [",
    ],
)
def test_invalid_catalogs_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(CatalogInvalid):
        ImageCatalog.load(write(tmp_path, text))


def test_missing_catalog_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogInvalid, match="cannot load"):
        ImageCatalog.load(tmp_path / "absent.yaml")
