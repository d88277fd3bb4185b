from django.contrib import admin

from qa.models import ChecklistItem, Question, QuestionBank


class ChecklistInline(admin.TabularInline):
    model = ChecklistItem
    extra = 0


@admin.register(QuestionBank)
class QuestionBankAdmin(admin.ModelAdmin):
    list_display = ("title", "slug")
    inlines = [ChecklistInline]


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ("key", "bank", "kind", "topic", "retired")
    list_filter = ("bank", "kind", "retired")
    search_fields = ("text", "answer", "topic")
