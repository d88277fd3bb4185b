"""The scorecard: everything about a session, for the page, JSON and Markdown exports."""

import re

from interviews.integrity import signal_rows, signal_summary
from interviews.models import InterviewSession, Score
from interviews.selectors import interviewer_display_name, scores_by_key
from runs.labels import verdict_label


def _when(value) -> str:
    return value.isoformat(timespec="seconds") if value else ""


def _offset(session: InterviewSession, moment) -> str:
    if not (session.started_at and moment):
        return ""
    seconds = int((moment - session.started_at).total_seconds())
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def scorecard_build(session: InterviewSession, *, for_export: bool = False) -> dict:
    version = session.exercise_version
    guide = version.guide
    scores = scores_by_key(session)

    def entry(kind, key):
        found = scores.get((kind, key))
        return (found.score if found else None), (found.note if found else "")

    rubric = []
    for criterion in guide["rubric"]:
        score, note = entry(Score.RUBRIC, criterion["key"])
        labels = {level["score"]: level["label"] for level in criterion["levels"]}
        rubric.append({
            "key": criterion["key"], "title": criterion["title"], "score": score,
            "label": labels.get(score, ""), "max": max(labels), "note": note,
        })
    scored = [r for r in rubric if r["score"] is not None]
    followups = []
    for i, item in enumerate(guide["followups"]["questions"]):
        score, note = entry(Score.FOLLOWUP, str(i))
        followups.append({"question": item["question"], "good_answer": item["good_answer"],
                          "score": score, "note": note})
    bank_questions = []
    for sq in session.bank_questions.select_related("question__bank"):
        score, note = entry(Score.QUESTION, str(sq.question_id))
        bank_questions.append({"bank": sq.question.bank.title, "question": sq.question.text,
                               "answer": sq.question.answer, "score": score, "note": note})
    hints = [
        {"number": r.index + 1, "prompt": guide["hints"][r.index]["prompt"],
         "revealed_at": _when(r.revealed_at), "into_session": _offset(session, r.revealed_at),
         "revealed_by": r.revealed_by.get_username()}
        for r in session.hint_reveals.select_related("revealed_by")
    ]
    runs = [
        {"id": run.pk, "at": _when(run.created_at),
         "into_session": _offset(session, run.created_at),
         "requested_by": run.requested_by, "status": run.status, "verdict": run.verdict,
         "verdict_label": verdict_label(run.verdict) or run.get_status_display(),
         "speedup": run.metrics.get("speedup"), "target_speedup": run.metrics.get("target_speedup")}
        for run in session.runs.order_by("created_at")
    ]
    revisions = list(session.revisions.order_by("number"))
    signals = [{**row, "at": _when(row["at"])} for row in signal_rows(session)]
    card = {
        "session": {
            "id": session.pk,
            "candidate_name": session.candidate_name,
            "candidate_email": session.candidate_email,
            "interviewer": interviewer_display_name(session),
            "exercise": version.title,
            "exercise_slug": version.exercise.slug,
            "exercise_version": version.number,
            "state": session.state,
            "started_at": _when(session.started_at),
            "ended_at": _when(session.ended_at),
        },
        "recommendation": session.get_recommendation_display() if session.recommendation else "",
        "rubric": rubric,
        # Totals over the criteria actually scored: an unscored one is not a zero.
        "rubric_total": sum(r["score"] for r in scored),
        "rubric_max": sum(r["max"] for r in scored),
        "rubric_scored": len(scored),
        "rubric_count": len(rubric),
        "followups": followups,
        "bank_questions": bank_questions,
        "notes": session.notes,
        "hints": hints,
        "runs": runs,
        "best_speedup": max((r["speedup"] for r in runs if r["verdict"] == "accepted"
                             and r["speedup"]), default=None),
        "final_code": session.pad_text if session.pad_version or not revisions
        else revisions[-1].code,
        "chat": [{"at": _when(m.created_at), "into_session": _offset(session, m.created_at),
                  "role": m.role, "author": m.author, "text": m.text}
                 for m in session.chat_messages.all()],
        "pad_updates": session.pad_version,
        # Pastes and absences, in the server's order and times (see interviews/integrity).
        "integrity": signals,
        "integrity_summary": signal_summary(signals),
        "revision_count": len(revisions),
    }
    if for_export:
        card["revisions"] = [{"number": r.number, "at": _when(r.created_at), "code": r.code}
                             for r in revisions]
    return card


