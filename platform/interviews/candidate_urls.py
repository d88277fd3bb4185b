from django.urls import path

from interviews import candidate_views as views

app_name = "candidate"
urlpatterns = [
    path("<str:token>/", views.workspace, name="workspace"),
    path("<str:token>/state/", views.state, name="state"),
    path("<str:token>/save/", views.save, name="save"),
    path("<str:token>/run/", views.run, name="run"),
    path("<str:token>/runs/<int:run_id>/", views.run_status, name="run_status"),
    path("<str:token>/hints/", views.hints, name="hints"),
    path("<str:token>/runs/", views.run_list, name="run_list"),
    path("<str:token>/clock/", views.clock, name="clock"),
]
