"""/healthz, /metrics and the superusers' system status page."""

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from prometheus_client import CONTENT_TYPE_LATEST

from monitoring import metrics
from monitoring.health import health_report
from monitoring.status import system_status


@login_not_required
@never_cache
def healthz(request):
    """200 when the database (it reads and writes), Redis and a worker that grades
    candidates' runs (queue `default`) are up; 503 otherwise. Anyone gets the status;
    what failed and the workers' host names only a request that may read /metrics (its
    bearer token, or this machine) gets."""
    report = health_report()
    status = 200 if report["status"] == "ok" else 503
    if not metrics.metrics_allowed(request):
        report = {"status": report["status"]}
    return JsonResponse(report, status=status)


@login_not_required
@never_cache
def liveness(request):
    """The web process answers: for a container's liveness probe (no dependencies)."""
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
def metrics_view(request):
    if not metrics.metrics_allowed(request):
        return HttpResponseForbidden("Metrics need the bearer token (OVERLAP_METRICS_TOKEN), "
                                     "or a request from this machine.",
                                     content_type="text/plain")
    return HttpResponse(metrics.render(), content_type=CONTENT_TYPE_LATEST)


@never_cache
def status_page(request):
    if not request.user.is_superuser:
        raise PermissionDenied("The system status page is for superusers.")
    return render(request, "monitoring/status.html", {"status": system_status()})
