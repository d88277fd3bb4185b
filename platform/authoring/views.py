"""The authoring area: exercises (drafts, code, validation, publishing, history, export)."""

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from authoring import selectors, services
from authoring.details_form import apply_op, bind, read_post
from authoring.folder import MAX_ARCHIVE_BYTES, archive
from authoring.models import ExerciseDraft, Validation
from authoring.permissions import author_required
from authoring.validation import EXAMPLE_VERDICTS, REQUIRED
from catalog.models import Exercise
from content.markdown import render_markdown

CODE_ORDER = ("starter.py", "solution.py", "grader.py")


@author_required
def index(request):
    return render(request, "authoring/index.html", {"rows": selectors.exercise_rows()})


@author_required
def exercise_new(request):
    context = {"slug": "", "title": ""}
    if request.method == "POST":
        context = {"slug": request.POST.get("slug", ""), "title": request.POST.get("title", "")}
        try:
            draft = services.draft_create(slug=context["slug"], title=context["title"],
                                          user=request.user)
        except services.Refused as exc:
            context["error"] = exc.message
        else:
            messages.success(request, "Draft created. Fill in the details; the code side "
                                      "starts from a small working example to adapt.")
            return redirect("authoring:details", slug=draft.slug)
    return render(request, "authoring/new.html", context)


