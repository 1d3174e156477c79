"""The image catalog and its builds in SQLite (image versions as JSON, keyed by ref)."""

from __future__ import annotations

from runtime.core.operator_records import ImageBuild
from runtime.store.sqlite.db import Database


class SqliteCatalog:
    def __init__(self, db: Database) -> None:
        self._db = db

    def catalog(self) -> tuple[dict[str, str], dict[str, str]]:
        with self._db.lock:
            images = self._db.conn.execute("SELECT ref, body FROM catalog_images").fetchall()
            defaults = self._db.conn.execute(
                "SELECT image_id, tag FROM catalog_defaults"
            ).fetchall()
        return {str(r): str(b) for r, b in images}, {str(i): str(t) for i, t in defaults}

    def add_image(self, ref: str, body: str) -> bool:
        with self._db.transaction() as conn:
            added = conn.execute(
                "INSERT INTO catalog_images (ref, body) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (ref, body),
            ).rowcount
        return bool(added)

    def replace_image(self, ref: str, expected: str, body: str) -> bool:
        with self._db.transaction() as conn:
            changed = conn.execute(
                "UPDATE catalog_images SET body = ? WHERE ref = ? AND body = ?",
                (body, ref, expected),
            ).rowcount
        return bool(changed)

    def set_default_tag(self, image_id: str, tag: str, *, only_if_unset: bool = False) -> bool:
        conflict = "DO NOTHING" if only_if_unset else "DO UPDATE SET tag = excluded.tag"
        with self._db.transaction() as conn:
            changed = conn.execute(
                "INSERT INTO catalog_defaults (image_id, tag) VALUES (?, ?) "
                f"ON CONFLICT (image_id) {conflict}",
                (image_id, tag),
            ).rowcount
        return bool(changed)

    def put_build(self, build: ImageBuild) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO image_builds (build_id, ref, started_at, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (build_id) DO UPDATE SET body = excluded.body",
                (build.build_id, build.ref, build.started_at, build.to_json()),
            )

    def get_build(self, build_id: str) -> ImageBuild | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM image_builds WHERE build_id = ?", (build_id,)
            ).fetchone()
        return ImageBuild.from_json(str(row[0])) if row else None

    def list_builds(self, ref: str, limit: int) -> list[ImageBuild]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT body FROM image_builds WHERE ref = ? ORDER BY started_at DESC LIMIT ?",
                (ref, limit),
            ).fetchall()
        return [ImageBuild.from_json(str(body)) for (body,) in rows]

    def append_build_log(self, build_id: str, lines: list[str], keep: int) -> int:
        with self._db.transaction() as conn:
            (held,) = conn.execute(
                "SELECT COUNT(*) FROM image_build_log WHERE build_id = ?", (build_id,)
            ).fetchone()
            room = max(0, keep - int(held))
            conn.executemany(
                "INSERT INTO image_build_log (build_id, line_no, line) VALUES (?, ?, ?)",
                [(build_id, int(held) + i, line) for i, line in enumerate(lines[:room])],
            )
        return int(held) + min(room, len(lines))

    def build_log(self, build_id: str, start: int) -> list[str]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT line FROM image_build_log WHERE build_id = ? AND line_no >= ? "
                "ORDER BY line_no",
                (build_id, start),
            ).fetchall()
        return [str(line) for (line,) in rows]
