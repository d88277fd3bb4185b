from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from monitoring import views as monitoring

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="catalog:exercise_list"), name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/status/", monitoring.status_page, name="system_status"),
    path("admin/", admin.site.urls),
    path("exercises/", include("catalog.urls")),
    path("questions/", include("qa.urls")),
    path("sessions/", include("interviews.urls")),
    path("c/", include("interviews.candidate_urls")),
    path("authoring/", include("authoring.urls")),
    path("healthz", monitoring.healthz, name="healthz"),
    path("healthz/live", monitoring.liveness, name="liveness"),
    path("metrics", monitoring.metrics_view, name="metrics"),
]

# A database that cannot be reached answers 503 "briefly unavailable", other errors 500.
handler500 = "security.errors.server_error"
