from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _build_search_index(sender, using="default", **kwargs) -> None:
    """SQLite's FTS5 index of the questions (qa/search.py), re-created after each migrate."""
    from qa.search import sqlite_index_build

    sqlite_index_build(using)


class QaConfig(AppConfig):
    name = "qa"
    verbose_name = "Question banks"

    def ready(self) -> None:
        post_migrate.connect(_build_search_index, sender=self,
                             dispatch_uid="qa.build_search_index")
