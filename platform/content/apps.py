from django.apps import AppConfig


class ContentConfig(AppConfig):
    name = "content"
    verbose_name = "Content files"
