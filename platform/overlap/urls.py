from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.urls import include, path
from django.views.generic import RedirectView


@login_not_required
def healthz(request):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="catalog:exercise_list"), name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("exercises/", include("catalog.urls")),
    path("questions/", include("qa.urls")),
    path("sessions/", include("interviews.urls")),
    path("c/", include("interviews.candidate_urls")),
    path("authoring/", include("authoring.urls")),
    path("healthz", healthz, name="healthz"),
]
