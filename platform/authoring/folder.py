"""The `exercises/<slug>/` folder format, for drafts and versions: files out, archives in.

Export turns a draft or a version into the exact files of its folder (exercise.yaml,
prompt.md, guide.yaml and the code side), with a deterministic YAML dump, and packs
them into a zip of `<slug>/...` that is byte-for-byte the same for the same content.
Import unpacks an archive (refusing unsafe paths, links and oversized archives) and
reads it with `content.folders.read_exercise`, the reader `sync_content` uses, so the
browser and the files can never disagree about what is valid or what a folder hashes to.
"""

import io
import re
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml
from pydantic import ValidationError

from catalog.schema import ExerciseMeta, Guide
from content.errors import Problem
from content.fields import SLUG_PATTERN
from content.folders import EXERCISE_FILES, ExerciseFolder, folder_files, hash_files, read_exercise

META_FILE, PROMPT_FILE, GUIDE_FILE = "exercise.yaml", "prompt.md", "guide.yaml"
MAX_ARCHIVE_BYTES = 2 * 1024 * 1024  # the upload itself
MAX_UNPACKED_BYTES = 8 * 1024 * 1024  # everything in it, uncompressed
MAX_ENTRIES = 300
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed: the same content gives the same archive bytes
# A file of the code side: plain names, no hidden parts, nothing the folder reader skips.
FILE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*){0,3}$")
MAX_PATH_LENGTH = 120


class ArchiveError(Exception):
    """The archive cannot be imported; the message says why, for the person uploading."""


# -- YAML ----------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, keys in schema order, multi-line text as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(data) -> str:
    return yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
        width=1_000_000, indent=2,
    )


# -- data -> files ------------------------------------------------------------


def canonical_meta(meta) -> dict:
    """exercise.yaml's mapping: normalized when valid, as typed when not (so an invalid
    draft can still be exported, and shows its problems when read back)."""
    try:
        return ExerciseMeta.model_validate(meta).model_dump(mode="json")
    except ValidationError:
        return meta if isinstance(meta, dict) else {}


def canonical_guide(guide) -> dict:
    try:
        return Guide.model_validate(guide).model_dump(mode="json", exclude_none=True)
    except ValidationError:
        return guide if isinstance(guide, dict) else {}


def folder_bytes(*, meta, prompt: str, guide, files: dict[str, str]) -> dict[str, bytes]:
    """Every file of the folder, path -> bytes."""
    out = {
        META_FILE: dump_yaml(canonical_meta(meta)).encode(),
        PROMPT_FILE: prompt.encode(),
        GUIDE_FILE: dump_yaml(canonical_guide(guide)).encode(),
    }
    for path, text in files.items():
        out[path] = text.encode()
    return dict(sorted(out.items()))


def draft_folder(draft) -> dict[str, bytes]:
    return folder_bytes(meta=draft.meta, prompt=draft.prompt, guide=draft.guide, files=draft.files)


def version_meta(version) -> dict:
    return {
        "slug": version.exercise.slug,
        "title": version.title,
        "summary": version.summary,
        "difficulty": version.difficulty,
        "time_minutes": version.time_minutes,
        "tags": list(version.tags),
        "track": version.track,
    }


def version_folder(version) -> dict[str, bytes]:
    return folder_bytes(
        meta=version_meta(version), prompt=version.prompt, guide=version.guide,
        files=version.files,
    )


def folder_data(folder: ExerciseFolder) -> dict:
    """A validated folder as a draft's fields."""
    return {
        "meta": folder.meta.model_dump(mode="json"),
        "prompt": folder.prompt,
        "guide": folder.guide.model_dump(mode="json", exclude_none=True),
        "files": dict(sorted(folder.files.items())),
    }


# -- reading files the way sync_content does -----------------------------------------


@dataclass
class ReadResult:
    folder: ExerciseFolder | None
    problems: list[Problem] = field(default_factory=list)
    content_hash: str = ""


@contextmanager
def written(slug: str, files: dict[str, bytes]) -> Iterator[tuple[Path, Path]]:
    """The files written as `<tmp>/exercises/<slug>/...`; yields (root, folder)."""
    with tempfile.TemporaryDirectory(prefix="overlap-authoring-") as tmp:
        root = Path(tmp) / "exercises"
        folder = root / slug
        folder.mkdir(parents=True)
        for path, data in files.items():
            target = folder.joinpath(*safe_parts(path))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        yield root, folder


def read_folder(slug: str, files: dict[str, bytes]) -> ReadResult:
    """Validate files exactly as `sync_content` would, and hash them the same way."""
    with written(slug, files) as (root, folder):
        problems: list[Problem] = []
        exercise = read_exercise(folder, root, problems)
        content_hash = hash_files(folder, folder_files(folder))
    return ReadResult(exercise, problems, content_hash)


