from django.http import Http404
from django.shortcuts import render

from catalog import selectors
from catalog.models import Exercise

CODE_FILE_ORDER = ("starter.py", "solution.py", "grader.py")


def exercise_list(request):
    tag = request.GET.get("tag", "")
    difficulty = request.GET.get("difficulty", "")
    context = {
        "exercises": selectors.exercise_list(tag=tag, difficulty=difficulty),
        "tags": selectors.tags_in_use(),
        "difficulties": Exercise.DIFFICULTIES,
        "selected_tag": tag,
        "selected_difficulty": difficulty,
    }
    template = "catalog/exercise_list.html"
    if request.htmx and not request.htmx.boosted:
        template += "#results"
    return render(request, template, context)


def exercise_detail(request, slug, number=None):
    version = selectors.exercise_version_get(slug=slug, number=number)
    files = version.files
    code_files = [name for name in CODE_FILE_ORDER if name in files] + sorted(
        name for name in files if name not in CODE_FILE_ORDER
    )
    context = {
        "version": version,
        "exercise": version.exercise,
        "guide": version.guide,
        "versions": version.exercise.versions.order_by("-number"),
        "code_files": [(name, files[name]) for name in code_files],
        "hint_count": len(version.guide["hints"]),
    }
    return render(request, "catalog/exercise_detail.html", context)


def exercise_hint(request, slug, number, index):
    """One progressive hint (1-based) with its expected answer, and the way to the next."""
    version = selectors.exercise_version_get(slug=slug, number=number)
    hints = version.guide["hints"]
    if not 1 <= index <= len(hints):
        raise Http404("No such hint")
    context = {
        "version": version,
        "hint": hints[index - 1],
        "index": index,
        "hint_count": len(hints),
    }
    return render(request, "catalog/exercise_detail.html#hint", context)
