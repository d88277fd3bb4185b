"""Reading the content folder into validated, in-memory objects (no database)."""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from catalog.schema import ExerciseMeta, Guide
from content.errors import Problem
from content.reader import NUL_PROBLEM, parse, read_text, read_yaml, relative
from qa.schema import Bank

BANKS_DIR = "question-banks"
EXERCISE_FILES = ("exercise.yaml", "prompt.md", "guide.yaml")
IGNORED_PARTS = {"__pycache__", ".pytest_cache"}


@dataclass(frozen=True)
class ExerciseFolder:
    slug: str
    meta: ExerciseMeta
    guide: Guide
    prompt: str
    files: dict[str, str] = field(default_factory=dict)  # the code side, path -> text
    content_hash: str = ""


@dataclass(frozen=True)
class BankFile:
    bank: Bank
    content_hash: str


def _ignored(path: Path, folder: Path) -> bool:
    parts = path.relative_to(folder).parts
    return any(p in IGNORED_PARTS or p.startswith(".") for p in parts) or path.suffix == ".pyc"


def folder_files(folder: Path) -> list[Path]:
    """Every file of an exercise folder that belongs to its content, in a stable order."""
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and not _ignored(p, folder)
    )


def hash_files(folder: Path, paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def read_exercise(folder: Path, root: Path, problems: list[Problem]) -> ExerciseFolder | None:
    before = len(problems)
    meta_name = relative(folder / "exercise.yaml", root)
    meta_data = read_yaml(folder / "exercise.yaml", root, problems)
    meta = parse(ExerciseMeta, meta_data, meta_name, problems) if meta_data is not None else None
    if meta is not None and meta.slug != folder.name:
        problems.append(
            Problem(meta_name, "slug", f"must equal the folder name {folder.name!r}, "
                                       f"got {meta.slug!r}")
        )
    guide_name = relative(folder / "guide.yaml", root)
    guide_data = read_yaml(folder / "guide.yaml", root, problems)
    guide = parse(Guide, guide_data, guide_name, problems) if guide_data is not None else None
    prompt = read_text(folder / "prompt.md", root, problems)

    paths = folder_files(folder)
    files: dict[str, str] = {}
    for path in paths:
        rel = path.relative_to(folder).as_posix()
        if rel in EXERCISE_FILES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(Problem(relative(path, root), "", "not valid UTF-8 text"))
            continue
        if "\x00" in text:
            problems.append(Problem(relative(path, root), "", NUL_PROBLEM))
            continue
        files[rel] = text
    if len(problems) > before or meta is None or guide is None or prompt is None:
        return None
    return ExerciseFolder(
        slug=folder.name, meta=meta, guide=guide, prompt=prompt, files=files,
        content_hash=hash_files(folder, paths),
    )


def read_bank(path: Path, root: Path, problems: list[Problem]) -> BankFile | None:
    name = relative(path, root)
    data = read_yaml(path, root, problems)
    if data is None:
        return None
    bank = parse(Bank, data, name, problems)
    if bank is None:
        return None
    if bank.slug != path.stem:
        problems.append(
            Problem(name, "slug", f"must equal the file name {path.stem!r}, got {bank.slug!r}")
        )
        return None
    return BankFile(bank=bank, content_hash=hashlib.sha256(path.read_bytes()).hexdigest())


def read_content(root: Path) -> tuple[list[ExerciseFolder], list[BankFile], list[Problem]]:
    """Read and validate everything under `root`; report every problem, not just the first."""
    problems: list[Problem] = []
    if not root.is_dir():
        return [], [], [Problem(str(root), "", "content folder does not exist")]
    exercises = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if folder.name == BANKS_DIR or folder.name.startswith((".", "_")):
            continue
        exercise = read_exercise(folder, root, problems)
        if exercise is not None:
            exercises.append(exercise)
    banks = []
    banks_dir = root / BANKS_DIR
    if banks_dir.is_dir():
        for path in sorted(banks_dir.glob("*.yaml")):
            bank = read_bank(path, root, problems)
            if bank is not None:
                banks.append(bank)
    return exercises, banks, problems
