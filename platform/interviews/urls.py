from django.urls import path

from interviews import views

app_name = "interviews"
urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("new/", views.session_new, name="session_new"),
    path("<int:pk>/", views.console, name="console"),
    path("<int:pk>/start/", views.session_start, name="start"),
    path("<int:pk>/end/", views.session_end, name="end"),
    path("<int:pk>/phase/", views.session_phase, name="phase"),
    path("<int:pk>/code/", views.live_code, name="live_code"),
    path("<int:pk>/runs/", views.runs_panel, name="runs"),
    path("<int:pk>/hints/<int:index>/reveal/", views.hint_reveal, name="hint_reveal"),
    path("<int:pk>/score/", views.score, name="score"),
    path("<int:pk>/notes/", views.notes, name="notes"),
    path("<int:pk>/readonly/", views.readonly, name="readonly"),
    path("<int:pk>/link/", views.renew_link, name="renew_link"),
    path("<int:pk>/invite/", views.invite, name="invite"),
    path("<int:pk>/questions/", views.questions, name="questions"),
    path("<int:pk>/recommendation/", views.recommendation, name="recommendation"),
    path("<int:pk>/scorecard/", views.scorecard, name="scorecard"),
    path("<int:pk>/scorecard.json", views.scorecard_json, name="scorecard_json"),
    path("<int:pk>/playback.json", views.playback_json, name="playback"),
    path("<int:pk>/scorecard.md", views.scorecard_markdown, name="scorecard_markdown"),
    path("<int:pk>/revisions/", views.revision, name="revision"),
    path("<int:pk>/integrity/", views.integrity_panel, name="integrity"),
    path("<int:pk>/clock/", views.clock, name="clock"),
]
