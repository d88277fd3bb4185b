"""Question banks in the browser: add, edit, tag, retire; interviewers see it at once."""

import re

import pytest
import yaml

from content.folders import read_bank
from qa.models import Question, QuestionBank

pytest_plugins = ["tests.platform.authoring_fixtures"]
pytestmark = pytest.mark.django_db

BANK = "distributed-training"


def _search(client, words: str) -> str:
    return client.get("/questions/search/", {"q": words}).content.decode()


def test_an_added_question_is_found_by_interviewers_at_once(author_client, interviewer_client,
                                                            synced):
    response = author_client.post(f"/authoring/banks/{BANK}/new/question/", {
        "key": "backup-workers-quorum", "topic": "Stragglers",
        "tags": "stragglers, backup-workers",
        "question": "Why wait for **N of N+b** gradients?",
        "answer": "The slowest worker stops setting the pace."})
    assert response.status_code == 302
    question = Question.objects.get(bank__slug=BANK, key="backup-workers-quorum")
    assert question.tags == ["stragglers", "backup-workers"] and question.kind == "question"
    found = _search(interviewer_client, "N+b")
    assert "Why wait for <strong>N of N+b</strong> gradients?" in found


def test_a_challenge_keeps_its_scenario_root_cause_and_solution(author_client, synced):
    author_client.post(f"/authoring/banks/{BANK}/new/challenge/", {
        "key": "checkpoint-stall", "topic": "Checkpointing", "tags": "checkpointing",
        "title": "Training stalls every 1,000 steps",
        "scenario": "GPU utilisation drops to zero for 40 s.",
        "root_cause": "Checkpoints are written synchronously.",
        "solution": "Snapshot to host memory, write in the background."})
    q = Question.objects.get(key="checkpoint-stall")
    assert (q.kind, q.text, q.scenario, q.root_cause, q.answer) == (
        "challenge", "Training stalls every 1,000 steps", "GPU utilisation drops to zero for 40 s.",
        "Checkpoints are written synchronously.",
        "Snapshot to host memory, write in the background.")


def test_editing_keeps_the_key_and_changes_what_interviewers_read(author_client,
                                                                  interviewer_client, synced):
    question = Question.objects.filter(bank__slug=BANK, kind="question").first()
    response = author_client.post(f"/authoring/banks/{BANK}/q/{question.key}/", {
        "key": "renamed-key", "topic": question.topic, "tags": "ring, zebra-tag",
        "question": "Explain the zebra all-reduce.", "answer": question.answer})
    assert response.status_code == 302
    question.refresh_from_db()
    assert question.key != "renamed-key" and question.text == "Explain the zebra all-reduce."
    assert question.tags == ["ring", "zebra-tag"]
    assert "Explain the zebra all-reduce." in _search(interviewer_client, "zebra")


def _count(html: str) -> int:
    return int(re.search(r"(\d+) results?", html).group(1))


def test_retiring_hides_a_question_from_search_and_restoring_brings_it_back(
        author_client, interviewer_client, synced):
    question = Question.objects.filter(bank__slug=BANK, kind="question").first()
    before = _count(_search(interviewer_client, question.text))
    assert before >= 1
    author_client.post(f"/authoring/banks/{BANK}/q/{question.key}/retire/", {"retired": "1"})
    assert Question.objects.get(pk=question.pk).retired
    assert _count(_search(interviewer_client, question.text)) == before - 1
    author_client.post(f"/authoring/banks/{BANK}/q/{question.key}/retire/", {"retired": "0"})
    assert _count(_search(interviewer_client, question.text)) == before


def test_bad_questions_are_named_and_not_saved(author_client, synced):
    before = Question.objects.count()
    response = author_client.post(f"/authoring/banks/{BANK}/new/question/", {
        "key": "Bad Key", "topic": "", "tags": "ok, Not-OK", "question": "  ", "answer": "a"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "key: must be lower-case letters, digits and hyphens" in html
    assert "topic: must not be empty" in html and "question: must not be empty" in html
    assert "tags: must be lower-case" in html
    assert Question.objects.count() == before
    existing = Question.objects.filter(bank__slug=BANK).first().key
    dup = author_client.post(f"/authoring/banks/{BANK}/new/question/", {
        "key": existing, "topic": "t", "question": "q", "answer": "a"}).content.decode()
    assert "already used in this bank" in dup


def test_a_new_bank_and_its_export_load_back_through_sync_content(author_client, tmp_path, db):
    author_client.post("/authoring/banks/new/", {
        "slug": "stragglers", "title": "Stragglers", "description": "Slow workers."})
    author_client.post("/authoring/banks/stragglers/new/question/", {
        "key": "quorum", "topic": "Backup workers", "tags": "stragglers",
        "question": "N of N+b?", "answer": "Drop the slowest."})
    author_client.post("/authoring/banks/stragglers/new/question/", {
        "key": "old", "topic": "Misc", "question": "Old?", "answer": "Yes."})
    author_client.post("/authoring/banks/stragglers/q/old/retire/", {"retired": "1"})
    response = author_client.get("/authoring/banks/stragglers/export/")
    text = response.content.decode()
    assert yaml.safe_load(text)["questions"][0]["key"] == "quorum"
    path = tmp_path / "exercises" / "question-banks" / "stragglers.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    problems = []
    bank = read_bank(path, tmp_path / "exercises", problems)
    assert problems == []
    assert [q.key for q in bank.bank.questions] == ["quorum"]  # retired ones are left out
    assert QuestionBank.objects.get(slug="stragglers").title == "Stragglers"