# -- paths -----------------------------------------------------------------------


def safe_parts(path: str) -> tuple[str, ...]:
    """The parts of a relative path inside a folder; ValueError for anything else."""
    if not path or "\\" in path or "\0" in path:
        raise ValueError(f"unsafe path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError(f"unsafe path {path!r}")
    return pure.parts


def code_path_problem(path: str) -> str | None:
    """Why `path` cannot be a file of the code side, or None."""
    if len(path) > MAX_PATH_LENGTH:
        return f"is longer than {MAX_PATH_LENGTH} characters"
    if path in EXERCISE_FILES:
        return f"{path} is edited in the exercise's details, not as a code file"
    if not FILE_PATH.match(path) or ".." in path.split("/"):
        return ("must be a relative path of plain names (letters, digits, _ . -), "
                "like examples/race_no_lock.py")
    if "__pycache__" in path.split("/") or path.endswith(".pyc"):
        return "compiled Python files are not content"
    return None


# -- archives ----------------------------------------------------------------------


def archive(slug: str, files: dict[str, bytes]) -> bytes:
    """A zip of `<slug>/<path>` entries, in path order, with fixed dates and modes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(files):
            info = zipfile.ZipInfo(f"{slug}/{path}", date_time=ZIP_DATE)
            info.create_system = 3  # unix, so the mode below is read back as such
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[path], compresslevel=9)
    return buffer.getvalue()


def _skipped(parts: tuple[str, ...]) -> bool:
    """Entries an archiver adds that are no content (the folder reader skips them too)."""
    return (
        parts[0] == "__MACOSX"
        or any(p.startswith(".") or p == "__pycache__" for p in parts)
        or parts[-1].endswith(".pyc")
    )


def unpack(data: bytes) -> tuple[str, dict[str, bytes]]:
    """(slug, path -> bytes) of an uploaded `<slug>/...` zip; ArchiveError names the problem."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise ArchiveError(
            f"The archive is {len(data) / 1024 / 1024:.1f} MiB; at most "
            f"{MAX_ARCHIVE_BYTES // 1024 // 1024} MiB can be imported."
        )
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        entries = zf.infolist()
    except (zipfile.BadZipFile, OSError, EOFError):
        raise ArchiveError("The file is not a zip archive.") from None
    if len(entries) > MAX_ENTRIES:
        raise ArchiveError(f"The archive has {len(entries)} entries; at most {MAX_ENTRIES}.")
    slug = None
    files: dict[str, bytes] = {}
    total = 0
    for entry in entries:
        name = entry.filename
        try:
            parts = safe_parts(name.rstrip("/") if entry.is_dir() else name)
        except ValueError:
            raise ArchiveError(
                f"{name!r}: unsafe path (absolute, '..' or backslashes); nothing was imported."
            ) from None
        if ":" in parts[0]:
            raise ArchiveError(f"{name!r}: unsafe path (a drive name); nothing was imported.")
        mode = entry.external_attr >> 16
        if entry.create_system == 3 and stat.S_ISLNK(mode):
            raise ArchiveError(f"{name!r} is a symbolic link; an exercise is plain files only.")
        if entry.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise ArchiveError(f"{name!r} is not a regular file.")
        if _skipped(parts):
            continue
        if slug is None:
            slug = parts[0]
        elif parts[0] != slug:
            raise ArchiveError(
                f"The archive must hold one folder <slug>/; found {slug!r} and {parts[0]!r}."
            )
        if entry.is_dir():
            continue
        if len(parts) < 2:
            raise ArchiveError(f"{name!r} is outside the exercise folder <slug>/.")
        path = "/".join(parts[1:])
        problem = None if path in EXERCISE_FILES else code_path_problem(path)
        if problem:
            raise ArchiveError(f"{name!r}: the path {problem}.")
        with zf.open(entry) as handle:
            content = handle.read(MAX_UNPACKED_BYTES - total + 1)
        total += len(content)
        if total > MAX_UNPACKED_BYTES:
            raise ArchiveError(
                f"The archive unpacks to more than {MAX_UNPACKED_BYTES // 1024 // 1024} MiB."
            )
        files[path] = content
    if slug is None or not files:
        raise ArchiveError("The archive is empty; it must hold a folder <slug>/ with the files.")
    if not re.match(SLUG_PATTERN, slug):
        raise ArchiveError(
            f"The folder name {slug!r} is not a slug (lower-case letters, digits and hyphens)."
        )
    return slug, files
