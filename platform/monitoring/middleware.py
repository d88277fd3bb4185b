"""Health probes and the metrics scrape, answered before anything looks at the Host header.

A load balancer, Docker's health check, a Prometheus scrape or an operator's
`curl http://127.0.0.1:8000/healthz` reaches the web server by address, not by the public
name in ALLOWED_HOSTS, so Django's host validation would answer 400 to the very request
that asks whether the site is up. These views reveal nothing a host check protects (no
page, no link built from the host), so they are answered first. /metrics keeps its own
check: the bearer token, or a request from this machine (monitoring/metrics.py).
"""

PROBES = {"/healthz", "/healthz/", "/healthz/live", "/healthz/live/"}
METRICS = "/metrics"


class HealthProbeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        if request.path in PROBES:
            from monitoring import views

            view = views.liveness if "live" in request.path else views.healthz
            return view(request)
        if request.path == METRICS:
            from monitoring import views

            return views.metrics_view(request)
        return self.get_response(request)