@author_required
def exercise_import(request):
    context = {"max_mib": MAX_ARCHIVE_BYTES // 1024 // 1024}
    if request.method == "POST":
        upload = request.FILES.get("archive")
        if upload is None:
            context["error"] = "Choose a .zip archive holding one folder <slug>/."
        elif upload.size > MAX_ARCHIVE_BYTES:
            context["error"] = (f"The archive is {upload.size / 1024 / 1024:.1f} MiB; at most "
                                f"{context['max_mib']} MiB can be imported.")
        else:
            try:
                draft = services.draft_import(data=upload.read(), user=request.user,
                                              replace=request.POST.get("replace") == "1")
            except services.Refused as exc:
                context["error"] = exc.message
                context["problems"] = [str(p) for p in exc.problems]
            else:
                messages.success(request, f"Imported {draft.slug} into its draft. Validate it, "
                                          "then publish.")
                return redirect("authoring:draft", slug=draft.slug)
    return render(request, "authoring/import.html", context)


@author_required
@require_POST
def preview(request):
    """Markdown -> sanitized HTML, exactly as interviewers and candidates will see it."""
    return HttpResponse(render_markdown(request.POST.get("text", "")[:100_000]))


# -- one exercise --------------------------------------------------------------------


def _files_view(draft: ExerciseDraft, state) -> list[dict]:
    expectations = {}
    validation = state.latest_validation
    for part in validation.parts.all() if validation else []:
        expectations[part.file] = part
    order = [p for p in CODE_ORDER if p in draft.files] + sorted(
        p for p in draft.files if p not in CODE_ORDER)
    problems = {p.file for p in state.problems}
    return [
        {"path": path, "lines": draft.files[path].count("\n"), "required": path in REQUIRED,
         "has_problem": path in problems}
        for path in order
    ]


def _draft_context(draft: ExerciseDraft) -> dict:
    state = selectors.draft_state(draft)
    return {
        "draft": draft,
        "next_number": selectors.next_version_number(draft.slug),
        "state": state,
        "files": _files_view(draft, state),
        "validation": state.latest_validation,
        "verdicts": EXAMPLE_VERDICTS,
    }


@author_required
def draft(request, slug):
    current = ExerciseDraft.objects.select_related("based_on", "exercise").filter(
        slug=slug).first()
    if current is None:
        exercise = get_object_or_404(Exercise, slug=slug)
        return render(request, "authoring/exercise.html", {
            "exercise": exercise, "versions": selectors.versions(exercise)})
    return render(request, "authoring/draft.html", _draft_context(current))


@author_required
@require_POST
def draft_start(request, slug):
    exercise = get_object_or_404(Exercise, slug=slug)
    try:
        services.draft_for_exercise(exercise=exercise, user=request.user)
    except services.Refused as exc:
        messages.error(request, exc.message)
    return redirect("authoring:draft", slug=slug)


@author_required
def details(request, slug):
    current = selectors.draft_get(slug)
    base = services.details_hash(current)
    error = ""
    if request.method == "POST":
        meta, prompt, guide = read_post(request.POST)
        op = request.POST.get("op", "save")
        anchor = apply_op(guide, op) if op != "save" else ""
        try:
            current = services.draft_save_details(
                draft=current, meta=meta, prompt=prompt, guide=guide,
                base=request.POST.get("base", ""), user=request.user)
        except services.DraftConflict as exc:
            error = exc.message
            state = selectors.draft_state(current)
            form = bind({"slug": slug, **meta}, prompt, guide, {})
            return render(request, "authoring/details.html", {
                "draft": current, "state": state, "form": form, "base": base,
                "error": error}, status=409)
        url = reverse("authoring:details", args=[slug])
        if op == "save":
            messages.success(request, "Saved.")
            return redirect(url)
        return redirect(f"{url}#{anchor}" if anchor else url)
    state = selectors.draft_state(current)
    form = bind(current.meta, current.prompt, current.guide, state.errors)
    return render(request, "authoring/details.html", {
        "draft": current, "state": state, "form": form, "base": base})


@author_required
def file_edit(request, slug, path):
    current = selectors.draft_get(slug)
    if path not in current.files:
        raise Http404("No such file in this draft")
    context = {"draft": current, "path": path, "text": current.files[path],
               "base": services.file_hash(current, path), "required": path in REQUIRED}
    if request.method == "POST":
        text = request.POST.get("text", "")
        try:
            services.draft_save_file(draft=current, path=path, text=text,
                                     base=request.POST.get("base", ""), user=request.user)
        except services.Refused as exc:
            context.update(text=text, error=exc.message)
            return render(request, "authoring/file.html", context, status=409)
        messages.success(request, f"Saved {path}.")
        return redirect("authoring:file", slug=slug, path=path)
    state = selectors.draft_state(current)
    context["problems"] = [p for p in state.problems if p.file == path]
    return render(request, "authoring/file.html", context)


@author_required
@require_POST
def file_add(request, slug):
    current = selectors.draft_get(slug)
    try:
        if request.POST.get("kind") == "example":
            current, path = services.draft_add_example(
                draft=current, name=request.POST.get("name", ""),
                title=request.POST.get("title", ""), expect=request.POST.get("expect", ""),
                failing=request.POST.get("failing", ""), user=request.user)
        else:
            path = request.POST.get("path", "").strip()
            current = services.draft_add_file(draft=current, path=path, text="",
                                              user=request.user)
    except services.Refused as exc:
        messages.error(request, exc.message)
        return redirect(reverse("authoring:draft", args=[slug]) + "#files")
    return redirect("authoring:file", slug=slug, path=path)


@author_required
@require_POST
def file_delete(request, slug, path):
    current = selectors.draft_get(slug)
    try:
        services.draft_delete_file(draft=current, path=path, user=request.user)
    except services.Refused as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Deleted {path}.")
    return redirect(reverse("authoring:draft", args=[slug]) + "#files")


def _validation_partial(request, current: ExerciseDraft, status: int = 200) -> HttpResponse:
    return render(request, "authoring/draft.html#validation", _draft_context(current),
                  status=status)


@author_required
@require_POST
def validate(request, slug):
    current = selectors.draft_get(slug)
    try:
        services.validation_request(draft=current, user=request.user)
    except services.Refused as exc:
        context = {**_draft_context(current), "refusal": exc.message,
                   "refusal_problems": selectors.shown(exc.problems, slug)}
        if request.htmx:
            return render(request, "authoring/draft.html#validation", context)
        return render(request, "authoring/draft.html", context, status=400)
    if request.htmx:
        return _validation_partial(request, current)
    return redirect(reverse("authoring:draft", args=[slug]) + "#validation")


@author_required
def validation_status(request, slug, pk):
    """Polled while a validation runs (recovery is Celery beat's job, never a GET's)."""
    current = selectors.draft_get(slug)
    get_object_or_404(Validation, pk=pk, draft=current)
    return _validation_partial(request, current)


@author_required
@require_POST
def publish(request, slug):
    current = selectors.draft_get(slug)
    try:
        version = services.draft_publish(draft=current, user=request.user)
    except services.Refused as exc:
        context = {**_draft_context(current), "refusal": exc.message,
                   "refusal_problems": exc.problems}
        return render(request, "authoring/draft.html", context, status=400)
    messages.success(request, f"Published v{version.number}. New sessions get it; sessions "
                              "already created keep the version they started with.")
    return redirect("authoring:draft", slug=slug)


@author_required
@require_POST
def discard(request, slug):
    current = selectors.draft_get(slug)
    services.draft_discard(draft=current)
    messages.success(request, f"Discarded the draft of {slug}. Published versions are kept.")
    if Exercise.objects.filter(slug=slug).exists():
        return redirect("authoring:draft", slug=slug)
    return redirect("authoring:index")


@author_required
def history(request, slug):
    exercise = Exercise.objects.filter(slug=slug).first()
    current = ExerciseDraft.objects.filter(slug=slug).first()
    if exercise is None and current is None:
        raise Http404("No such exercise")
    versions = list(selectors.versions(exercise)) if exercise else []
    newer = selectors.repository_newer(exercise=exercise).get(exercise.pk) if exercise else None
    return render(request, "authoring/history.html", {
        "slug": slug, "exercise": exercise, "draft": current, "versions": versions,
        "repository_version": newer})


@author_required
def diff(request, slug):
    newest = None
    exercise = Exercise.objects.filter(slug=slug).first()
    if exercise and exercise.current_version:
        newest = f"v{exercise.current_version.number}"
    old_key = request.GET.get("from") or newest or "draft"
    new_key = request.GET.get("to") or "draft"
    old, new = selectors.side_files(slug, old_key), selectors.side_files(slug, new_key)
    if old is None or new is None:
        raise Http404("No such version")
    return render(request, "authoring/diff.html", {
        "slug": slug, "old_label": old[0], "new_label": new[0],
        "diffs": selectors.files_diff(old[1], new[1]),
    })


@author_required
def export(request, slug):
    source = request.GET.get("source", "draft")
    side = selectors.side_files(slug, source)
    if side is None:
        raise Http404("Nothing to export")
    label, files = side
    name = f"{slug}.zip" if label == "draft" else f"{slug}-{label}.zip"
    response = HttpResponse(archive(slug, files), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