def md_text(value) -> str:
    """Text from people (the candidate's name and chat, notes) as literal Markdown: every
    character Markdown or HTML could read as inline markup is escaped (``& < >`` as
    entities, the rest with a backslash: CommonMark's rule), and so is a marker that would
    start a block (heading, list) at the start of a line: a viewer shows the text and
    renders none of it."""
    text = str(value or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([\\`*_\[\]!|~])", r"\\\1", text)
    return re.sub(r"^(\s*)([#+\-=]|\d+(?=[.)]))", r"\1\\\2", text, flags=re.MULTILINE)


def md_line(value) -> str:
    """As md_text, on one line (a list item cannot be broken out of)."""
    return md_text(" ".join(str(value or "").split()))


def scorecard_markdown(session: InterviewSession) -> str:
    card = scorecard_build(session)
    s = card["session"]
    lines = [
        f"# Scorecard: {md_line(s['candidate_name'])}",
        "",
        f"- Exercise: {md_line(s['exercise'])} (v{s['exercise_version']})",
        f"- Interviewer: {md_line(s['interviewer'])}",
        f"- Started: {s['started_at'] or 'not started'} · Ended: {s['ended_at'] or '—'}",
        f"- Recommendation: **{card['recommendation'] or 'none yet'}**",
        f"- Rubric: {card['rubric_total']} / {card['rubric_max']} "
        f"({card['rubric_scored']} of {card['rubric_count']} criteria scored)",
        "",
        "## Rubric",
        "",
    ]
    for r in card["rubric"]:
        score = f"{r['score']} ({r['label']})" if r["score"] is not None else "not scored"
        lines.append(f"- **{md_line(r['title'])}**: {score}"
                     + (f" — {md_line(r['note'])}" if r["note"] else ""))
    lines += ["", "## Hints revealed", ""]
    lines += [f"- Hint {h['number']} at {h['into_session']} by {md_line(h['revealed_by'])}"
              for h in card["hints"]] or ["- none"]
    lines += ["", "## Runs", ""]
    lines += [
        f"- {r['into_session'] or r['at']} · {r['requested_by']} · {r['verdict_label']}"
        + (f" · {r['speedup']:.2f}x" if r["speedup"] else "")
        for r in card["runs"]
    ] or ["- none"]
    summary = card["integrity_summary"]
    lines += ["", "## Integrity signals", "",
              f"{summary['pastes']} paste(s), {summary['outside_pastes']} from outside the pad "
              f"({summary['outside_chars']} characters); left the page {summary['away']} "
              f"time(s), {summary['away_seconds']} s in all.", ""]
    lines += [f"- {md_line(s['into_session'] or s['at'])} · {md_line(s['label'])}"
              for s in card["integrity"]] or ["- none"]
    lines += ["", "## Follow-up questions", ""]
    for f in card["followups"]:
        score = f["score"] if f["score"] is not None else "not scored"
        lines.append(f"- {md_line(f['question'])} — {score}"
                     + (f" — {md_line(f['note'])}" if f["note"] else ""))
    if card["bank_questions"]:
        lines += ["", "## Q&A questions", ""]
        for q in card["bank_questions"]:
            score = q["score"] if q["score"] is not None else "not scored"
            lines.append(f"- {md_line(q['question'])} — {score}"
                         + (f" — {md_line(q['note'])}" if q["note"] else ""))
    if card["chat"]:
        lines += ["", "## Chat", ""]
        lines += [f"- {m['into_session'] or m['at']} **{md_line(m['author'])}**: "
                  f"{md_line(m['text'])}" for m in card["chat"]]
    fence = code_fence(card["final_code"])
    notes = "\n".join(md_text(line) for line in card["notes"].splitlines())
    lines += ["", "## Notes", "", notes or "(none)", "", "## Final code", "",
              f"{fence}python", card["final_code"].rstrip(), fence, ""]
    return "\n".join(lines)


def code_fence(code: str) -> str:
    """A backtick fence longer than any backtick run in `code`, so the code cannot close
    it early and turn the rest of the file into Markdown (CommonMark allows any length)."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    return "`" * max(3, longest + 1)


def playback_data(session: InterviewSession) -> dict:
    """The pad's history for the scorecard player: times in ms from the start, who typed,
    the change; markers for each run and hint reveal on the same time line."""
    start = session.started_at or session.created_at

    def ms(moment) -> int:
        return max(0, int((moment - start).total_seconds() * 1000))

    updates = [[ms(created), role, author, changes] for created, role, author, changes in
               session.pad_updates.order_by("version")
               .values_list("created_at", "role", "author", "changes")]
    markers = [{"t": ms(run.created_at), "kind": "run", "anchor": f"run-row-{run.pk}",
                "label": f"Run by {run.requested_by}: "
                         f"{verdict_label(run.verdict) or run.get_status_display()}"}
               for run in session.runs.order_by("created_at")]
    markers += [{"t": ms(reveal.revealed_at), "kind": "hint", "anchor": "hints-revealed",
                 "label": f"Hint {reveal.index + 1} revealed"}
                for reveal in session.hint_reveals.all()]
    markers += [{"t": ms(row["at"]), "kind": f"signal-{row['kind']}",
                 "anchor": "integrity-signals", "label": row["label"]}
                for row in signal_rows(session)]
    markers.sort(key=lambda m: m["t"])
    return {"base": session.pad_base, "updates": updates, "markers": markers}
