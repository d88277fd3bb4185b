"""Q&A search is the database's own full-text search (qa/search.py): words are prefixes,
stemmed, hyphenated words also match joined ("allreduce" finds "Ring All-Reduce"), and
results are sanitized HTML. PostgreSQL here; SQLite's FTS5 (what `make run` uses) in a
process of its own with `make run`'s settings."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qa.models import Question
from qa.search import query_words, search

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _keys(query: str) -> list[str]:
    return [q.key for q in search(Question.objects.filter(retired=False), query)]


@pytest.mark.parametrize(("query", "key"), [
    ("allreduce", "ring-all-reduce"),      # joined: "All-Reduce" is indexed as "AllReduce" too
    ("all-reduce", "ring-all-reduce"),
    ("Ring All-Reduce", "ring-all-reduce"),
    ("stale", "sync-vs-async-sgd"),        # in the good answer: "gradients can be stale"
    ("stale gradients", "sync-vs-async-sgd"),
    ("gradient stale", "sync-vs-async-sgd"),  # any order, stemmed
    ("strag", "stragglers"),               # a prefix, while it is typed
    ("dataparallelism", "data-parallelism"),
])
def test_the_words_people_type_find_the_question(synced, query, key):
    assert key in _keys(query)


def test_the_best_match_comes_first_and_unrelated_questions_stay_out(synced):
    found = _keys("allreduce")
    assert found[0] == "ring-all-reduce"
    assert "nan-loss" not in found
    assert _keys("kubernetes-operator-xyz") == []


def test_query_syntax_cannot_be_written_through_the_search_box(synced):
    for query in ["a & b | !c", "stale:* <-> (", '"unbalanced', "NEAR(x y) OR *", "'; --"]:
        list(search(Question.objects.all(), query))  # no syntax error from either engine
    assert query_words("all-reduce & stale:*") == [("all", "reduce"), ("stale",)]


def test_only_common_words_or_none_leave_the_list_as_it_is(synced):
    live = Question.objects.filter(retired=False).count()
    assert len(_keys("")) == live
    assert len(_keys("what is")) == live  # stop words only: nothing to narrow by


def test_an_edited_question_is_found_by_its_new_text_at_once(synced):
    question = Question.objects.get(key="ring-all-reduce")
    Question.objects.filter(pk=question.pk).update(text="Explain the butterfly exchange.")
    assert _keys("butterfly") == ["ring-all-reduce"]


def test_the_qa_page_search_finds_allreduce_and_renders_markdown(staff_client, synced):
    html = staff_client.get("/questions/search/", {"q": "allreduce"},
                            headers={"HX-Request": "true"}).content.decode()
    assert "Explain Ring All-Reduce." in html
    assert "No question matches" not in html
    assert "**" not in html  # the answers' Markdown is rendered, not shown raw
    assert "<strong>" in html


def test_the_console_search_finds_answers_and_shows_sanitized_html(staff_client, live_session):
    question = Question.objects.get(key="sync-vs-async-sgd")
    Question.objects.filter(pk=question.pk).update(
        text="Is *asynchronous* SGD worth it? <script>alert(1)</script>")
    url = f"/sessions/{live_session.pk}/questions/"
    html = staff_client.get(url, {"q": "stale gradients"}).content.decode()
    assert "<em>asynchronous</em>" in html  # rendered, not "*asynchronous*"
    assert "<script>alert(1)" not in html  # sanitized
    assert "No question matches" not in html
    allreduce = staff_client.get(url, {"q": "allreduce"}).content.decode()
    assert "Explain Ring All-Reduce." in allreduce


def test_the_session_form_lists_question_titles_by_bank(staff_client, synced):
    page = staff_client.get("/sessions/new/").content.decode()
    picker = page[page.index('class="question-picker"'):]
    assert "Explain Ring All-Reduce." in picker
    assert "What is data parallelism?" in picker
    assert "distributed-training/" not in picker  # no "bank/key" slugs
    # Grouped by bank: each bank's questions under its title.
    distributed = picker.index("<legend>Distributed training</legend>")
    efficient = picker.index("<legend>Efficient training techniques</legend>")
    assert distributed < picker.index("Explain Ring All-Reduce.") < efficient
    assert efficient < picker.index("How does LoRA reduce the memory needed for training?")
    assert "Production challenge: " in picker[efficient:]


def test_no_qa_answer_reaches_the_candidate(client, staff_client, live_session):
    """Adding a question in the console never puts its good answer on the candidate's
    pages."""
    question = Question.objects.get(key="sync-vs-async-sgd")
    staff_client.post(f"/sessions/{live_session.pk}/questions/", {"question": question.pk})
    page = client.get(f"/c/{live_session.token}/").content.decode()
    assert "gradients can be stale" not in page and question.text not in page


SQLITE_SCRIPT = """
import json, django
django.setup()
from django.conf import settings
from django.core.management import call_command
from content.services import content_sync
from qa.models import Question
from qa.search import search
call_command("migrate", verbosity=0)
content_sync(root=settings.EXERCISES_DIR)
live = Question.objects.filter(retired=False)
keys = lambda q: [x.key for x in search(live, q)]
found = {q: keys(q) for q in ["allreduce", "all-reduce", "stale", "stale gradients", "strag",
                              "a & b | !c", '"NEAR(x', "zzzz"]}
ring = Question.objects.get(key="ring-all-reduce")
Question.objects.filter(pk=ring.pk).update(text="Explain the butterfly exchange.")
found["butterfly"] = keys("butterfly")
Question.objects.filter(pk=ring.pk).delete()
found["deleted"] = keys("butterfly")
from django.db import connection
print(json.dumps({"vendor": connection.vendor, "found": found}))
"""


@pytest.mark.slow
def test_sqlite_full_text_search_as_make_run_uses_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update(DEBUG="0", OVERLAP_VAR_DIR=str(tmp_path),
               OVERLAP_SECRET_KEY_FILE=str(tmp_path / "secret_key"),
               PYTHONPATH=f"{ROOT / 'platform'}:{ROOT}",
               DJANGO_SETTINGS_MODULE="overlap.settings")
    env.pop("SECRET_KEY", None)
    done = subprocess.run([sys.executable, "-c", SQLITE_SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    found = report["found"]
    assert report["vendor"] == "sqlite"
    assert found["allreduce"][0] == "ring-all-reduce"
    assert found["all-reduce"][0] == "ring-all-reduce"
    assert "sync-vs-async-sgd" in found["stale"]
    assert found["stale gradients"] == ["sync-vs-async-sgd"]
    assert "stragglers" in found["strag"]
    assert found['"NEAR(x'] == []  # query syntax is read as words, never as syntax
    assert found["zzzz"] == []
    # The index follows every write, .update() included (triggers), and deletions.
    assert found["butterfly"] == ["ring-all-reduce"]
    assert found["deleted"] == []
