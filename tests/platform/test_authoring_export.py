"""Export and import: the exercises/<slug>/ format, byte-identical round trips, safe archives."""

import io
import shutil
import stat
import zipfile

import pytest

from authoring import services
from authoring.folder import archive, draft_folder, read_folder, unpack, version_folder
from authoring.models import ExerciseDraft
from catalog.models import Exercise, ExerciseVersion
from content.services import content_sync

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db


def _export(client, slug: str, source: str = "draft") -> bytes:
    response = client.get(f"/authoring/exercises/{slug}/export/?source={source}")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    return response.content


def _import(client, data: bytes, **extra):
    upload = io.BytesIO(data)
    upload.name = "exercise.zip"
    return client.post("/authoring/import/", {"archive": upload, **extra})


def _zip(entries: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (modes or {}).get(name, stat.S_IFREG | 0o644) << 16
            zf.writestr(info, data)
    return buffer.getvalue()


def test_export_holds_the_folder_in_the_exercises_format(author_client, synced):
    data = _export(author_client, "async-parameter-server", "v1")
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    for name in ("exercise.yaml", "prompt.md", "guide.yaml", "starter.py", "solution.py",
                 "grader.py"):
        assert f"async-parameter-server/{name}" in names
    assert any(n.startswith("async-parameter-server/examples/") for n in names)


def test_export_import_export_is_byte_identical(author_client, synced):
    first = _export(author_client, "pipeline-model-parallel", "v1")
    response = _import(author_client, first)
    assert response.status_code == 302
    second = _export(author_client, "pipeline-model-parallel", "draft")
    assert second == first
    # ...and importing it again changes nothing either.
    _import(author_client, second)
    assert _export(author_client, "pipeline-model-parallel", "draft") == first


def test_an_imported_real_exercise_is_the_same_version_data(author_client, synced):
    version = Exercise.objects.get(slug="async-gradient-accumulation").current_version
    _import(author_client, _export(author_client, "async-gradient-accumulation", "v1"))
    draft = ExerciseDraft.objects.get(slug="async-gradient-accumulation")
    assert draft.files == version.files
    assert draft.prompt == version.prompt
    assert read_folder(draft.slug, draft_folder(draft)).folder.guide.model_dump(mode="json") \
        == version.guide


def test_a_folder_exported_from_the_browser_loads_back_the_same(author, valid_draft, tmp_path,
                                                                fake_sandbox):
    from tests.platform.authoring_fixtures import run_validation

    validation = services.validation_request(draft=valid_draft, user=author)
    run_validation(validation.pk)
    published = services.draft_publish(draft=valid_draft, user=author)
    # The exported folder, unpacked where sync_content reads...
    slug, files = unpack(archive(valid_draft.slug, version_folder(published)))
    root = tmp_path / "exercises"
    for path, data in files.items():
        target = root / slug / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    # ...is the very version the browser published: same hash, nothing new stored,
    report = content_sync(root=root)
    assert report.lines == [f"exercise {slug}: unchanged"]
    assert ExerciseVersion.objects.filter(exercise__slug=slug).count() == 1
    # and a fresh database loads it to the same data.
    ExerciseVersion.objects.filter(exercise__slug=slug).delete()
    Exercise.objects.filter(slug=slug).delete()
    content_sync(root=root)
    loaded = Exercise.objects.get(slug=slug).current_version
    for name in ("title", "summary", "difficulty", "time_minutes", "track", "tags", "prompt",
                 "guide", "files", "content_hash"):
        assert getattr(loaded, name) == getattr(published, name), name


def test_a_hand_written_exercise_exported_and_synced_back_loads_the_same_data(
        author_client, synced, content_dir):
    before = Exercise.objects.get(slug="async-parameter-server").current_version
    slug, files = unpack(_export(author_client, "async-parameter-server", "v1"))
    shutil.rmtree(content_dir / slug)
    for path, data in files.items():
        target = content_dir / slug / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    content_sync(root=content_dir)
    after = Exercise.objects.get(slug=slug).current_version
    # The export's YAML is formatted canonically, so the files differ from the hand-written
    # ones (a new version number), but what they say is the same, field for field.
    for name in ("title", "summary", "difficulty", "time_minutes", "track", "tags", "prompt",
                 "guide", "files"):
        assert getattr(after, name) == getattr(before, name), name


@pytest.mark.parametrize(("entries", "message"), [
    ({"/etc/passwd": b"x"}, "unsafe path"),
    ({"ex/../../evil.py": b"x"}, "unsafe path"),
    ({"ex\\evil.py": b"x"}, "unsafe path"),
    ({"a/exercise.yaml": b"x", "b/exercise.yaml": b"y"}, "one folder"),
    ({"exercise.yaml": b"x"}, "outside the exercise folder"),
    ({"Bad Slug/exercise.yaml": b"x"}, "is not a slug"),
    ({}, "empty"),
])
def test_unsafe_archives_are_refused_and_nothing_is_imported(author_client, entries, message):
    response = _import(author_client, _zip(entries))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not ExerciseDraft.objects.exists()


def test_symlinks_are_refused(author_client):
    data = _zip({"ex/exercise.yaml": b"x", "ex/link": b"/etc/passwd"},
                {"ex/link": stat.S_IFLNK | 0o777})
    assert "symbolic link" in _import(author_client, data).content.decode()


def test_oversized_archives_are_refused(author_client, settings):
    from authoring import folder

    big = _zip({"ex/data.txt": b"0" * (folder.MAX_UNPACKED_BYTES + 10)})  # compresses well
    html = _import(author_client, big).content.decode()
    assert "unpacks to more than" in html
    assert not ExerciseDraft.objects.exists()


def test_not_a_zip_is_named(author_client):
    assert "not a zip archive" in _import(author_client, b"hello").content.decode()


def test_an_invalid_folder_is_refused_with_the_same_problems_as_sync(author_client, synced):
    slug, files = unpack(_export(author_client, "async-parameter-server", "v1"))
    files["guide.yaml"] = files["guide.yaml"].replace(b"score: 2", b"score: 1", 1)
    html = _import(author_client, archive(slug, files)).content.decode()
    assert "nothing was imported" in html
    assert ("exercises/async-parameter-server/guide.yaml: rubric[0].levels: Value error, level "
            "scores must be unique and ascending") in html
    assert not ExerciseDraft.objects.exists()


def test_import_never_overwrites_unpublished_work_unless_asked(author_client, author, synced):
    exported = _export(author_client, "async-parameter-server", "v1")
    draft = services.draft_for_exercise(exercise=Exercise.objects.get(
        slug="async-parameter-server"), user=author)
    draft.prompt = "Work in progress\n"
    draft.save()
    refused = _import(author_client, exported).content.decode()
    assert "unpublished changes" in refused
    assert ExerciseDraft.objects.get(pk=draft.pk).prompt == "Work in progress\n"
    _import(author_client, exported, replace="1")
    assert ExerciseDraft.objects.get(pk=draft.pk).prompt != "Work in progress\n"


@pytest.mark.parametrize("name", ["grader.py", "examples/bad.py", "prompt.md"])
def test_a_file_holding_a_nul_byte_is_refused_by_name(author_client, synced, name):
    """PostgreSQL cannot store a NUL in text: the file is named, not a server error."""
    slug, files = unpack(_export(author_client, "async-parameter-server", "v1"))
    files[name] = files.get(name, b"x = 1\n") + b"\x00tail\n"
    html = _import(author_client, archive(slug, files)).content.decode()
    assert "nothing was imported" in html
    assert name in html and "NUL" in html
    assert not ExerciseDraft.objects.exists()
