from django.contrib import admin

from catalog.models import Exercise, ExerciseVersion, Tag


class VersionInline(admin.TabularInline):
    model = ExerciseVersion
    fields = ("number", "title", "content_hash", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Exercise)
class ExerciseAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "difficulty", "track", "current_version", "updated_at")
    list_filter = ("difficulty", "track", "tags")
    search_fields = ("title", "slug")
    inlines = [VersionInline]


@admin.register(ExerciseVersion)
class ExerciseVersionAdmin(admin.ModelAdmin):
    list_display = ("exercise", "number", "title", "created_at")
    readonly_fields = ("content_hash", "created_at")


admin.site.register(Tag)
