from django.contrib import admin

from authoring.models import ExerciseDraft, Publication, Validation, ValidationPart


@admin.register(ExerciseDraft)
class DraftAdmin(admin.ModelAdmin):
    list_display = ("slug", "based_on", "updated_by", "updated_at")
    search_fields = ("slug",)
    readonly_fields = ("created_at", "updated_at")


class PartInline(admin.TabularInline):
    model = ValidationPart
    fields = ("position", "file", "status", "expected", "verdict", "speedup", "ok", "problem")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Validation)
class ValidationAdmin(admin.ModelAdmin):
    list_display = ("pk", "draft", "status", "passed", "created_at", "finished_at")
    list_filter = ("status", "passed")
    readonly_fields = ("content_hash", "created_at", "started_at", "finished_at", "updated_at")
    exclude = ("files",)
    inlines = [PartInline]


@admin.register(Publication)
class PublicationAdmin(admin.ModelAdmin):
    list_display = ("version", "published_by", "validation", "created_at")
