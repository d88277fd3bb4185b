"""Searching the question banks with the database's own full-text search.

PostgreSQL (tests, production): a weighted ``tsvector`` built in the query (question
text first, then topic, tags and bank title, then answers) matched by a ``tsquery`` of
prefixes. SQLite (`make run`): an FTS5 table, ``qa_question_fts``, kept up to date by
triggers on ``qa_question`` and rebuilt after every ``migrate`` (a table Django rebuilds
loses its triggers), ranked by bm25 with the same weights.

Both read the words of the query the same way: each word is a prefix (live search
matches while the word is typed), every word must match somewhere, and words are
stemmed by the English rules ("gradients" finds "gradient"). Hyphenated words are also
indexed joined ("All-Reduce" as "AllReduce"), so "allreduce", "all-reduce" and
"all reduce" find the same question.
"""

import re

from django.db import OperationalError, connections
from django.db.models import Case, F, IntegerField, QuerySet, TextField, Value, When
from django.db.models.functions import Cast, Replace

CONFIG = "english"  # PostgreSQL's text search configuration for the banks' language
MAX_WORDS = 8
MAX_WORD_LENGTH = 64
WORD = re.compile(r"\w+(?:-\w+)*")
FTS_TABLE = "qa_question_fts"
# bm25 weights of the FTS5 columns (text, terms, body), like PostgreSQL's A, B and C.
FTS_WEIGHTS = "10.0, 4.0, 1.0"


def query_words(query: str) -> list[tuple[str, ...]]:
    """The words searched for, each as its parts ("all-reduce" -> ("all", "reduce")):
    letters and digits only, so no query syntax of either engine can be written through
    the search box."""
    words = [tuple(part[:MAX_WORD_LENGTH] for part in word.split("-"))
             for word in WORD.findall((query or "").lower())]
    return list(dict.fromkeys(words))[:MAX_WORDS]


def search(questions: QuerySet, query: str) -> QuerySet:
    """``questions`` that match ``query``, best first (unchanged when it has no words)."""
    words = query_words(query)
    if not words:
        return questions
    vendor = connections[questions.db].vendor
    if vendor == "postgresql":
        return _postgresql(questions, words)
    if vendor == "sqlite":
        return _sqlite(questions, words)
    return _literal(questions, words)


# --- PostgreSQL ------------------------------------------------------------------------

def _joined(expression):
    """The text with its hyphens removed: "All-Reduce" -> "AllReduce"."""
    return Replace(expression, Value("-"), Value(""), output_field=TextField())


def _postgresql(questions: QuerySet, words: list[tuple[str, ...]]) -> QuerySet:
    from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

    tags = Cast("tags", TextField())
    vector = (
        SearchVector(F("text"), _joined(F("text")), weight="A", config=CONFIG)
        + SearchVector(F("topic"), _joined(F("topic")), tags, _joined(tags),
                       F("bank__title"), weight="B", config=CONFIG)
        + SearchVector(F("answer"), F("scenario"), F("root_cause"), _joined(F("answer")),
                       _joined(F("scenario")), _joined(F("root_cause")), weight="C",
                       config=CONFIG)
    )
    # Words only (see query_words): each a prefix; a hyphenated one as itself (the parser
    # reads it as PostgreSQL indexed it, "all" being a stop word) or joined.
    terms = [f"{parts[0]}:*" if len(parts) == 1 else
             f"({'-'.join(parts)}:* | {''.join(parts)}:*)" for parts in words]
    raw = " & ".join(terms)
    if not _tsquery_has_words(questions.db, raw):
        return questions  # only words too common to index ("what is")
    query = SearchQuery(raw, search_type="raw", config=CONFIG)
    return (questions.annotate(search_document=vector, search_rank=SearchRank(vector, query))
            .filter(search_document=query)
            .order_by("-search_rank", "bank__title", "kind", "position"))


def _tsquery_has_words(using: str, raw: str) -> bool:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT numnode(to_tsquery(%s::regconfig, %s))", [CONFIG, raw])
        return cursor.fetchone()[0] > 0


