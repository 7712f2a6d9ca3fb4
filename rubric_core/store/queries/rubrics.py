"""Rubrics, their numbered versions and tags."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rubric_core.limits import MAX_NOTE_CHARS, cut_text
from rubric_core.rubric import validate_rubric
from rubric_core.store.errors import unknown_rubric, unknown_version
from rubric_core.store.sqlbase import now_iso, returned_id
from rubric_core.store.validation import clean_name, clean_tags, require_int, require_text

if TYPE_CHECKING:
    from rubric_core.store.sqlbase import SQLBackend, Tx

__all__ = ["Rubrics"]

_VERSION_SELECT = (
    "SELECT v.id, v.rubric_id, rb.name, v.version, v.text, v.criteria, v.note, v.created_at "
    "FROM rubric_versions v JOIN rubrics rb ON rb.id = v.rubric_id"
)


def _decode_version(row: dict[str, Any]) -> dict[str, Any]:
    row["criteria"] = json.loads(row["criteria"])
    return row


def _replace_tags(tx: Tx, rubric_id: int, tags: list[str]) -> None:
    tx.run("DELETE FROM rubric_tags WHERE rubric_id = ?", (rubric_id,))
    tx.many(
        "INSERT INTO rubric_tags (rubric_id, tag) VALUES (?, ?)",
        [(rubric_id, tag) for tag in tags],
    )


class Rubrics:
    """`Store.rubrics`: rubrics, their numbered versions and tags."""

    def __init__(self, backend: SQLBackend) -> None:
        self._backend = backend

    def save_version(
        self, name: str, text: str, *, tags: list[str] | None = None, note: str = ""
    ) -> dict[str, Any]:
        """Save `text` as the next version of rubric `name` (created if new).

        Saving the same text as the latest version returns that version unchanged.

        Returns:
            The version row: {id, rubric_id, name, version, text, criteria, note, created_at}.

        Raises:
            RubricError: The text is not a usable rubric.
            StoreError: The name, tags or note are invalid.
        """
        name = clean_name(name)
        criteria = validate_rubric(text)
        note = cut_text(
            require_text(note if note is not None else "", "note", allow_empty=True),
            MAX_NOTE_CHARS,
        )
        clean = None if tags is None else clean_tags(tags)
        text = text.strip()
        lock = self._backend.dialect.lock_row

        def job(tx: Tx) -> int:
            now = now_iso()
            tx.one(
                "INSERT INTO rubrics (name, created_at, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO NOTHING RETURNING id",
                (name, now, now),
            )
            rubric_id = returned_id(tx.one(f"SELECT id FROM rubrics WHERE name = ?{lock}", (name,)))
            if clean is not None:
                _replace_tags(tx, rubric_id, clean)
            latest = tx.one(
                "SELECT id, version, text FROM rubric_versions WHERE rubric_id = ? "
                "ORDER BY version DESC LIMIT 1",
                (rubric_id,),
            )
            if latest is not None and latest[2] == text:
                return int(latest[0])
            version_id = returned_id(
                tx.one(
                    "INSERT INTO rubric_versions (rubric_id, version, text, criteria, note, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        rubric_id,
                        (latest[1] if latest else 0) + 1,
                        text,
                        json.dumps(criteria, ensure_ascii=False),
                        note,
                        now,
                    ),
                )
            )
            tx.run("UPDATE rubrics SET updated_at = ? WHERE id = ?", (now, rubric_id))
            return version_id

        return self.version(self._backend.write(job))

    def set_tags(self, name: str, tags: list[str]) -> None:
        """Replace the tags of rubric `name`.

        Raises:
            StoreError: No rubric has that name, or a tag is invalid.
        """
        name, clean = clean_name(name), clean_tags(tags)

        def job(tx: Tx) -> None:
            row = tx.one(
                f"SELECT id FROM rubrics WHERE name = ?{self._backend.dialect.lock_row}", (name,)
            )
            if row is None:
                raise unknown_rubric(name)
            _replace_tags(tx, row[0], clean)
            tx.run("UPDATE rubrics SET updated_at = ? WHERE id = ?", (now_iso(), row[0]))

        self._backend.write(job)

    def find(self) -> list[dict[str, Any]]:
        """Every rubric, by name: {id, name, tags, latest_version, latest_version_id, versions, updated_at}."""
        rows = self._backend.query(
            """
            SELECT rb.id, rb.name, lv.version AS latest_version, lv.id AS latest_version_id,
                   (SELECT COUNT(*) FROM rubric_versions v WHERE v.rubric_id = rb.id) AS versions,
                   rb.updated_at
            FROM rubrics rb
            JOIN rubric_versions lv ON lv.id = (
                SELECT id FROM rubric_versions WHERE rubric_id = rb.id ORDER BY version DESC LIMIT 1
            )
            ORDER BY rb.name
            """
        )
        tags: dict[int, list[str]] = {}
        for tag in self._backend.query(
            "SELECT rubric_id, tag FROM rubric_tags ORDER BY rubric_id, tag"
        ):
            tags.setdefault(tag["rubric_id"], []).append(tag["tag"])
        return [
            {
                "id": row["id"],
                "name": row["name"],
                "tags": tags.get(row["id"], []),
                **{k: row[k] for k in ("latest_version", "latest_version_id", "versions")},
                "updated_at": row["updated_at"],
            }
            for row in rows
        ]

    def versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of rubric `name`, oldest first.

        Raises:
            StoreError: No rubric has that name.
        """
        name = clean_name(name)
        rows = self._backend.query(
            f"{_VERSION_SELECT} WHERE rb.name = ? ORDER BY v.version", (name,)
        )
        if not rows:
            raise unknown_rubric(name)
        return [_decode_version(row) for row in rows]

    def version(self, version_id: int) -> dict[str, Any]:
        """One version row by id.

        Raises:
            StoreError: No version has that id.
        """
        version_id = require_int(version_id, "version_id")
        row = self._backend.query_one(f"{_VERSION_SELECT} WHERE v.id = ?", (version_id,))
        if row is None:
            raise unknown_version(version_id)
        return _decode_version(row)

    def id_of(self, name: str) -> int | None:
        """The id of rubric `name`, or None."""
        row = self._backend.query_one("SELECT id FROM rubrics WHERE name = ?", (name,))
        return int(row["id"]) if row else None
