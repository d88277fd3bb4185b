import pytest

from qa.models import Question

pytestmark = pytest.mark.django_db


def test_bank_list_shows_both_banks(staff_client, synced):
    page = staff_client.get("/questions/").content.decode()
    assert "/questions/distributed-training/" in page
    assert "/questions/efficient-training/" in page


def test_live_search_matches_any_field_case_insensitively(staff_client, synced):
    response = staff_client.get("/questions/search/?q=ring+all-reduce",
                                headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html
    ring = Question.objects.get(bank__slug="distributed-training",
                                text__icontains="ring all-reduce")
    assert ring.text.split()[0] in html
    assert "No question matches" not in html


def test_search_can_stay_within_one_bank(staff_client, synced):
    everywhere = staff_client.get("/questions/search/?q=ZeRO").content.decode()
    assert "Day 24" in everywhere or "distributed" in everywhere.lower()
    only_efficient = staff_client.get("/questions/search/?q=ZeRO&bank=efficient-training")
    expected = Question.objects.filter(
        bank__slug="efficient-training", retired=False
    ).filter(text__icontains="zero") | Question.objects.filter(
        bank__slug="efficient-training", retired=False, answer__icontains="zero")
    assert f"{expected.distinct().count()} result" in only_efficient.content.decode()


def test_search_with_no_match_says_so(staff_client, synced):
    html = staff_client.get("/questions/search/?q=kubernetes-operator-xyz").content.decode()
    assert "No question matches." in html
    assert "0 results" in html


def test_bank_page_browses_by_topic(staff_client, synced):
    topic = Question.objects.filter(bank__slug="efficient-training").first().topic
    page = staff_client.get("/questions/efficient-training/", {"topic": topic}).content.decode()
    count = Question.objects.filter(bank__slug="efficient-training", topic=topic).count()
    assert f"{count} result" in page


def test_challenges_show_scenario_root_cause_and_solution(staff_client, synced):
    page = staff_client.get("/questions/efficient-training/").content.decode()
    assert page.count("badge challenge") == 5
    assert "Root cause" in page and "Solution" in page
    assert "Checklist" in page


def test_retired_questions_are_not_shown(staff_client, synced):
    question = Question.objects.get(bank__slug="distributed-training", position=0,
                                    kind="question")
    shown = Question.objects.filter(bank__slug="distributed-training", kind="question",
                                    retired=False).count()
    question.retired = True
    question.save()
    page = staff_client.get("/questions/distributed-training/").content.decode()
    assert f"{shown - 1} results" in page
