from django.contrib import admin

from catalog.models import Exercise, ExerciseVersion, Tag
from catalog.selectors import repository_newer


class VersionInline(admin.TabularInline):
    model = ExerciseVersion
    fields = ("number", "title", "content_hash", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Exercise)
class ExerciseAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "difficulty", "track", "current_version",
                    "repository_newer", "updated_at")
    list_filter = ("difficulty", "track", "tags")
    search_fields = ("title", "slug")
    inlines = [VersionInline]

    @admin.display(description="Repository has")
    def repository_newer(self, exercise):
        version = repository_newer(exercise=exercise).get(exercise.pk)
        if version is None:
            return "-"
        return (f"newer folder v{version.number}, not current "
                f"(sync_content --take-repository {exercise.slug})")


@admin.register(ExerciseVersion)
class ExerciseVersionAdmin(admin.ModelAdmin):
    list_display = ("exercise", "number", "title", "created_at")
    readonly_fields = ("content_hash", "created_at")


admin.site.register(Tag)
