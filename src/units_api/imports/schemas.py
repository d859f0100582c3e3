"""The import's upload form (multipart/form-data): as the OpenAPI document shows it, and as a
request sends it, read and checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.datastructures import FormData, UploadFile

from units_api.auth.service import Principal
from units_api.errors import ValidationFailed
from units_api.imports.readers import EXTENSIONS, FORMATS, GZIP_EXTENSIONS, XLSX_MAGIC, format_of
from units_api.imports.service import MODES, ImportParams

FIELDS = ("file", "format", "mode", "dryRun", "atomic")
IMPORT_FORM = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "file": {"type": "string", "format": "binary"},
        "format": {"type": "string", "enum": list(FORMATS)},
        "mode": {"type": "string", "enum": list(MODES), "default": "create"},
        "dryRun": {"type": "boolean", "default": False},
        "atomic": {"type": "boolean", "default": False},
    },
}
_TRUE, _FALSE = ("true", "1"), ("false", "0", "")
Errors = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class ImportForm:
    """An upload form, read: the file, and how to import it."""

    file: UploadFile
    format: str
    mode: str
    dry_run: bool
    atomic: bool

    @classmethod
    def read(cls, form: FormData) -> ImportForm:
        """The form's fields, checked; a 422 names every one at fault (an unknown one too)."""
        errors = [(name, "is not a field of an import") for name in form if name not in FIELDS]
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ValidationFailed([*errors, ("file", "is required: the file to import")])
        fmt = _format(upload, form.get("format"), errors)
        mode = str(form.get("mode") or "create")
        if mode not in MODES:
            errors.append(("mode", f"must be one of {', '.join(MODES)}"))
        dry_run = _flag("dryRun", form.get("dryRun"), errors)
        atomic = _flag("atomic", form.get("atomic"), errors)
        if errors:
            raise ValidationFailed(errors)
        return cls(upload, fmt, mode, dry_run, atomic)

    def options(self) -> bytes:
        """Every field but the file, as they count in the request's fingerprint."""
        return orjson.dumps([self.format, self.mode, self.dry_run, self.atomic])

    def params(self, file: str, who: Principal, place: Mapping[str, str]) -> ImportParams:
        """The import as its job keeps it: this form's choices, the uploaded file's key, the
        caller's policy and actor, and where the file was put."""
        fields = (self.format, self.mode, self.dry_run, self.atomic)
        return ImportParams(*fields, file, who.policy, who.actor, place)

    def fault(self, head: bytes) -> str | None:
        """What is wrong with the file, given its first bytes, if anything."""
        if head == b"":
            return "is empty"
        if self.format == "xlsx" and head != XLSX_MAGIC:
            return "is not an xlsx workbook"
        return None


def _flag(name: str, raw: Any, errors: Errors) -> bool:
    value = "" if raw is None else str(raw).strip().lower()
    if value not in _TRUE + _FALSE:
        errors.append((name, "must be true or false"))
    return value in _TRUE


def _format(upload: UploadFile, raw: Any, errors: Errors) -> str:
    if raw:
        if raw not in FORMATS:
            errors.append(("format", f"must be one of {', '.join(FORMATS)}"))
        return str(raw)
    found = format_of(upload.filename or "")
    if found is None:
        endings = ", ".join([*EXTENSIONS, *GZIP_EXTENSIONS])
        errors.append(("format", f"give it, or a file name ending in {endings}"))
    return found or ""