# --- SQLite FTS5 -----------------------------------------------------------------------

def _columns(row: str) -> tuple[str, str, str]:
    """The SQL filling the FTS5 columns (text, terms, body) from a qa_question row."""
    def both(column: str) -> str:
        value = f"coalesce({row}.{column}, '')"
        return f"{value} || ' ' || replace({value}, '-', '')"

    return (
        both("text"),
        f"{both('topic')} || ' ' || {both('tags')} || ' ' || coalesce((SELECT title FROM "
        f"qa_questionbank WHERE id = {row}.bank_id), '')",
        f"{both('answer')} || ' ' || {both('scenario')} || ' ' || {both('root_cause')}",
    )


def _insert_sql(row: str, source: str = "") -> str:
    text, terms, body = _columns(row)
    values = f"SELECT {row}.id, {text}, {terms}, {body} FROM qa_question AS {row}" \
        if source else f"VALUES ({row}.id, {text}, {terms}, {body})"
    return f"INSERT INTO {FTS_TABLE} (rowid, text, terms, body) {values}"


def sqlite_index_build(using: str = "default") -> None:
    """Create (or re-create) the FTS5 table and its triggers, and index every question.
    Idempotent; called after each ``migrate`` on SQLite."""
    db = connections[using]
    if db.vendor != "sqlite":
        return
    statements = [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(text, terms, body, "
        "tokenize='porter unicode61 remove_diacritics 2')",
        "DROP TRIGGER IF EXISTS qa_question_fts_insert",
        "DROP TRIGGER IF EXISTS qa_question_fts_update",
        "DROP TRIGGER IF EXISTS qa_question_fts_delete",
        f"CREATE TRIGGER qa_question_fts_insert AFTER INSERT ON qa_question BEGIN "
        f"{_insert_sql('new')}; END",
        f"CREATE TRIGGER qa_question_fts_update AFTER UPDATE ON qa_question BEGIN "
        f"DELETE FROM {FTS_TABLE} WHERE rowid = old.id; {_insert_sql('new')}; END",
        f"CREATE TRIGGER qa_question_fts_delete AFTER DELETE ON qa_question BEGIN "
        f"DELETE FROM {FTS_TABLE} WHERE rowid = old.id; END",
        f"DELETE FROM {FTS_TABLE}",
        _insert_sql("q", source="qa_question"),
    ]
    with db.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _sqlite_ranked_ids(words: list[tuple[str, ...]], using: str) -> list[int]:
    # Each word quoted (letters and digits only), a prefix, all required; a hyphenated
    # one as the phrase or the joined word.
    match = " AND ".join(f'"{parts[0]}"*' if len(parts) == 1 else
                         f'("{" ".join(parts)}"* OR "{"".join(parts)}"*)' for parts in words)
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s "
                       f"ORDER BY bm25({FTS_TABLE}, {FTS_WEIGHTS})", [match])
        return [row[0] for row in cursor.fetchall()]


def _sqlite(questions: QuerySet, words: list[tuple[str, ...]]) -> QuerySet:
    using = questions.db
    try:
        ids = _sqlite_ranked_ids(words, using)
    except OperationalError:  # a database migrated before the index existed
        sqlite_index_build(using)
        ids = _sqlite_ranked_ids(words, using)
    if not ids:
        return questions.none()
    order = Case(*(When(pk=pk, then=Value(rank)) for rank, pk in enumerate(ids)),
                 output_field=IntegerField())
    return questions.filter(pk__in=ids).order_by(order)


# --- Anything else: every word somewhere, any case -------------------------------------

def _literal(questions: QuerySet, words: list[tuple[str, ...]]) -> QuerySet:
    from django.db.models import Q

    for parts in words:
        match = Q()
        for name in ("text", "answer", "topic", "scenario", "root_cause"):
            match |= Q(**{f"{name}__icontains": "-".join(parts)})
        questions = questions.filter(match)
    return questions
